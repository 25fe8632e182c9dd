"""A step shaped like the trainers pipec is for, side by side: pipelines/examples/wide_trainer.pipe
(about 230 GEMM and kernel nodes in child graphs) replayed by pipec with and without programmatic
edges (-D PDL='"off"'), against the same step in
PyTorch (bench/torch_trainer.py: eager, CUDAGraph, torch.compile "reduce-overhead", and
"max-autotune-no-cudagraphs" in one CUDAGraph) and JAX (bench/jax_trainer.py: jax.jit of a K-step
lax.scan), in one process.

    python bench/trainer_step.py [--layers 24] [--steps 2000] [--torch-modes MODE...] [--out DIR]

Timing is bench/rl_step.py's (median of several runs after warm-up; CUDA events for pipec and
PyTorch, wall time for JAX). The table gives steps/s, GPU microseconds per step, pipec's GPU
time per node (per-edge latency decides it in a step of small kernels), and pipec's ratio to the
fastest baseline. A missing or failing baseline is shown as such and makes the exit status 1
(--allow-missing: 0)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from common import environment, save_json, table
from rl_step import TORCH_MODES, _rate, pipe_constants, time_jax, time_pipec, time_torch
from trainer_spec import TrainerConfig

ROOT = Path(__file__).resolve().parent.parent
PIPE = ROOT / "pipelines" / "examples" / "wide_trainer.pipe"
LABELS = {"pipec_graph": "pipec graph replay", "pipec_graph_ordinary": "pipec graph, no programmatic edges",
          "torch_eager": "PyTorch eager",
          "torch_cudagraph": "PyTorch CUDAGraph", "torch_compile": "torch.compile reduce-overhead",
          "torch_compile-graph": "torch.compile max-autotune in one CUDAGraph", "jax": "JAX jit + lax.scan"}


def compare(layers: int, steps: int, jax_per_dispatch: int, torch_modes=TORCH_MODES) -> dict:
    defines = {"LAYERS": layers}
    config = TrainerConfig.from_constants(pipe_constants(defines, PIPE))
    row: dict = {"layers": layers, "pipec_graph": time_pipec(defines, steps, eager=False, pipe=PIPE),
                 "pipec_graph_ordinary": time_pipec({**defines, "PDL": '"off"'}, steps, eager=False, pipe=PIPE)}
    for mode in TORCH_MODES:
        row[f"torch_{mode}"] = (time_torch(config, steps if mode != "eager" else max(20, steps // 10), mode,
                                           "torch_trainer") if mode in torch_modes else None)
    row["jax"] = time_jax(config, steps, jax_per_dispatch, "jax_trainer")
    return row


def fastest_baseline(row: dict) -> tuple[str, float] | None:
    rates = [(key, row[key]["steps_per_s"]) for key in LABELS
             if not key.startswith("pipec") and isinstance(row.get(key), dict) and "steps_per_s" in row[key]]
    return max(rates, key=lambda kv: kv[1]) if rates else None


def print_table(rows: list[dict]) -> None:
    header = ["implementation"] + [f"LAYERS {r['layers']}" for r in rows]
    body = [[label] + [_rate(r.get(key)) for r in rows] for key, label in LABELS.items()]
    body.append(["pipec nodes"] + [str(r["pipec_graph"].get("nodes", "-")) for r in rows])
    body.append(["pipec GPU us per node"] + [
        f"{r['pipec_graph']['gpu_us_per_step'] / r['pipec_graph']['nodes']:.2f}"
        if "gpu_us_per_step" in r["pipec_graph"] else "-" for r in rows])
    versus = []
    for r in rows:
        best = fastest_baseline(r)
        graph = r["pipec_graph"].get("steps_per_s")
        versus.append(f"{graph / best[1]:.2f}x ({LABELS[best[0]]})" if best and graph else "-")
    body.append(["pipec vs the fastest baseline"] + versus)
    print("steps/s")
    print(table(header, body))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="24", help="comma-separated LAYERS values (default 24)")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--torch-modes", nargs="*", choices=TORCH_MODES, default=list(TORCH_MODES))
    parser.add_argument("--jax-steps-per-dispatch", type=int, default=100)
    parser.add_argument("--allow-missing", action="store_true", help="exit 0 when a baseline is missing")
    parser.add_argument("--out", type=Path, default=Path("out"))
    args = parser.parse_args(argv)
    rows = [compare(int(n), args.steps, args.jax_steps_per_dispatch, args.torch_modes)
            for n in args.layers.split(",")]
    print_table(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    save_json(args.out / "trainer_step.json", {"environment": environment(), "rows": rows})
    missing = [f"{key} at LAYERS {r['layers']}: {next(iter(r[key].values()))}" for r in rows for key in LABELS
               if isinstance(r.get(key), dict) and "steps_per_s" not in r[key]]
    for line in missing:
        print(f"missing: {line}", file=sys.stderr)
    return 1 if missing and not args.allow_missing else 0


if __name__ == "__main__":
    sys.exit(main())
