"""Does a library kernel shared by several child graphs and by eager launches slow graph
replays? pipec loads its own modules once per child graph and once for eager work, so none of
its CUfunctions is ever shared; cuBLASLt's kernels are the library's, so GEMM nodes with the
same descriptor and algorithm launch the very same CUfunction from every child graph and from
the eager path. Trainers this product is for saw replays slow down about 100x on Hopper when
a CUfunction was shared.

    python bench/gemm_sharing.py [--graphs 8] [--size 512] [--replays 50] [--out DIR]

The step is a chain of `--graphs` child graphs holding one bf16 GEMM each (size^3, f32
accumulation, bias and an epilogue). Four variants: every GEMM with the same descriptor (one
kernel serves every child graph) or each with a different epilogue (a different kernel each),
and either eager steps run between the timed replay batches (the eager path launches the same
kernels) or not. Each pipeline also runs its GEMMs once eagerly at build time (the first call,
runtime/gemm_nodes.py). Replay time per step: median over repeats of CUDA-event time around
`--replays` replays; the eager step's GPU time beside it for scale."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from common import cuda_events_ms, environment, median, save_json, table

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from gemm_plans import buffer, gemm, gemm_plan, matrix  # noqa: E402 - the plan builder of the GEMM tests

REPEATS = 30
# Each a different cuBLASLt epilogue: (epilogue, with aux)
DISTINCT = [("none", False), ("relu", False), ("gelu", False), ("bias", False), ("relu_bias", False),
            ("gelu_bias", False), ("relu_bias", True), ("gelu_bias", True)]
SHARED = ("relu_bias", False)


def sharing_plan(graphs: int, size: int, distinct: bool):
    """`graphs` child graphs in a chain, each y_i = epilogue(x @ w_i^T + b), bf16."""
    buffers = [buffer("x", "bf16", (size, size)), buffer("b", "bf16", (size,))]
    nodes = []
    for i in range(graphs):
        epilogue, with_aux = DISTINCT[i % len(DISTINCT)] if distinct else SHARED
        buffers += [buffer(f"w{i}", "bf16", (size, size)), buffer(f"y{i}", "bf16", (size, size), first="write")]
        options = {}
        if "bias" in epilogue:
            options["bias"] = matrix("b", 1, size, "bf16")
        if with_aux:
            relu = epilogue.startswith("relu")
            shape = (size, size // 8) if relu else (size, size)
            buffers.append(buffer(f"aux{i}", "u8" if relu else "bf16", shape, first="write"))
            options["aux"] = matrix(f"aux{i}", size, size, "u8" if relu else "bf16", ld=size)
        nodes.append(gemm(i, f"gemm:y{i}", a=matrix("x", size, size, "bf16"), b=matrix(f"w{i}", size, size, "bf16"),
                          c=matrix(f"y{i}", size, size, "bf16"), trans_b=True, epilogue=epilogue, line=i + 1,
                          **options))
    return gemm_plan(buffers, nodes, children=True)


def measure(plan, replays: int, eager_between: bool, driver=None, library=None) -> dict:
    """`driver` and `library`: the CUDA driver and cuBLASLt binding (None: the real ones; the
    CPU test passes fakes)."""
    from pipec.runtime.driver import open_device
    from pipec.runtime.cublaslt import GemmSettings
    from pipec.runtime.pipeline import Pipeline

    with Pipeline(plan, [], open_device(0, driver), gemm=GemmSettings(library)) as p:
        call = p.driver.call
        kernels = {k for names in p.graph.library_kernels.values() for k in names}
        p.step(5)
        p.run_eager(2)
        start, end = call("cuEventCreate", 0), call("cuEventCreate", 0)
        times = []
        try:
            for _ in range(REPEATS):
                if eager_between:
                    p.run_eager(1)  # enqueued before the start event: not timed
                call("cuEventRecord", start, p.stream)
                p.step(replays)
                call("cuEventRecord", end, p.stream)
                call("cuEventSynchronize", end)
                times.append(call("cuEventElapsedTime", start, end) * 1000 / replays)
        finally:
            call("cuEventDestroy", start)
            call("cuEventDestroy", end)
        eager = cuda_events_ms(call, p.stream, lambda: p.run_eager(1), 10)
        return {"replay_us": median(times), "eager_us": median(eager) * 1000, "kernels": len(kernels),
                "gemms": len(p.gemms.ops), "algorithms": len(set(p.gemms.algorithms.values()))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", type=int, default=8)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--replays", type=int, default=50)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    results, rows = [], []
    for distinct in (False, True):
        plan = sharing_plan(args.graphs, args.size, distinct)
        for eager_between in (True, False):
            result = measure(plan, args.replays, eager_between)
            variant = ("a kernel per child graph" if distinct else "one kernel for every child graph") + (
                ", eager steps between" if eager_between else ", graph replays only")
            results.append({"variant": variant, "distinct": distinct, "eager_between": eager_between, **result})
            rows.append([variant, result["kernels"], result["algorithms"], result["replay_us"],
                         result["replay_us"] / args.graphs, result["eager_us"]])
    print(f"{args.graphs} child graphs, one bf16 GEMM each ({args.size}^3), chained; medians of {REPEATS}")
    print(table(["variant", "kernels", "algorithms", "replay us/step", "us/GEMM", "eager us/step"], rows))
    shared = next(r for r in results if not r["distinct"] and r["eager_between"])
    alone = next(r for r in results if r["distinct"] and not r["eager_between"])
    print(f"shared with eager / distinct graphs only: {shared['replay_us'] / alone['replay_us']:.2f}x")
    if args.out is not None:
        save_json(args.out / "gemm_sharing.json", {"environment": environment(), "graphs": args.graphs,
                                                   "size": args.size, "replays": args.replays,
                                                   "results": results})


if __name__ == "__main__":
    main()
