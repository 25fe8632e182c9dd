"""The live-update record (compiler/live.py, compiler/live_record.py, docs/plan.md "Live updates")
against the compiler itself, for every pipeline in pipelines/ and the fixtures:

- applying the record (runtime/live.py, which a bundle's pipeline runs) to new values of
  constants it says can change in place gives exactly the plan that compiling again with those
  `-D` values gives: every kernel node, every other node, the record's values and sites (what
  the record says each constant reaches stays as compiled, which is wider once a constant
  derived from another is given a value of its own); and when the record refuses the values,
  the compiler refuses them too (or they need integers beyond the record's 127 bits, the one
  documented difference);
- a constant the record calls structural is one whose new values change more than kernel
  scalar arguments and launch shapes: a value among a few nearby ones changes the recompiled
  plan in something else, or makes it fail to compile (runtime/update.py's comparison decides).

The values are drawn by hypothesis: near the compiled value, far from it, of the other kinds."""

from __future__ import annotations

import math
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipec.compiler import compile_file, load_settings
from pipec.compiler.config import override
from pipec.plan.arithmetic import literal
from pipec.plan.live import decode
from pipec.plan.schema import Plan
from pipec.runtime.live import live_update
from pipec.runtime.update import UpdateRefused, changed_kernels

ROOT = Path(__file__).resolve().parents[1]
FILES = [*sorted((ROOT / "pipelines").glob("*.pipe")), *sorted((ROOT / "pipelines" / "examples").glob("*.pipe")),
         *sorted((ROOT / "tests" / "fixtures" / "runtime").glob("*.pipe")), ROOT / "tests" / "fixtures" / "live" / "flows.pipe"]
# What the record may refuse that the compiler computes: integers past 127 bits (plan/live.py).
BEYOND_THE_RECORD = "beyond 2**127"


@cache
def compiled(path: Path, defines: tuple[tuple[str, str], ...] = ()) -> Plan | None:
    settings = load_settings(path)
    return compile_file(path, override(settings, defines=defines) if defines else settings).plan


def recompiled(path: Path, changes: dict) -> Plan | None:
    return compiled(path, tuple(sorted((name, literal(value)) for name, value in changes.items())))


def _constants(path: Path, live: bool) -> list:
    plan = compiled(path)
    assert plan is not None, f"{path} does not compile"
    return [v for v in plan.live.values if v.updatable and (v.structural is None) == live]


