"""bench/rl_step.py's default table on made-up measurements (the measurements need a GPU:
docs/benchmarks.md): the unrolled row names its K, and every ratio is pipec's one-launch graph
against the row; C51's table leaves the unrolled row out."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import c51_step  # noqa: E402 - from bench/
import rl_step  # noqa: E402 - from bench/


def _default(unrolled):
    return {"pipec_graph": {"steps_per_s": 30000.0, "gpu_us_per_step": 33.0, "steps_per_launch": 1,
                            "floor": {"critical_path_us": 32.0, "replay_us": 32.0, "ratio": 1.0,
                                      "critical_path_nodes": 4}, "nodes": 10},
            "pipec_unrolled": unrolled,
            "pipec_eager": {"steps_per_s": 15000.0, "gpu_us_per_step": 60.0},
            "torch_eager": {"unavailable": "PyTorch is not installed"},
            "torch_cudagraph": {"steps_per_s": 2000.0, "gpu_us_per_step": 500.0},
            "torch_compile": None, "torch_compile-graph": None,
            "jax": {"steps_per_s": 10000.0, "wall_us_per_step": 100.0, "steps_per_dispatch": 500}}


def _rows(out: str) -> dict:
    return {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in out.splitlines() if line.startswith("|")}


def test_unrolled_row_names_its_steps_a_launch(capsys):
    rl_step._print_default(_default({"steps_per_s": 31500.0, "gpu_us_per_step": 31.7, "steps_per_launch": 10}))
    rows = _rows(capsys.readouterr().out)
    assert rows["pipec graph, 10 steps a launch (piperun --steps-per-launch 10 --unroll)"] == ["31500", "31.7", "1.0x"]
    assert rows["JAX jit + lax.scan (K=500)"] == ["10000", "100.0 (wall)", "3.0x"]


def test_without_the_unrolled_measurement_the_row_says_not_run(capsys):
    rl_step._print_default(_default(None))
    rows = _rows(capsys.readouterr().out)
    assert rows["pipec graph, K steps a launch (piperun --steps-per-launch K --unroll)"] == ["not run", "-", "-"]


def test_c51_table_has_no_unrolled_row(capsys):
    row = {"hidden": 256, "compute": "tf32",
           "pipec_graph": {"steps_per_s": 3000.0, "floor": {"replay_us": 110.0, "critical_path_us": 100.0,
                                                            "ratio": 1.1}},
           "pipec_eager": {"steps_per_s": 1000.0}, "torch_eager": None, "torch_cudagraph": None,
           "torch_compile": None, "torch_compile-graph": None, "jax": None}
    c51_step.print_table([row])
    assert "steps a launch" not in capsys.readouterr().out
