"""bench/c51_step.py's table and bench/learning.py's output names, on made-up measurements
(the measurements themselves need a GPU: docs/benchmarks.md)."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import c51_step  # noqa: E402 - from bench/
import learning  # noqa: E402 - from bench/


def _row(hidden, graph, cudagraph, compiled, jax):
    return {"hidden": hidden, "compute": "tf32",
            "pipec_graph": {"steps_per_s": graph, "floor": {"replay_us": 110.0, "critical_path_us": 100.0,
                                                            "ratio": 1.1}},
            "pipec_eager": {"steps_per_s": graph / 3},
            "torch_eager": {"unavailable": "PyTorch is not installed"},
            "torch_cudagraph": {"steps_per_s": cudagraph},
            "torch_compile": {"error": "RuntimeError: no"},
            "torch_compile-graph": {"steps_per_s": compiled},
            "jax": {"steps_per_s": jax, "steps_per_dispatch": 500}}


def test_table_has_one_column_per_size_and_the_ratios(capsys):
    c51_step.print_table([_row(256, 3000.0, 1500.0, 1000.0, 2000.0), _row(4096, 800.0, 400.0, 1600.0, 100.0)])
    out = capsys.readouterr().out
    lines = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
             for line in out.splitlines() if line.startswith("|")}
    assert "HIDDEN 256" in out and "HIDDEN 4096" in out
    assert lines["pipec graph vs PyTorch CUDAGraph"] == ["2.00x", "2.00x"]
    assert lines["pipec graph vs torch.compile (faster mode)"] == ["3.00x", "0.50x"]
    assert lines["pipec graph vs JAX"] == ["1.50x", "8.00x"]
    assert lines["PyTorch eager"] == ["not available"] * 2
    assert lines['PyTorch torch.compile("reduce-overhead")'] == ["failed"] * 2
    assert lines["pipec replay / critical path"][0] == "110 / 100 us = 1.10x"


def test_learning_output_names():
    assert learning.output_name(learning.PIPE) == "learning"
    assert learning.output_name(ROOT / "pipelines" / "c51_step.pipe") == "c51_learning"


def test_bf16_precision_reaches_the_twins_through_the_pipelines_constants():
    from c51_spec import C51Config
    from rl_step import pipe_constants

    for flag, bf16 in (("false", False), ("true", True)):
        config = C51Config.from_constants(pipe_constants({"BF16": flag}, c51_step.PIPE))
        assert config.bf16 is bf16 and config.hidden == 512