def _near(value):
    """Values of the kinds a constant may be given, most of them near `value`."""
    floats = st.floats(allow_nan=False, allow_infinity=False)
    edges = st.sampled_from([0, 1, -1, 2, 255, 256, 65535, 65536, 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, 2**64,
                             -2**63, -2**63 - 1, 2**100])
    others = st.one_of(edges, st.integers(-2**70, 2**70), floats, st.booleans())
    if isinstance(value, bool):
        return st.one_of(st.booleans(), st.booleans(), st.sampled_from([0, 1, 2]))
    if isinstance(value, int):
        near = st.integers(-3, 3).map(lambda d: value + d)
        scaled = st.sampled_from([2, 4, 8]).flatmap(lambda k: st.sampled_from([value * k, value // k]))
        return st.one_of(near, near, scaled, others)
    if isinstance(value, float):
        scaled = st.floats(0.01, 100.0).map(lambda k: value * k)
        return st.one_of(scaled, scaled, st.floats(-1e6, 1e6), others)
    return others


LIVE = [(path, constant.name) for path in FILES for constant in _constants(path, live=True)]
STRUCTURAL = [(path, constant.name) for path in FILES for constant in _constants(path, live=False)]


@pytest.mark.parametrize("path", sorted({path for path, _ in LIVE}), ids=lambda p: p.stem)
@settings(max_examples=40)
@given(data=st.data())
def test_applying_the_record_is_compiling_again(path, data):
    plan = compiled(path)
    names = data.draw(st.lists(st.sampled_from([name for p, name in LIVE if p == path]), min_size=1, max_size=3,
                               unique=True), label="constants")
    current = {v.name: decode(v.value) for v in plan.live.values}
    changes = {name: data.draw(_near(current[name]), label=name) for name in names}
    try:
        updated, refusal = live_update(plan, changes)[0], None
    except UpdateRefused as error:
        updated, refusal = None, str(error)
    again = recompiled(path, changes)
    if refusal is None:
        assert again is not None, f"the record accepts {changes}, the compiler refuses them"
        assert _without_reach(updated) == _without_reach(again)
        for kept, fresh in zip(updated.live.values, again.live.values):  # the reach as compiled, or wider
            assert set(fresh.sites) <= set(kept.sites) and (fresh.structural is None or kept.structural is not None)
    else:
        assert again is None or BEYOND_THE_RECORD in refusal, f"the record refuses what the compiler takes: {refusal}"


def _without_reach(plan: Plan) -> Plan:
    """The plan without what its record says each constant reaches: a constant given a value
    keeps the reach of its compiled definition (docs/plan.md), while compiling again with the
    value sees that it no longer follows the constants it was defined from."""
    values = tuple(replace(v, structural=None, sites=()) for v in plan.live.values)
    return replace(plan, live=replace(plan.live, values=values))


def _candidates(value) -> list:
    """New values for a structural constant, the likeliest to show its structural use first."""
    if isinstance(value, bool):
        return [not value, 2]
    if isinstance(value, int):
        return [value + 1, value * 2, value - 1, value // 2, 0, -1, value + 0.5, not value]
    if isinstance(value, float) and math.isfinite(value):
        return [value * 2, value + 1.0, value / 2, -value, 0.0, 1]
    return [1, 0.5, True]  # a string: no number stands for it


def _changes_more_than_live_fields(path: Path, plan: Plan, name: str, value) -> bool:
    again = recompiled(path, {name: value})
    if again is None:
        return True
    try:
        changed_kernels(plan, again, name)
    except UpdateRefused:
        return True
    return False


@pytest.mark.parametrize("path, name", STRUCTURAL, ids=lambda x: x.stem if isinstance(x, Path) else x)
def test_a_structural_constant_changes_more_than_kernel_fields(path, name):
    plan = compiled(path)
    (spec,) = [v for v in plan.live.values if v.name == name]
    current = decode(spec.value) if spec.value is not None else None
    assert any(_changes_more_than_live_fields(path, plan, name, v) for v in _candidates(current)), \
        f"`{name}` is recorded as structural ({spec.structural}), but no new value changes more than kernel " \
        "scalar arguments and launch shapes"


def test_the_fixture_has_each_kind_of_flow_and_each_structural_use():
    record = {v.name: v for v in compiled(ROOT / "tests" / "fixtures" / "live" / "flows.pipe").live.values}
    for name in ("RATE", "TAG", "SHIFT", "BIG", "FLAG", "WIDE", "THREADS", "BOUNDED", "SMEM", "CLUSTER_GRID",
                 "PERIOD", "REPS", "MIXED", "BITS", "PICK", "LIMITED"):
        assert record[name].structural is None and record[name].sites, name
    for name, use in (("N", "a buffer's dimension"), ("TIMES", "a loop bound at "), ("LOOPS", "a loop bound"),
                      ("BRANCH", "a compile-time `if`"), ("FILL", "a fill's value"),
                      ("INIT_ONLY", "in the `init` block"), ("PER_BLOCK", "the extent of `x` in `per_thread`"),
                      ("COUNT_ARG", "the extent of `x` in `fill_n`"), ("GRAPH_K", "an argument of graph `scaled_by`"),
                      ("TWICE_A", "imported 2 times"), ("TWICE_B", "imported 2 times")):
        assert use in (record[name].structural or ""), (name, record[name].structural)
    assert "(through `lib.pipe:COUNT`)" in record["TIMES"].structural
