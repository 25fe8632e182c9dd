"""The extent cache of compiler/ranges.py: values by parameter and inputs, never another
parameter's."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from stage_helpers import KERNELS, check_text
from pipec.compiler.model import Extent, Param
from pipec.compiler.ranges import Extents, extent_value
from pipec.dsl import SourceFile, parse_expression

ACCESS_KERNELS = KERNELS.parent / "access_kernels.cu"


def _extent(text: str) -> Extent:
    expr = parse_expression(SourceFile(Path("extent"), text), 0, len(text))
    return Extent(expr, expr.span)


def _launch(extent: Extent) -> SimpleNamespace:
    kernel = SimpleNamespace(params=(Param(0, "x", "pointer", None, extent=extent),))
    return SimpleNamespace(kernel=kernel, args=(), grid=(1, 1, 1), block=(1, 1, 1))


def test_a_kernel_freed_and_its_id_reused_never_gets_the_old_values():
    extents = Extents()
    four, eight = _extent("4"), _extent("8")
    for _ in range(20):
        # the only allocations between freeing one kernel and making the next: CPython places
        # the new ones where the old ones were, so the two share ids
        assert extents.of_launch(_launch(four)) == (4,)
        assert extents.of_launch(_launch(eight)) == (8,)


@pytest.mark.parametrize("text, value", [
    ("n * blockDim.x + gridDim.y", 23),       # dimensions inside nested operations
    ("-n + max(n, 4) * 2", 5),                # a unary operator and a call
    ("blockDim.x * -n", -20),                 # a unary operator after another operand
    ("blockDim.w", None),                     # no such axis
    ("n / 2.0", None),                        # not an integer
    ("n > 0", None),                          # nor a boolean
    ("m + 1", None),                          # `m` is no scalar bound at the launch
])
def test_an_extent_is_an_integer_computed_from_the_launch(text, value):
    launch = SimpleNamespace(grid=(2, 3, 1), block=(4, 1, 1))
    assert extent_value(Param(0, "x", "pointer", None, extent=_extent(text)), launch, {"n": 5}) == value


def test_an_extent_narrows_a_slice_and_never_widens_or_empties_it():
    result = check_text("""
        buffer y: f32[16]
        step {
            launch fill_first<<<1, 16>>>(4, y[4:12])
            launch fill_first<<<1, 16>>>(0, y[4:12])
            launch fill_first<<<1, 16>>>(10, y[4:12])
        }
    """, header=f'from "{ACCESS_KERNELS}" import fill_first\n')
    assert [[(a.start, a.stop) for a in node.accesses] for node in result.program.step.items] == [
        [(4, 8)], [(4, 12)], [(4, 12)]]
