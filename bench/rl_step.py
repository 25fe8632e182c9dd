"""The flagship step, side by side: pipec's graph replay and eager launches against the same
algorithm in PyTorch (eager, CUDAGraph, torch.compile "reduce-overhead"), and how steps/s
scale with the number of environments and learner updates.

    python bench/rl_step.py [--steps 2000] [--scaling] [--out DIR]

Every figure is the median of several timed runs after warm-up, timed with CUDA events, all
measured in the same process. Both implementations run docs/dqn.md with the sizes and
hyper-parameters of pipelines/rl_step.pipe (or the -D overrides of a scaling point)."""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

from common import environment, median, save_json, table

ROOT = Path(__file__).resolve().parent.parent
PIPE = ROOT / "pipelines" / "rl_step.pipe"
RUNS = 5


def pipe_constants(defines: dict) -> dict:
    from pipec.compiler import compile_file, load_settings
    from pipec.compiler.config import override

    settings = override(load_settings(PIPE), defines=tuple((k, str(v)) for k, v in defines.items()) or None)
    compilation = compile_file(PIPE, settings, until="check")
    assert compilation.program is not None and not compilation.has_errors, "rl_step.pipe does not check"
    return compilation.program.consts


def time_pipec(defines: dict, steps: int, eager: bool) -> dict:
    import pipec
    from pipec.runtime.driver import call

    with pipec.load(PIPE, defines=defines) as p:
        run = p.run_eager if eager else p.step
        run(min(200, steps))  # warm-up: caches, clocks, lazy module loads
        start, end = call("cuEventCreate", 0), call("cuEventCreate", 0)
        gpu, wall = [], []
        for _ in range(RUNS):
            t = time.perf_counter()
            call("cuEventRecord", start, p.stream)
            run(steps)
            call("cuEventRecord", end, p.stream)
            call("cuEventSynchronize", end)
            wall.append(time.perf_counter() - t)
            gpu.append(call("cuEventElapsedTime", start, end) / 1000)
        nodes = p.graph.node_count
        floor = None
        if not eager:
            report = p.profile()
            floor = {"critical_path_us": report.critical_path_us, "replay_us": report.replay_us,
                     "ratio": report.replay_over_floor, "critical_path_nodes": len(report.critical_path)}
        return {"steps_per_s": steps / median(wall), "gpu_us_per_step": median(gpu) * 1e6 / steps,
                "nodes": nodes, "floor": floor}


def time_torch(consts: dict, steps: int, mode: str) -> dict | None:
    try:
        import torch
        from torch_dqn import Config, make_trainer
    except ImportError:
        return None
    fields = {f.name for f in dataclasses.fields(Config)}
    config = Config(**{k.lower(): v for k, v in consts.items() if k.lower() in fields})
    try:
        trainer = make_trainer(config, "cuda", mode)
    except Exception as error:  # torch.compile may refuse; say so in the table
        return {"error": f"{type(error).__name__}: {error}"[:200]}
    for _ in range(min(200, steps)):
        trainer.step()
    torch.cuda.synchronize()
    gpu, wall = [], []
    for _ in range(RUNS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t = time.perf_counter()
        start.record()
        for _ in range(steps):
            trainer.step()
        end.record()
        end.synchronize()
        wall.append(time.perf_counter() - t)
        gpu.append(start.elapsed_time(end) / 1000)
    return {"steps_per_s": steps / median(wall), "gpu_us_per_step": median(gpu) * 1e6 / steps}


def compare(defines: dict, steps: int, torch_modes=("eager", "cudagraph", "compile")) -> dict:
    consts = pipe_constants(defines)
    row = {"defines": defines, "envs": consts["ENVS"], "updates": consts["UPDATES"]}
    row["pipec_graph"] = time_pipec(defines, steps, eager=False)
    row["pipec_eager"] = time_pipec(defines, max(20, steps // 10), eager=True)
    for mode in ("eager", "cudagraph", "compile"):
        if mode in torch_modes:
            row[f"torch_{mode}"] = time_torch(consts, steps if mode != "eager" else max(20, steps // 10), mode)
        else:
            row[f"torch_{mode}"] = None
    return row


def _rate(entry) -> str:
    if entry is None:
        return "n/a"
    if "error" in entry:
        return "failed"
    return f"{entry['steps_per_s']:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--scaling", action="store_true", help="also sweep ENVS and UPDATES")
    parser.add_argument("--skip-default", action="store_true", help="only the sweep")
    parser.add_argument("--out", type=Path, default=Path("out"))
    args = parser.parse_args()
    results = {"environment": environment(), "scaling": [],
               "default": None if args.skip_default else compare({}, args.steps)}
    if args.scaling:  # torch.compile recompiles for every size: too slow to sweep
        for envs in (64, 256, 1024, 4096, 16384):
            results["scaling"].append(compare({"ENVS": envs}, args.steps // 2, ("eager", "cudagraph")))
        for updates in (1, 4, 8):
            results["scaling"].append(compare({"UPDATES": updates}, args.steps // 2, ("eager", "cudagraph")))
    save_json(args.out / "rl_step.json", results)
    if results["default"] is not None:
        _print_default(results["default"])
    if results["scaling"]:
        print()
        print(table(["ENVS", "UPDATES", "pipec graph", "pipec eager", "torch eager", "torch graph", "torch compile"],
                    [[r["envs"], r["updates"], _rate(r["pipec_graph"]), _rate(r["pipec_eager"]),
                      _rate(r["torch_eager"]), _rate(r["torch_cudagraph"]), _rate(r["torch_compile"])]
                     for r in results["scaling"]]))
        _chart(results, args.out / "rl_step.png")


def _print_default(d: dict) -> None:
    graph = d["pipec_graph"]
    print(table(["implementation", "steps/s", "GPU us/step"], [
        [name, _rate(d[key]), f"{d[key]['gpu_us_per_step']:.1f}" if d[key] and "gpu_us_per_step" in d[key] else "-"]
        for name, key in (("pipec graph (piperun)", "pipec_graph"), ("pipec eager", "pipec_eager"),
                          ("PyTorch eager", "torch_eager"), ("PyTorch CUDAGraph", "torch_cudagraph"),
                          ("PyTorch compile reduce-overhead", "torch_compile"))
    ]))
    floor = graph["floor"]
    print(f"\nnodes {graph['nodes']}; critical path {floor['critical_path_nodes']} nodes, "
          f"{floor['critical_path_us']:.1f} us; replay {floor['replay_us']:.1f} us = {floor['ratio']:.2f}x the floor")


def _chart(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, key, label in ((axes[0], "envs", "ENVS (UPDATES default)"), (axes[1], "updates", "UPDATES (ENVS default)")):
        rows = [r for r in results["scaling"] if list(r["defines"]) == [key.upper()]]
        for impl, name in (("pipec_graph", "pipec graph"), ("pipec_eager", "pipec eager"),
                           ("torch_eager", "PyTorch eager"), ("torch_cudagraph", "PyTorch CUDAGraph"),
                           ("torch_compile", "torch.compile")):
            points = [(r[key], r[impl]["steps_per_s"]) for r in rows if r[impl] and "steps_per_s" in r[impl]]
            if points:
                ax.plot(*zip(*points), marker="o", label=name)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(label)
        ax.set_ylabel("steps/s")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("rl_step on " + str(results["environment"].get("gpu", "GPU")))
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
