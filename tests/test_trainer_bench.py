"""The trainer-shaped benchmark (bench/trainer_step.py): its pipeline checks clean and has the
shape it claims, its twins read the pipeline's constants and learn the same regression, and its
table names the fastest baseline."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import trainer_step  # noqa: E402 - from bench/
from rl_step import pipe_constants  # noqa: E402 - from bench/
from trainer_spec import TrainerConfig  # noqa: E402 - from bench/

from pipec.compiler.cli import main as pipec_main  # noqa: E402


def test_the_pipeline_is_a_step_of_over_200_library_and_kernel_nodes_in_child_graphs(tmp_path):
    out = tmp_path / "plan.json"
    assert pipec_main([str(trainer_step.PIPE), "--emit", "plan", "-o", str(out)]) == 0
    plan = json.loads(out.read_text())
    step = [g for g in plan["graphs"] if g["scope"] != "init"]
    kinds = [n["kind"] for g in step for n in g["nodes"]]
    inside_children = [n for g in step if g["name"] != "step" for n in g["nodes"] if n["kind"] != "graph"]
    assert kinds.count("gemm") == 3 * 24 + 3 and kinds.count("kernel") >= 150
    assert len(inside_children) >= 200 and kinds.count("graph") == 3 + 24


def _programmatic_edges(tmp_path, *defines) -> int:
    out = tmp_path / "plan.json"
    args = [arg for define in defines for arg in ("-D", define)]
    assert pipec_main([str(trainer_step.PIPE), *args, "--emit", "plan", "-o", str(out)]) == 0
    plan = json.loads(out.read_text())
    return sum(1 for g in plan["graphs"] for kind in g.get("edge_kinds", []) if kind["programmatic"])


def test_its_kernels_get_programmatic_edges_unless_the_pipeline_says_off(tmp_path):
    assert _programmatic_edges(tmp_path) > 100 and _programmatic_edges(tmp_path, 'PDL="off"') == 0


def test_the_twins_take_the_pipelines_constants():
    config = TrainerConfig.from_constants(pipe_constants({"LAYERS": 3, "WIDTH": 128}, trainer_step.PIPE))
    assert (config.layers, config.width, config.batch, config.out, config.compute) == (3, 128, 256, 16, "tf32")
    assert config.max_grad_norm == 1.0 and config.weight_decay == 0.01


def test_the_table_compares_with_the_fastest_baseline(capsys):
    row = {"layers": 24, "pipec_graph": {"steps_per_s": 9000.0, "gpu_us_per_step": 110.0, "nodes": 255},
           "pipec_graph_ordinary": {"steps_per_s": 8000.0},
           "torch_eager": {"steps_per_s": 300.0}, "torch_cudagraph": {"steps_per_s": 4000.0},
           "torch_compile": {"error": "RuntimeError: no"}, "torch_compile-graph": {"steps_per_s": 4500.0},
           "jax": {"steps_per_s": 3000.0}}
    assert trainer_step.fastest_baseline(row) == ("torch_compile-graph", 4500.0)
    trainer_step.print_table([row])
    out = capsys.readouterr().out
    assert "2.00x (torch.compile max-autotune in one CUDAGraph)" in out
    assert [line.split("|")[2].strip() for line in out.splitlines() if "GPU us per node" in line] == ["0.43"]


def _small() -> TrainerConfig:
    return TrainerConfig(layers=3, batch=64, width=64, out=8, compute="f32", lr=3e-3, decay_steps=300)


def test_the_pytorch_twin_learns_the_regression():
    pytest.importorskip("torch", reason="the PyTorch twin needs torch")
    from torch_trainer import make_trainer

    trainer = make_trainer(_small(), "cpu", "eager")
    trainer.step()
    first = float(trainer.diag[1])
    for _ in range(199):
        trainer.step()
    assert float(trainer.diag[0]) == 200.0 and float(trainer.diag[1]) < first / 10


def test_the_jax_twin_learns_the_regression():
    pytest.importorskip("jax", reason="the JAX twin needs jax")
    from jax_trainer import Trainer

    trainer = Trainer(_small(), steps_per_dispatch=1)
    trainer.advance(1)
    first = float(trainer.state["diag"][1])
    trainer.advance(199)
    trainer.synchronize()
    assert float(trainer.state["diag"][0]) == 200.0 and float(trainer.state["diag"][1]) < first / 10
