"""What device control flow costs, and what it buys the flagship step.

    python bench/control_flow.py [--repeats 7] [--steps 2000] [--out DIR]

(a) An IF node taken and not taken: a chain of CHAIN `if flag[0] { tiny }` against the same
    chain of bare `tiny` kernels (bench/tiny.cu); the difference per link is what one IF adds.
(b) One WHILE iteration: `repeat K { tiny }` for K = 1, 10, 100, 1000; the least-squares slope
    of replay time over K is the cost of an iteration (body kernel, deciding kernel, loop).
(c) rl_step with `steps_per_launch` K = 1, 2, 4, ..., 512, 1000: host time to enqueue a step,
    wall steps/s and GPU time per step (each run is a whole number of launches of K steps).
(d) rl_step with DEVICE_BRANCHES=1 (learner under `if learn_on[0]`, plateau controller under
    `every LR_CHECK_EVERY`) against DEVICE_BRANCHES=0 (every node launched every step).

Every figure is a median over --repeats timed runs after a warm-up, in one process: GPU time
from CUDA events around the launches, host time around the enqueue (synchronised, untimed,
after each run), wall time around enqueue and synchronise. rl_step is timed after its warm-up
has passed LEARNING_STARTS, so its learner runs on every timed step."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from common import TINY, cuda_events_ms, environment, host_us, median, save_json, table, write_pipe

ROOT = Path(__file__).resolve().parent.parent
RL_STEP = ROOT / "pipelines" / "rl_step.pipe"
CHAIN = 100                                  # IF nodes (or bare kernels) in one replay of (a)
LOOP_COUNTS = (1, 10, 100, 1000)             # K of (b)
STEPS_PER_LAUNCH = tuple(1 << i for i in range(10)) + (1000,)  # K of (c)
WARMUP_STEPS = 200                           # rl_step: past LEARNING_STARTS (about 40 steps)
REPLAYS = 200                                # replays of one timed run of (a) and (b)


def if_chain_pipe(flag: int | None) -> str:
    """CHAIN dependent tiny kernels, each inside `if flag[0]` (flag holding `flag`), or bare
    when `flag` is None."""
    launch = "launch tiny<<<1, 32>>>(counter)"
    if flag is None:
        body, decl = "\n".join(f"    {launch}" for _ in range(CHAIN)), ""
    else:
        body = "\n".join(f"    if flag[0] {{ {launch} }}" for _ in range(CHAIN))
        decl = f"buffer flag: i32[1] = fill({flag})\n"
    return f'from "{TINY.name}" import tiny\n{decl}buffer counter: u32[1]\nstep {{\n{body}\n}}\n'


def repeat_pipe(count: int) -> str:
    """One `repeat count` loop around one tiny kernel."""
    return (f'from "{TINY.name}" import tiny\nbuffer counter: u32[1]\n'
            f"step {{\n    repeat {count} {{ launch tiny<<<1, 32>>>(counter) }}\n}}\n")


def generated_pipes() -> dict[str, str]:
    """Every pipeline (a) and (b) measure, by name (common.write_pipe puts tiny.cu beside them)."""
    pipes = {"if_none": if_chain_pipe(None), "if_taken": if_chain_pipe(1), "if_not_taken": if_chain_pipe(0)}
    pipes.update({f"repeat_{k}": repeat_pipe(k) for k in LOOP_COUNTS})
    return pipes


def no_driver(path: Path) -> None:
    """The driver to load `path` with: None, the CUDA driver (the CPU test passes a fake's)."""
    return None


def replay_us(path: Path, repeats: int, driver_for=no_driver) -> float:
    """Median GPU microseconds of one replay of the pipeline at `path`."""
    import pipec
    from pipec.runtime import Backends

    with pipec.load(path, backends=Backends(driver_for(path))) as p:
        p.step(REPLAYS)  # warm-up: lazy module loads, clocks
        p.synchronize()
        gpu_ms = median(cuda_events_ms(p.driver.call, p.stream, lambda: p.step(REPLAYS), repeats))
        return gpu_ms * 1000 / REPLAYS


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of y over x."""
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    return (sum((x - mean_x) * (y - mean_y) for x, y in points)
            / sum((x - mean_x) ** 2 for x, _ in points))


def measure_nodes(folder: Path, repeats: int, driver_for=no_driver) -> dict:
    """(a) and (b): replay microseconds of every generated pipeline, with the derived costs."""
    replay = {name: replay_us(write_pipe(folder, name, text), repeats, driver_for)
              for name, text in generated_pipes().items()}
    loop = [(k, replay[f"repeat_{k}"]) for k in LOOP_COUNTS]
    return {"replay_us": replay, "chain": CHAIN, "loop_counts": list(LOOP_COUNTS),
            "if_taken_us": (replay["if_taken"] - replay["if_none"]) / CHAIN,
            "if_not_taken_us": (replay["if_not_taken"] - replay["if_none"]) / CHAIN,
            "kernel_in_chain_us": replay["if_none"] / CHAIN,
            "while_iteration_us": slope(loop)}


def time_rl_step(steps: int, repeats: int, steps_per_launch: int = 1, defines: dict | None = None,
                 driver_for=no_driver) -> dict:
    """(c) and (d): one rl_step configuration, timed over whole launches of `steps_per_launch`
    steps, about `steps` steps a run."""
    import pipec
    from pipec.runtime import Backends

    launches = max(1, round(steps / steps_per_launch))
    with pipec.load(RL_STEP, defines=defines, steps_per_launch=steps_per_launch,
                    backends=Backends(driver_for(RL_STEP))) as p:
        p.step(max(1, -(-WARMUP_STEPS // steps_per_launch)))
        p.synchronize()
        run = lambda: p.step(launches)  # noqa: E731 - the timed call
        done = launches * steps_per_launch
        host = median(host_us(run, repeats, settle=p.synchronize))
        wall = median(host_us(lambda: (run(), p.synchronize()), repeats))
        gpu = median(cuda_events_ms(p.driver.call, p.stream, run, repeats)) * 1000
        return {"steps_per_launch": steps_per_launch, "defines": defines or {}, "steps": done,
                "host_us_per_step": host / done, "steps_per_s": done / wall * 1e6,
                "gpu_us_per_step": gpu / done}


def measure(out: Path, repeats: int, steps: int, driver_for=no_driver,
            launch_counts=STEPS_PER_LAUNCH) -> dict:
    return {"nodes": measure_nodes(out / "control_flow_pipes", repeats, driver_for),
            "steps_per_launch": [time_rl_step(steps, repeats, k, driver_for=driver_for)
                                 for k in launch_counts],
            "branches": [time_rl_step(steps, repeats, 1, {"DEVICE_BRANCHES": b}, driver_for)
                         for b in (1, 0)]}


def report(results: dict) -> str:
    """The tables of `results` (as `measure` returns them)."""
    nodes = results["nodes"]
    replay = nodes["replay_us"]
    chain = nodes["chain"]
    lines = [f"(a) an IF node: {chain} dependent links, GPU us per replay",
             table(["link", "replay us", "us per link", "added per link us"],
                   [["tiny kernel", replay["if_none"], nodes["kernel_in_chain_us"], "-"],
                    ["if taken { tiny }", replay["if_taken"], replay["if_taken"] / chain,
                     nodes["if_taken_us"]],
                    ["if not taken", replay["if_not_taken"], replay["if_not_taken"] / chain,
                     nodes["if_not_taken_us"]]]),
             "", "(b) a WHILE loop: repeat K { tiny }, GPU us per replay",
             table(["K", "replay us"], [[k, replay[f"repeat_{k}"]] for k in nodes["loop_counts"]]),
             f"slope: {nodes['while_iteration_us']:.3f} us per iteration",
             "", "(c) rl_step, K steps per launch",
             table(["K", "steps", "host us/step", "steps/s", "GPU us/step"],
                   [[r["steps_per_launch"], r["steps"], r["host_us_per_step"], f"{r['steps_per_s']:.0f}",
                     r["gpu_us_per_step"]] for r in results["steps_per_launch"]]),
             "", "(d) rl_step, device branches on and off (K = 1)",
             table(["DEVICE_BRANCHES", "steps/s", "GPU us/step", "host us/step"],
                   [[r["defines"]["DEVICE_BRANCHES"], f"{r['steps_per_s']:.0f}", r["gpu_us_per_step"],
                     r["host_us_per_step"]] for r in results["branches"]])]
    on, off = results["branches"]
    lines.append(f"DEVICE_BRANCHES=1 runs at {on['steps_per_s'] / off['steps_per_s']:.3f}x the steps/s of 0")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per figure (median)")
    parser.add_argument("--steps", type=int, default=2000, help="rl_step steps per timed run (about)")
    parser.add_argument("--out", type=Path, default=Path("out"))
    args = parser.parse_args()
    results = {"environment": environment(), **measure(args.out, args.repeats, args.steps)}
    save_json(args.out / "control_flow.json", results)
    print(report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
