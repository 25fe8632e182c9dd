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


def _launch(extent: Extent) -> SimpleNamespace:
    kernel = SimpleNamespace(params=(Param(0, "x", "pointer", None, extent=extent),))
    return SimpleNamespace(kernel=kernel, grid=(1, 1, 1), block=(1, 1, 1))


def test_a_kernel_freed_and_its_id_reused_never_gets_the_old_values():
    extents = Extents()
    four, eight = _extent("4"), _extent("8")
    for _ in range(20):
        # the only allocations between freeing one kernel and making the next: CPython places
        # the new ones where the old ones were, so the two share ids
        assert extents.of_launch(_launch(four), {}) == (4,)
        assert extents.of_launch(_launch(eight), {}) == (8,)
