"""The C51 flagship side by side over HIDDEN: pipec's graph replay and eager launches of
pipelines/c51_step.pipe against the same algorithm in PyTorch (bench/torch_c51.py: eager,
torch.cuda.CUDAGraph, torch.compile "reduce-overhead", "max-autotune-no-cudagraphs" in one
CUDAGraph) and JAX (bench/jax_c51.py: the whole step under jax.jit, K steps per dispatch).

    python bench/c51_step.py [--hidden 256,512,1024,2048,4096] [--steps 1000]
                             [--compute tf32|f32] [--precision f32|bf16] [--out DIR]

The timing is bench/rl_step.py's (median of several runs after warm-up, CUDA events for
pipec and PyTorch, wall time for JAX), in one process. Every implementation runs docs/c51.md
with the constants of c51_step.pipe at each HIDDEN; the matmul precision follows --compute
in all of them (pipec: -D COMPUTE, PyTorch: allow_tf32, JAX: the default matmul precision),
and --precision bf16 runs the bf16 mode in all of them (pipec: -D BF16=true, PyTorch:
autocast, JAX: bf16 operands with f32 results; f32 master parameters everywhere, docs/c51.md);
its results go to c51_step_bf16.json and .png.
The table gives steps/s per implementation and size, pipec graph's ratio to PyTorch's
CUDAGraph, to the faster torch.compile mode and to JAX, and the graph replay's time over its
critical path (the floor the GEMM kernels and the other nodes on it set). A missing or
failing baseline is shown as such and makes the exit status 1 (--allow-missing: 0)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from common import environment, save_json, table
from rl_step import IMPLEMENTATIONS, TORCH_MODES, _problems, _rate, pipe_constants, time_jax, time_pipec, time_torch

ROOT = Path(__file__).resolve().parent.parent
PIPE = ROOT / "pipelines" / "c51_step.pipe"
HIDDEN_SIZES = (256, 512, 1024, 2048, 4096)


def set_precision(compute: str) -> None:
    """The baselines' matmul precision to match the pipeline's COMPUTE."""
    try:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = compute == "tf32"
    except ImportError:
        pass
    try:
        import jax

        jax.config.update("jax_default_matmul_precision", "tensorfloat32" if compute == "tf32" else "highest")
    except ImportError:
        pass


def compare(hidden: int, steps: int, compute: str, precision: str, torch_modes, jax_per_dispatch: int) -> dict:
    from c51_spec import C51Config

    defines = {"HIDDEN": hidden, "COMPUTE": f'"{compute}"', "BF16": str(precision == "bf16").lower()}
    config = C51Config.from_constants(pipe_constants(defines, PIPE))
    row = {"hidden": hidden, "compute": compute, "precision": precision}
    row["pipec_graph"] = time_pipec(defines, steps, eager=False, pipe=PIPE)
    # the pipeline keeps its edges ordinary (c51_step.pipe says why): the other setting, measured
    row["pipec_graph_pdl_auto"] = time_pipec({**defines, "PDL": '"auto"'}, steps, eager=False, pipe=PIPE)
    row["pipec_eager"] = time_pipec(defines, max(20, steps // 10), eager=True, pipe=PIPE)
    for mode in TORCH_MODES:
        row[f"torch_{mode}"] = (time_torch(config, steps if mode != "eager" else max(20, steps // 10), mode,
                                           "torch_c51") if mode in torch_modes else None)
    row["jax"] = time_jax(config, steps, jax_per_dispatch, "jax_c51") if jax_per_dispatch else None
    return row


def _ratio(graph: dict, entries) -> str:
    rates = [e["steps_per_s"] for e in entries if isinstance(e, dict) and "steps_per_s" in e]
    if "steps_per_s" not in graph or not rates:
        return "-"
    return f"{graph['steps_per_s'] / max(rates):.2f}x"


def _floor(graph: dict) -> str:
    floor = graph.get("floor") or {}
    if "ratio" not in floor:
        return "-"
    return f"{floor['replay_us']:.0f} / {floor['critical_path_us']:.0f} us = {floor['ratio']:.2f}x"


def print_table(rows: list[dict]) -> None:
    header = ["implementation"] + [f"HIDDEN {r['hidden']}" for r in rows]
    labels = [(k, v) for k, v in IMPLEMENTATIONS if k not in ("pipec_unrolled", "pipec_graph_pdl_off")]
    labels.insert(1, ("pipec_graph_pdl_auto", "pipec graph, programmatic edges (-D PDL='\"auto\"')"))
    body = [[label] + [_rate(r.get(key)) for r in rows] for key, label in labels]  # no unrolled row for C51
    body.append(["pipec graph vs PyTorch CUDAGraph"] + [_ratio(r["pipec_graph"], [r["torch_cudagraph"]]) for r in rows])
    body.append(["pipec graph vs torch.compile (faster mode)"] +
                [_ratio(r["pipec_graph"], [r["torch_compile"], r["torch_compile-graph"]]) for r in rows])
    body.append(["pipec graph vs JAX"] + [_ratio(r["pipec_graph"], [r["jax"]]) for r in rows])
    body.append(["pipec replay / critical path"] + [_floor(r["pipec_graph"]) for r in rows])
    print(f"steps/s, COMPUTE = {rows[0]['compute']}, operands {rows[0].get('precision', 'f32')}")
    print(table(header, body))


def _chart(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, label in IMPLEMENTATIONS:
        points = [(r["hidden"], r[key]["steps_per_s"]) for r in results["rows"]
                  if isinstance(r.get(key), dict) and "steps_per_s" in r[key]]
        if points:
            ax.plot(*zip(*points), marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("HIDDEN")
    ax.set_ylabel("steps/s")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(f"c51_step (COMPUTE {results['compute']}, {results['precision']}) on {results['environment'].get('gpu', 'GPU')}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", default=",".join(map(str, HIDDEN_SIZES)),
                        help="comma-separated HIDDEN sizes")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--compute", choices=("tf32", "f32"), default="tf32")
    parser.add_argument("--precision", choices=("f32", "bf16"), default="f32",
                        help="bf16: layers 2 and 3 multiply bf16 operands in every implementation")
    parser.add_argument("--torch-modes", nargs="*", choices=TORCH_MODES, default=list(TORCH_MODES))
    parser.add_argument("--jax-steps-per-dispatch", type=int, default=500,
                        help="K, the steps of one jitted lax.scan; 0 leaves JAX out")
    parser.add_argument("--allow-missing", action="store_true",
                        help="exit 0 even when a baseline is not available or fails")
    parser.add_argument("--out", type=Path, default=Path("out"))
    args = parser.parse_args(argv)
    sizes = [int(h) for h in args.hidden.split(",")]
    set_precision(args.compute)
    results = {"environment": environment(), "compute": args.compute, "precision": args.precision,
               "rows": [compare(h, args.steps, args.compute, args.precision, args.torch_modes,
                                args.jax_steps_per_dispatch) for h in sizes]}
    name = "c51_step" if args.precision == "f32" else "c51_step_bf16"
    save_json(args.out / f"{name}.json", results)
    print_table(results["rows"])
    _chart(results, args.out / f"{name}.png")
    problems = [p for r in results["rows"] for p in _problems(r)]
    for problem in dict.fromkeys(problems):
        print(f"c51_step: baseline missing or failed: {problem}", file=sys.stderr)
    return 1 if problems and not args.allow_missing else 0


if __name__ == "__main__":
    sys.exit(main())
