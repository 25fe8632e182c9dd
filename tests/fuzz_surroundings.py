"""What surrounds a fuzzed `.pipe` program (tests/test_fuzz.py): a library it may import (with
bindings, missing names, a cycle), `-D` overrides, a `pyproject.toml` with a `[tool.pipec]`
table of any shape, and environment variables pipec reads. Each piece is valid most of the time
and broken now and then, so that the oracle meets both: a broken one must be one usage error
(exit 2, one line), never a traceback, and never a silent pass."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

from hypothesis import strategies as st

LIBRARY = "lib.pipe"
# A library's own constants, graph and buffer; `from "lib.pipe" import ...` names some of them
# (and a name it lacks), `import "lib.pipe" with (...)` binds its constants.
LIBRARY_TEXTS = (
    "const WIDTH = 8\nconst DEPTH = 2\nbuffer shared: f32[WIDTH]\ngraph clear {\n    fill shared = 0\n}\n",
    'const WIDTH = 4\nimport "fuzzed.pipe"\n',  # an import cycle back to the program (test_fuzz.PROGRAM)
    "const WIDTH = \n",  # a syntax error in the imported file
    "const WIDTH = 1 / 0\ngraph clear(n) {\n    fill shared = n\n}\n",
)
IMPORTS = ('import "lib.pipe"', 'from "lib.pipe" import WIDTH', 'from "lib.pipe" import WIDTH, clear, nope',
           'import "lib.pipe" with (WIDTH = 16)', 'import "lib.pipe" with (WIDTH = C0, DEPTH = RANK)',
           'import "lib.pipe" with (NOPE = 1)', 'import "missing.pipe"', 'import "../outside.pipe"')
# (key, values): `[tool.pipec]` settings, right and wrong
SETTINGS = {
    "select": ['["ALL"]', '["PC3", "PC4"]', '["PC1"]', '["unused-buffer"]', '["PC999"]', "[]", '[""]', '"PC3"'],
    "ignore": ['["PC402"]', '["PC3"]', '["nope"]', "[1]"],
    "lanes": ["1", "4", "0", "-1", "true", '"2"'],
    "arch": ['"sm_90"', '"sm_80"', '"sm_1"', '"x"', "90"],
    "include-dirs": ['["."]', '["missing"]', '["a\\u0000b"]', '"."'],
    "colour": ['"red"'],
}
# a table of settings most of the time (and those are mostly right), so that most inputs reach
# the checks instead of stopping at a usage error
CONFIG_SHAPES = ("[tool.pipec]\n{settings}",) * 6 + ("tool = 3\n", "[tool]\npipec = 3\n", "[tool.pipec\n", "")
ENVIRONMENT = {
    "PIPEC_OUTPUT_FORMAT": ["json", "text", "sarif", "nope", ""],
    "NO_COLOR": ["1", ""], "FORCE_COLOR": ["1", ""],
    "PIPEC_NCCL_TIMEOUT": ["abc", "-1", "30"], "PIPEC_RENDEZVOUS_TIMEOUT": ["abc", "1e9"],
}
DEFINES = ("C0=3", "C1=C0 + 1", "C0=1 / 0", "C2=true", "C0=", "1x=2", "NOPE=1", "RANK=1", "WORLD_SIZE=2",
           "C0=" + "9" * 400, 'C1="word"')


@dataclass(frozen=True)
class Surroundings:
    """Where a fuzzed program is checked: the files next to it, the command line, the environment."""

    imports: tuple[str, ...] = ()  # statements put at the top of the program
    library: str | None = None  # lib.pipe's text
    config: str | None = None  # pyproject.toml's text
    defines: tuple[str, ...] = ()  # `-D` arguments
    env: dict[str, str] = field(default_factory=dict)

    def write(self, folder: Path) -> None:
        for name, text in ((LIBRARY, self.library), ("pyproject.toml", self.config)):
            path = folder / name
            if text is None:
                path.unlink(missing_ok=True)
            else:
                path.write_text(text)

    @contextlib.contextmanager
    def environment(self) -> Iterator[None]:
        with mock.patch.dict(os.environ, self.env):
            yield

    def argv(self) -> list[str]:
        return [arg for define in self.defines for arg in ("-D", define)]

    def describe(self) -> dict:
        """What a finding needs to be reproduced besides the program (scripts/fuzz.py keeps it)."""
        return {"library": self.library, "pyproject.toml": self.config, "defines": list(self.defines),
                "env": self.env}


@st.composite
def configs(draw) -> str | None:
    if draw(st.integers(0, 2)):
        return None
    keys = draw(st.lists(st.sampled_from(sorted(SETTINGS)), unique=True, max_size=2))
    settings = "".join(f"{key} = {draw(st.sampled_from(SETTINGS[key][:2] * 3 + SETTINGS[key]))}\n"
                       for key in keys)
    return draw(st.sampled_from(CONFIG_SHAPES)).format(settings=settings)


@st.composite
def surroundings(draw) -> Surroundings:
    return Surroundings(
        imports=tuple(draw(st.lists(st.sampled_from(IMPORTS), max_size=2))),
        library=draw(st.one_of(st.none(), st.sampled_from(LIBRARY_TEXTS))),
        config=draw(configs()),
        defines=tuple(draw(st.lists(st.sampled_from(DEFINES), max_size=2))),
        env={name: draw(st.sampled_from(values)) for name, values in ENVIRONMENT.items() if draw(st.booleans())},
    )
