"""The flagship step, side by side: pipec's graph replay and eager launches against the same
algorithm in PyTorch (eager, torch.cuda.CUDAGraph, torch.compile "reduce-overhead", and
torch.compile "max-autotune-no-cudagraphs" captured in one CUDAGraph) and in JAX (the whole
step under jax.jit, K steps per dispatch with lax.scan), and how steps/s scale with the
number of environments and learner updates.

    python bench/rl_step.py [--steps 2000] [--jax-steps-per-dispatch 500] [--pipec-steps-per-launch 10]
                            [--scaling] [--out DIR]

Every figure is the median of several timed runs after warm-up (and compilation), all
measured in the same process; pipec and PyTorch also report GPU time from CUDA events. Every
implementation runs docs/dqn.md with the sizes and hyper-parameters of pipelines/rl_step.pipe
(or the -D overrides of a scaling point). Ratios are pipec's graph against each baseline's
fastest mode measured in this run. A baseline whose framework is missing, has no GPU, or
fails is shown as such in the table and makes the exit status 1 (--allow-missing: 0)."""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

from common import environment, median, save_json, table

ROOT = Path(__file__).resolve().parent.parent
PIPE = ROOT / "pipelines" / "rl_step.pipe"
RUNS = 5
TORCH_MODES = ("eager", "cudagraph", "compile", "compile-graph")
# (result key, table label) of every implementation, in table order.
IMPLEMENTATIONS = (
    ("pipec_graph", "pipec graph (piperun)"),
    ("pipec_graph_pdl_off", 'pipec graph, no programmatic edges (-D PDL=\'"off"\')'),
    ("pipec_unrolled", "pipec graph, K steps a launch (piperun --steps-per-launch K --unroll)"),
    ("pipec_eager", "pipec eager (same kernels, one launch each)"),
    ("torch_eager", "PyTorch eager"),
    ("torch_cudagraph", "PyTorch torch.cuda.CUDAGraph"),
    ("torch_compile", 'PyTorch torch.compile("reduce-overhead")'),
    ("torch_compile-graph", 'PyTorch torch.compile("max-autotune-no-cudagraphs") in a CUDAGraph'),
    ("jax", "JAX jit + lax.scan"),
)


def pipe_constants(defines: dict, pipe: Path = PIPE) -> dict:
    from pipec.compiler import compile_file, load_settings
    from pipec.compiler.config import override

    settings = override(load_settings(pipe), defines=tuple((k, str(v)) for k, v in defines.items()) or None)
    compilation = compile_file(pipe, settings, until="check")
    assert compilation.program is not None and not compilation.has_errors, f"{pipe.name} does not check"
    return compilation.program.consts


