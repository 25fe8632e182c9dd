"""Does a flagship pipeline learn, and how robustly? Trains pipelines/rl_step.pipe (or
--pipe, e.g. pipelines/c51_step.pipe) for several seeds (and optional -D variants) and
reports when the mean return of the last 100 episodes first reaches 195, its lowest value
afterwards, and its final value; writes OUT/NAME.json and the curves to OUT/NAME.png (NAME:
learning for rl_step, c51_learning for c51_step).

    python bench/learning.py [--seeds 1 2 3] [--steps 10000] [--variant NAME=EXPR,NAME=EXPR ...]
    python bench/learning.py --pipe pipelines/c51_step.pipe --out docs   # docs/c51_learning.png"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from common import save_json, table

PIPE = Path(__file__).resolve().parent.parent / "pipelines" / "rl_step.pipe"
SOLVED = 195.0


def output_name(pipe: Path) -> str:
    """learning for rl_step.pipe (the name its published figures have), else
    <stem without _step>_learning."""
    return "learning" if pipe.name == PIPE.name else pipe.stem.removesuffix("_step") + "_learning"


def train(defines: dict, steps: int, log_every: int, pipe: Path = PIPE) -> dict:
    import pipec

    curve = []
    with pipec.load(pipe, defines=defines) as pipeline:
        start = time.perf_counter()
        for done in range(log_every, steps + 1, log_every):
            pipeline.step(log_every)
            pipeline.synchronize()
            curve.append((done, pipeline.readback()["mean_return_100"]))
        wall = time.perf_counter() - start
    first = next((s for s, r in curve if r >= SOLVED), None)
    after = [r for s, r in curve if first is not None and s >= first]
    return {"defines": defines, "curve": curve, "solved_step": first,
            "min_after_solved": min(after) if after else None, "final": curve[-1][1],
            "steps_per_s": steps / wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipe", type=Path, default=PIPE, help="the pipeline to train")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--steps", type=int, default=10000)
    parser.add_argument("--log-every", type=int, default=500)
    parser.add_argument("--variant", action="append", default=[],
                        help="NAME=EXPR,NAME=EXPR overrides; the defaults always run")
    parser.add_argument("--out", type=Path, default=Path("out"))
    parser.add_argument("--replot", type=Path, metavar="JSON", help="only redraw the chart of a saved run")
    args = parser.parse_args()
    name = output_name(args.pipe)
    if args.replot:
        plot(json.loads(args.replot.read_text()), args.out / f"{name}.png", args.pipe.stem)
        return
    variants = [{}] + [dict(item.split("=", 1) for item in v.split(",")) for v in args.variant]
    runs = [train({**variant, "SEED": seed}, args.steps, args.log_every, args.pipe)
            for variant in variants for seed in args.seeds]
    save_json(args.out / f"{name}.json", runs)
    print(table(["overrides", "seed", "reached 195 at", "lowest after", "final", "steps/s"], [
        [",".join(f"{k}={v}" for k, v in r["defines"].items() if k != "SEED") or "defaults",
         r["defines"]["SEED"], r["solved_step"] or "never", r["min_after_solved"] or "-", r["final"],
         round(r["steps_per_s"])]
        for r in runs]))
    plot(runs, args.out / f"{name}.png", args.pipe.stem)


def plot(runs: list[dict], path: Path, title: str) -> None:
    """Mean return of the last 100 episodes against the step, one line per run."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for r in runs:
        variant = ",".join(f"{k}={v}" for k, v in r["defines"].items() if k != "SEED") or "defaults"
        steps, returns = zip(*r["curve"])
        ax.plot(steps, returns, marker=".", linewidth=1.2, label=f"seed {r['defines']['SEED']} ({variant[:40]})")
    ax.axhline(SOLVED, color="gray", linestyle="--", linewidth=1)
    ax.set_xlabel("step")
    ax.set_ylabel("mean return, last 100 episodes")
    ax.set_ylim(0, 520)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
