"""Settings: `[tool.pipec]` in the nearest pyproject.toml, then the command line on top."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import Error
from ..wording import plural
from . import codes
from ..dsl.source import real_path

KEYS = {"select", "ignore", "include-dirs", "allow-paths", "compiler", "arch", "lanes"}

# The kernels pipec ships (`common.cuh`, the examples' sources), in the repository or the wheel:
# always searched, after the user's folders, so a kernel anywhere can `#include "common.cuh"`.
SHIPPED_KERNELS = Path(__file__).resolve().parent.parent / "kernels"


class ConfigError(Error):
    pass


@dataclass(frozen=True)
class CompileOptions:
    """How kernel sources are compiled and checked, from the settings and the command line."""

    include_dirs: tuple[Path, ...] = ()
    compiler: str = "nvrtc"
    arch: str = "sm_90"
    lanes: int | None = None
    defines: tuple[tuple[str, str], ...] = ()  # NAME=EXPR overriding constants of the main file
    # Imports and `load` files stay inside the project (the folder of the pyproject.toml, or
    # without one the pipeline's own folder), the include folders and these folders.
    project_root: Path | None = None
    allow_paths: tuple[Path, ...] = ()
    # This many steps in one launch of the plan's root graph (`pipec.load(...,
    # steps_per_launch=K)`): a device-side loop, or with `unroll` the step block's body this
    # many times in a row, one graph (compiler/steps_per_launch.py)
    steps_per_launch: int = 1
    unroll: bool = False

    @property
    def virtual_arch(self) -> str:
        return "compute_" + self.arch.split("_", 1)[-1]


@dataclass(frozen=True)
class Settings:
    compile: CompileOptions = field(default_factory=lambda: CompileOptions(include_dirs=(SHIPPED_KERNELS,)))
    select: tuple[str, ...] = ("ALL",)
    ignore: tuple[str, ...] = ()


def find_pyproject(start: Path) -> Path | None:
    folder = start if start.is_dir() else start.parent
    for candidate in (real_path(folder), *real_path(folder).parents):
        path = candidate / "pyproject.toml"
        if path.is_file():
            return path
    return None


def load_settings(start: Path) -> Settings:
    path = find_pyproject(start)
    if path is None:
        return Settings()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"{path}: {error}") from error
    table = _table(data, path)
    unknown = set(table) - KEYS
    if unknown:
        raise ConfigError(f"{path}: unknown {plural('key', len(unknown))} in [tool.pipec]: "
                          f"{', '.join(sorted(unknown))} (known: {', '.join(sorted(KEYS))})")
    base = path.parent
    options = CompileOptions(
        include_dirs=_with_shipped(tuple(real_path(base / d) for d in _paths(table, "include-dirs", path))),
        project_root=real_path(base),
        allow_paths=tuple(real_path(base / d) for d in _paths(table, "allow-paths", path)),
        compiler=_string(table, "compiler", "nvrtc", path),
        arch=_string(table, "arch", "sm_90", path),
        lanes=table.get("lanes"),
    )
    if options.lanes is not None and (type(options.lanes) is not int or options.lanes < 1):
        raise ConfigError(f"{path}: [tool.pipec] lanes must be a positive integer")
    return Settings(options, _codes(table, "select", path) if "select" in table else ("ALL",),
                    _codes(table, "ignore", path))


def _table(data: dict, path: Path) -> dict:
    """`[tool.pipec]`, empty when the file has none; `tool` and `tool.pipec` must be tables."""
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: `tool` must be a table ([tool.pipec] holds pipec's settings)")
    table = tool.get("pipec", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: `tool.pipec` must be a table: write the settings under [tool.pipec]")
    return table


def _codes(table: dict, key: str, path: Path) -> tuple[str, ...]:
    """A selection of rules (`select`, `ignore`): each item must match a rule, and `select`
    must name one, as on the command line: a mistyped or empty one would turn rules off."""
    patterns = _list(table, key, path)
    if bad := codes.unmatched(patterns):
        raise ConfigError(f"{path}: [tool.pipec] {key}: `{bad[0]}` matches no rule code or name "
                          "(see docs/rules.md)")
    if key == "select" and not patterns:
        raise ConfigError(f"{path}: [tool.pipec] select is empty, which would check nothing: "
                          'leave it out to check every rule, or name some (`select = ["PC3"]`)')
    return tuple(patterns)


def _paths(table: dict, key: str, path: Path) -> list[str]:
    folders = _list(table, key, path)
    if any("\0" in folder for folder in folders):
        raise ConfigError(f"{path}: [tool.pipec] {key}: a path holds a NUL character")
    return folders


def _list(table: dict, key: str, path: Path) -> list[str]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: [tool.pipec] {key} must be a list of strings")
    return value


def _string(table: dict, key: str, default: str, path: Path) -> str:
    value = table.get(key, default)
    if not isinstance(value, str) or "\0" in value:
        raise ConfigError(f"{path}: [tool.pipec] {key} must be a string (without NUL characters)")
    return value


def _with_shipped(folders: tuple[Path, ...]) -> tuple[Path, ...]:
    return (*(f for f in folders if f != SHIPPED_KERNELS), SHIPPED_KERNELS)


def override(settings: Settings, **changes) -> Settings:
    """Command-line values on top of the file's; None means "not given"."""
    compile_changes = {k: v for k, v in changes.items()
                       if k in ("include_dirs", "compiler", "arch", "lanes", "defines", "steps_per_launch", "unroll")
                       and v is not None}
    if "include_dirs" in compile_changes:
        compile_changes["include_dirs"] = _with_shipped(settings.compile.include_dirs
                                                     + tuple(compile_changes["include_dirs"]))
    rest = {k: v for k, v in changes.items() if k in ("select", "ignore") and v is not None}
    return replace(settings, compile=replace(settings.compile, **compile_changes), **rest)
