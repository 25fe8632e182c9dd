"""The plan's JSON form reads back into equal objects: every node kind, child graphs, buffers
with every kind of initial value, tuples where the schema says tuples."""

from __future__ import annotations

import json
import math
from dataclasses import fields, is_dataclass
from pathlib import Path

import pytest

from pipec.compiler import cli
from pipec.compiler.emit import plan_json
from pipec.plan.schema import (
    NODE_KINDS, ChildGraphNodeSpec, InitSpec, KernelNodeSpec, Plan, from_json, to_json,
)

ROOT = Path(__file__).resolve().parents[1]
PIPES = [ROOT / "pipelines" / "rl_step.pipe", *sorted((ROOT / "pipelines" / "examples").glob("*.pipe")),
         *sorted((ROOT / "tests" / "fixtures" / "runtime").glob("*.pipe"))]


def _plan(path: Path) -> Plan:
    import pipec

    plan = pipec.check(path).plan
    assert plan is not None, f"{path} does not compile"
    return plan


def _no_lists(value, where="plan"):
    """Sequences in the schema are tuples all the way down (lists would not hash or compare)."""
    assert not isinstance(value, list), where
    if is_dataclass(value):
        for f in fields(value):
            _no_lists(getattr(value, f.name), f"{where}.{f.name}")
    elif isinstance(value, tuple):
        for i, item in enumerate(value):
            _no_lists(item, f"{where}[{i}]")


@pytest.mark.parametrize("path", PIPES, ids=lambda p: p.stem)
def test_plan_json_reads_back_equal(path):
    plan = _plan(path)
    again = from_json(json.loads(plan_json(plan)))
    assert again == plan
    _no_lists(again)
    assert hash(again.graphs) == hash(plan.graphs)


@pytest.mark.parametrize("path", PIPES, ids=lambda p: p.stem)
def test_plan_json_writes_what_json_dumps_writes(path):
    """`plan_json` writes the plan's dataclasses itself, for speed; the text stays exactly that
    of the standard encoder on `to_json`'s data."""
    plan = _plan(path)
    assert plan_json(plan) == json.dumps(to_json(plan), indent=1) + "\n"


def test_the_round_trip_covers_every_node_kind_and_child_graphs():
    kinds = set()
    for path in PIPES:
        plan = _plan(path)
        for graph in plan.graphs:
            kinds |= {type(n) for n in graph.nodes}
    assert kinds == set(NODE_KINDS)


def test_scalars_keep_their_type_and_value():
    plan = _plan(ROOT / "tests" / "fixtures" / "runtime" / "nodes.pipe")
    again = from_json(json.loads(plan_json(plan)))
    scaled = next(n for n in again.leaves(again.step) if n.name == "step/scaled")
    assert isinstance(scaled, KernelNodeSpec)
    factor = scaled.args[2]
    assert (factor.kind, factor.ctype, factor.value) == ("scalar", "f32", 2.0) and type(factor.value) is float
    assert type(scaled.args[3].value) is int
    x = again.buffer("x")
    assert x.init == InitSpec("uniform", (-1.0, 1.0), 3, None) and x.shape == (1000,)
    bumps = [n for n in again.graphs[again.step].nodes if isinstance(n, ChildGraphNodeSpec)]
    assert len(bumps) == 2 and bumps[0].graph != bumps[1].graph


def test_non_finite_and_missing_values_survive():
    plan = _plan(ROOT / "tests" / "fixtures" / "runtime" / "nodes.pipe")
    spec = plan.buffers[0]
    odd = spec.__class__(**{**{f.name: getattr(spec, f.name) for f in fields(spec)},
                            "init": InitSpec("fill", (math.inf,), None, None), "step_first_access": None})
    changed = plan.__class__(**{**{f.name: getattr(plan, f.name) for f in fields(plan)},
                                "buffers": (odd, *plan.buffers[1:]), "init": None})
    assert from_json(json.loads(json.dumps(to_json(changed)))) == changed
    assert plan_json(changed) == json.dumps(to_json(changed), indent=1) + "\n"


def test_pipec_emit_plan_writes_a_readable_plan(tmp_path, capsys):
    path = ROOT / "tests" / "fixtures" / "runtime" / "nodes.pipe"
    out = tmp_path / "plan.json"
    assert cli.main([str(path), "--emit", "plan", "-o", str(out)]) == 0
    assert from_json(json.loads(out.read_text())) == _plan(path)