def time_pipec(defines: dict, steps: int, eager: bool, pipe: Path = PIPE, per_launch: int = 1) -> dict:
    """pipec's graph replays or eager launches; with `per_launch` K > 1, K unrolled steps a launch."""
    import pipec
    from pipec.runtime.profile_analysis import ProfileError

    launches = max(1, steps // per_launch)
    steps = launches * per_launch
    with pipec.load(pipe, defines=defines, steps_per_launch=per_launch, unroll=per_launch > 1) as p:
        call = p.driver.call
        run = p.run_eager if eager else p.step
        run(max(1, min(200, steps) // per_launch))  # warm-up: caches, clocks, lazy module loads
        start, end = call("cuEventCreate", 0), call("cuEventCreate", 0)
        gpu, wall = [], []
        for _ in range(RUNS):
            t = time.perf_counter()
            call("cuEventRecord", start, p.stream)
            run(launches)
            call("cuEventRecord", end, p.stream)
            call("cuEventSynchronize", end)
            wall.append(time.perf_counter() - t)
            gpu.append(call("cuEventElapsedTime", start, end) / 1000)
        nodes = p.graph.node_count
        floor = None
        if not eager and per_launch == 1:
            try:
                report = p.profile()
                floor = {"critical_path_us": report.critical_path_us, "replay_us": report.replay_us,
                         "ratio": report.replay_over_floor, "critical_path_nodes": len(report.critical_path)}
            except ProfileError as error:  # conditional bodies that skip replays: no per-node floor
                floor = {"unavailable": str(error)}
        return {"steps_per_s": steps / median(wall), "gpu_us_per_step": median(gpu) * 1e6 / steps,
                "nodes": nodes, "floor": floor, "steps_per_launch": per_launch,
                "programmatic_edges": p.graph.programmatic_edges}


def time_torch(config, steps: int, mode: str, module: str = "torch_dqn") -> dict:
    """`module`'s make_trainer(config, "cuda", mode), timed (bench/torch_dqn.py or a twin)."""
    try:
        import torch
        make_trainer = importlib.import_module(module).make_trainer
    except ImportError as error:
        return {"unavailable": f"PyTorch is not installed ({error})"}
    if not torch.cuda.is_available():
        return {"unavailable": f"PyTorch {torch.__version__} sees no CUDA device"}
    try:
        t = time.perf_counter()
        trainer = make_trainer(config, "cuda", mode)
        for _ in range(min(200, steps)):
            trainer.step()
        torch.cuda.synchronize()
        setup_s = time.perf_counter() - t
    except Exception as error:  # torch.compile may refuse: say so in the table
        return {"error": f"{type(error).__name__}: {error}"[:300]}
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
    return {"steps_per_s": steps / median(wall), "gpu_us_per_step": median(gpu) * 1e6 / steps,
            "steps": steps, "setup_s": round(setup_s, 1)}


def time_jax(config, steps: int, per_dispatch: int, module: str = "jax_dqn") -> dict:
    """Wall time of ``steps`` steps as steps / K jitted dispatches of a K-step lax.scan,
    waited for at the end; JAX has no CUDA events, and with K steps per dispatch the host
    adds nothing while the device runs. `module` holds the Trainer (bench/jax_dqn.py or a
    twin)."""
    try:
        import jax
        Trainer = importlib.import_module(module).Trainer
    except ImportError as error:
        return {"unavailable": f"JAX is not installed ({error})"}
    if jax.default_backend() != "gpu":
        return {"unavailable": f"JAX {jax.__version__} has no GPU backend "
                               f"(default backend: {jax.default_backend()})"}
    per_dispatch = min(per_dispatch, steps)
    steps -= steps % per_dispatch
    try:
        t = time.perf_counter()
        trainer = Trainer(config, per_dispatch)
        trainer.advance(per_dispatch)  # compiles
        trainer.synchronize()
        setup_s = time.perf_counter() - t
    except Exception as error:  # XLA may fail to compile or to allocate: say so in the table
        return {"error": f"{type(error).__name__}: {error}"[:300]}
    wall = []
    for _ in range(RUNS):
        t = time.perf_counter()
        trainer.advance(steps)
        trainer.synchronize()
        wall.append(time.perf_counter() - t)
    return {"steps_per_s": steps / median(wall), "wall_us_per_step": median(wall) * 1e6 / steps,
            "steps": steps, "steps_per_dispatch": per_dispatch, "setup_s": round(setup_s, 1),
            "device": str(jax.devices()[0])}


def compare(defines: dict, steps: int, torch_modes=TORCH_MODES, jax_per_dispatch: int | None = 500,
            pipec_per_launch: int = 0) -> dict:
    from dqn_spec import Config

    consts = pipe_constants(defines)
    config = Config.from_constants(consts)
    row = {"defines": defines, "envs": consts["ENVS"], "updates": consts["UPDATES"]}
    row["pipec_graph"] = time_pipec(defines, steps, eager=False)
    row["pipec_graph_pdl_off"] = time_pipec({**defines, "PDL": '"off"'}, steps, eager=False)
    row["pipec_unrolled"] = (time_pipec(defines, steps, eager=False, per_launch=pipec_per_launch)
                             if pipec_per_launch > 1 else None)
    row["pipec_eager"] = time_pipec(defines, max(20, steps // 10), eager=True)
    for mode in TORCH_MODES:
        row[f"torch_{mode}"] = (time_torch(config, steps if mode != "eager" else max(20, steps // 10), mode)
                                if mode in torch_modes else None)
    row["jax"] = time_jax(config, steps, jax_per_dispatch) if jax_per_dispatch else None
    return row


def _rate(entry) -> str:
    if entry is None:
        return "not run"
    if "unavailable" in entry:
        return "not available"
    if "error" in entry:
        return "failed"
    return f"{entry['steps_per_s']:.0f}"


def _fastest(row: dict, prefix: str):
    """(key, entry) of the fastest measured mode among the keys starting with prefix."""
    measured = [(k, v) for k, v in row.items() if k.startswith(prefix) and isinstance(v, dict)
                and "steps_per_s" in v]
    return max(measured, key=lambda kv: kv[1]["steps_per_s"], default=(None, None))


def _env_rate(row: dict) -> str:
    """Environment steps per second of pipec's graph: steps/s times ENVS."""
    graph = row["pipec_graph"]
    return f"{graph['steps_per_s'] * row['envs'] / 1e6:.2f} M" if "steps_per_s" in graph else "-"


def _versus_fastest(row: dict) -> str:
    """pipec's graph against the fastest baseline measured at this point."""
    baselines = [v for k, v in row.items() if k.startswith(("torch_", "jax")) and isinstance(v, dict)
                 and "steps_per_s" in v]
    if not baselines or "steps_per_s" not in row["pipec_graph"]:
        return "-"
    return f"{row['pipec_graph']['steps_per_s'] / max(v['steps_per_s'] for v in baselines):.1f}x"


def _problems(row: dict) -> list[str]:
    return [f"{label}: {row[key].get('unavailable') or row[key].get('error')}"
            for key, label in IMPLEMENTATIONS
            if isinstance(row.get(key), dict) and ("unavailable" in row[key] or "error" in row[key])]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--torch-modes", nargs="*", choices=TORCH_MODES, default=list(TORCH_MODES),
                        help="PyTorch modes of the default comparison")
    parser.add_argument("--jax-steps-per-dispatch", type=int, default=500,
                        help="K, the steps of one jitted lax.scan; 0 leaves JAX out")
    parser.add_argument("--pipec-steps-per-launch", type=int, default=10, metavar="K",
                        help="K of the default comparison's unrolled pipec row (0 or 1: left out)")
    parser.add_argument("--scaling", action="store_true", help="also sweep ENVS and UPDATES")
    parser.add_argument("--skip-default", action="store_true", help="only the sweep")
    parser.add_argument("--allow-missing", action="store_true",
                        help="exit 0 even when a baseline is not available or fails")
    parser.add_argument("--out", type=Path, default=Path("out"))
    args = parser.parse_args()
    results = {"environment": environment(), "scaling": [],
               "default": None if args.skip_default else
               compare({}, args.steps, args.torch_modes, args.jax_steps_per_dispatch, args.pipec_steps_per_launch)}
    # The sweep keeps PyTorch's eager and CUDAGraph modes and JAX, the fastest baseline of the
    # default comparison; torch.compile's modes (slower than JAX there, and each compiling for
    # minutes per size) are left out of it.
    sweep = [{"ENVS": envs} for envs in (64, 256, 1024, 4096, 16384, 65536)] + \
            [{"UPDATES": updates} for updates in (1, 2, 4, 8)]
    if args.scaling:
        for defines in sweep:
            results["scaling"].append(compare(defines, args.steps // 2, ("eager", "cudagraph"),
                                              args.jax_steps_per_dispatch))
    save_json(args.out / "rl_step.json", results)
    problems = []
    if results["default"] is not None:
        _print_default(results["default"])
        problems = _problems(results["default"])
    if results["scaling"]:
        print()
        print(table(["ENVS", "UPDATES", "pipec graph", "env steps/s", "pipec eager", "torch eager",
                     "torch graph", "JAX scan", "vs fastest"],
                    [[r["envs"], r["updates"], _rate(r["pipec_graph"]), _env_rate(r), _rate(r["pipec_eager"]),
                      _rate(r["torch_eager"]), _rate(r["torch_cudagraph"]), _rate(r["jax"]), _versus_fastest(r)]
                     for r in results["scaling"]]))
        _chart(results, args.out / "rl_step.png")
        problems += [p for r in results["scaling"] for p in _problems(r)]
    for problem in dict.fromkeys(problems):
        print(f"rl_step: baseline missing or failed: {problem}", file=sys.stderr)
    return 1 if problems and not args.allow_missing else 0


def _print_default(d: dict) -> None:
    graph = d["pipec_graph"]
    rows = []
    for key, label in IMPLEMENTATIONS:
        entry = d.get(key)
        if key == "jax" and entry and "steps_per_dispatch" in entry:
            label += f" (K={entry['steps_per_dispatch']})"
        if key == "pipec_unrolled" and entry and "steps_per_launch" in entry:
            label = label.replace("K", str(entry["steps_per_launch"]))
        us = "-"
        if entry and "gpu_us_per_step" in entry:
            us = f"{entry['gpu_us_per_step']:.1f}"
        elif entry and "wall_us_per_step" in entry:
            us = f"{entry['wall_us_per_step']:.1f} (wall)"
        ratio = f"{graph['steps_per_s'] / entry['steps_per_s']:.1f}x" if entry and "steps_per_s" in entry else "-"
        rows.append([label, _rate(entry), us, ratio])
    print(table(["implementation", "steps/s", "us/step", "pipec graph vs it"], rows))
    labels = dict(IMPLEMENTATIONS)
    fastest = []
    for prefix, framework in (("torch_", "PyTorch"), ("jax", "JAX")):
        key, entry = _fastest(d, prefix)
        if entry is not None:
            fastest.append((entry["steps_per_s"], key))
            print(f"fastest {framework}: {labels[key]}, {entry['steps_per_s']:.0f} steps/s; "
                  f"pipec graph is {graph['steps_per_s'] / entry['steps_per_s']:.1f}x it")
    if fastest:
        rate, key = max(fastest)
        print(f"fastest baseline: {labels[key]}, {rate:.0f} steps/s; pipec graph is "
              f"{graph['steps_per_s'] / rate:.1f}x it, pipec eager "
              f"{d['pipec_eager']['steps_per_s'] / rate:.1f}x")
    floor = graph["floor"]
    if "unavailable" in floor:
        print(f"\nnodes {graph['nodes']}; critical path not available: {floor['unavailable']}")
        return
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
                           ("jax", "JAX jit + lax.scan")):
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
    sys.exit(main())
