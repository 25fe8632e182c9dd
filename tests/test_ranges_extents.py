"""The extent cache of compiler/ranges.py: values by parameter and inputs, never another
parameter's."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from pipec.compiler.model import Extent, Param
from pipec.compiler.ranges import Extents
from pipec.dsl import SourceFile, parse_expression


def _extent(text: str) -> Extent:
    expr = parse_expression(SourceFile(Path("extent"), text), 0, len(text))
    return Extent(expr, expr.span)


def test_a_parameter_freed_and_its_id_reused_never_gets_the_old_value():
    extents, launch = Extents(), SimpleNamespace(grid=(1, 1, 1), block=(1, 1, 1))
    four, eight = _extent("4"), _extent("8")
    for _ in range(20):
        # the only allocation between freeing one parameter and making the next: CPython
        # places the new one where the old one was, so the two share an id
        assert extents.value(Param(0, "x", "pointer", None, extent=four), launch, {}) == 4
        assert extents.value(Param(0, "x", "pointer", None, extent=eight), launch, {}) == 8
