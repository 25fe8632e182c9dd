"""Which files a program may read: the project, the include folders, `allow-paths` and the
kernels shipped with pipec. Imports, `load` initial values and waivers' sources find their
files here; one outside is refused (PC110) and never read, so nothing of it can appear in a
report."""

from __future__ import annotations

from pathlib import Path

from ...dsl import Span
from ...dsl.source import real_path
from ..codes import PC110
from ..config import CompileOptions
from ..diagnostics import DiagnosticSink

# the kernels shipped with pipec: importable from any project
SHIPPED_KERNELS = Path(__file__).resolve().parents[2] / "kernels"


class ProjectFiles:
    def __init__(self, options: CompileOptions, sink: DiagnosticSink, main: Path) -> None:
        self.sink = sink
        self.has_project = options.project_root is not None
        self.include_dirs = options.include_dirs
        root = options.project_root or main.parent
        self.allowed_dirs = (root, *options.include_dirs, *options.allow_paths, SHIPPED_KERNELS)

    def allowed(self, path: Path) -> bool:
        return any(path.is_relative_to(folder) for folder in self.allowed_dirs)

    def find(self, base: Path, relative: str) -> tuple[Path | None, bool]:
        """The first existing file the path names inside the allowed folders, and whether its
        reading from `base` lies outside them (refused whether it exists or not). A reading
        from an include folder that lies outside is never looked at: the path is then missing,
        not refused (`kernels/../../x.cu` is no reason to call a typo in `../x.cu` outside)."""
        refused = not self.allowed(real_path(base / relative))
        for folder in (base, *self.include_dirs):
            candidate = real_path(folder / relative)
            if self.allowed(candidate) and candidate.exists() and not candidate.is_dir():
                return candidate, refused  # a FIFO too: reading it is refused
        return None, refused

    def refuse(self, what: str, span: Span) -> None:
        hint = (f"imports and `load` files stay inside {self.allowed_dirs[0]} and the include "
                "folders; list more folders in `allow-paths` under [tool.pipec]")
        if not self.has_project:
            hint = (f"without a pyproject.toml the project is the pipeline's folder, {self.allowed_dirs[0]}: "
                    "add a pyproject.toml with a [tool.pipec] table (for example `include-dirs = "
                    "[\"kernels\"]`) in the folder that holds the pipelines and their kernels, "
                    "or start one with `pipec init`")
        self.sink.add(PC110, f"`{what}` lies outside the project", span, hint)
