"""What a live update costs: `Pipeline.update` (compile again, compare the plans, set the
changed kernel nodes' parameters on the executable graph) against the two ways round it,
building and instantiating the step graph again and loading the pipeline again, on rl_step.

    python bench/live_update.py [--repeats 20] [--constants GAMMA TAU MAX_GRAD_NORM] [--out DIR]

Medians over repeats after one warm-up, with the GPU idle (each row synchronises first). Every
update alternates between two values, so each one really changes the graph; the compile cache
(~/.cache/pipec) is warm after the first load, as in a long training run."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from common import environment, median, save_json, table

RL_STEP = Path(__file__).resolve().parent.parent / "pipelines" / "rl_step.pipe"
# Constants of rl_step that only reach kernel scalar arguments (docs/python-api.md, Live updates).
VALUES = {"GAMMA": (0.99, 0.95), "TAU": (0.01, 0.02), "MAX_GRAD_NORM": (10.0, 5.0), "ADAM_EPS": (1e-8, 1e-7),
          "EPS_END": (0.02, 0.05), "PER_ALPHA": (0.6, 0.5), "LR_MIN": (1e-4, 1e-5)}


def _ms(fn, repeats: int) -> list[float]:
    fn()  # warm-up
    times = []
    for i in range(repeats):
        start = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - start) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--constants", nargs="+", default=["GAMMA", "TAU", "MAX_GRAD_NORM"], choices=list(VALUES))
    parser.add_argument("--out", type=Path, help="write live_update.json to this folder")
    args = parser.parse_args()

    import pipec
    from pipec.runtime.graph import BuiltGraph

    rows, results = [], {"environment": environment(), "repeats": args.repeats, "ms": {}}
    with pipec.load(RL_STEP) as pipeline:
        pipeline.step(10)
        pipeline.synchronize()

        def record(label: str, times: list[float], nodes: str = "") -> None:
            results["ms"][label] = times
            rows.append([label, nodes, median(times), min(times), max(times)])

        for name in args.constants:
            changed: list[str] = []

            def update(i: int = 1, name: str = name, changed: list = changed) -> None:
                changed[:] = pipeline.update(**{name: VALUES[name][i % 2]})
                pipeline.step(1)
                pipeline.synchronize()
            record(f"update({name}=...) + 1 step", _ms(update, args.repeats), f"{len(changed)} node(s)")

        def recompile(i: int = 1) -> None:
            pipeline._recompile({"GAMMA": VALUES["GAMMA"][i % 2]})
        record("  of which: compile + plan (cached kernels)", _ms(recompile, args.repeats))

        # The in-place part alone: the plans compiled beforehand, handed to update() in turn.
        plans = [pipeline._recompile({"GAMMA": value}) for value in VALUES["GAMMA"]]
        compile_plan, pipeline._recompile = pipeline._recompile, lambda defines: plans[VALUES["GAMMA"].index(
            defines["GAMMA"])]

        def apply(i: int = 1) -> None:
            pipeline.update(GAMMA=VALUES["GAMMA"][i % 2])
        record("  of which: compare plans + cuGraphExecKernelNodeSetParams", _ms(apply, args.repeats))
        pipeline._recompile = compile_plan

        def rebuild(i: int = 1) -> None:
            graph = BuiltGraph(pipeline.plan, pipeline.plan.step, pipeline._buffers, pipeline.modules,
                               pipeline.device, pipeline.stream)
            pipeline.synchronize()
            graph.close()
        record("build + instantiate + upload the step graph", _ms(rebuild, args.repeats))

    def reload(i: int = 1) -> None:
        with pipec.load(RL_STEP, defines={"GAMMA": VALUES["GAMMA"][i % 2]}) as again:
            again.step(1)
            again.synchronize()
    record("pipec.load(GAMMA=...) + 1 step + close", _ms(reload, max(3, args.repeats // 4)))

    print(f"rl_step on {results['environment'].get('gpu', 'the GPU')}: medians over {args.repeats} repeats")
    print(table(["what", "changes", "median ms", "min ms", "max ms"], rows))
    if args.out:
        save_json(args.out / "live_update.json", results)


if __name__ == "__main__":
    main()
