"""`piperun`'s reports: how the GEMM algorithms were chosen (and `--save-gemm-algorithms`), and
after a run `--verify` (with the ranks' replicated buffers), `--profile` and `--trace`, and
`--plot`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..cli.exits import EXIT_FAILED, EXIT_OK
from ..files import replacing, write_atomically
from ..plan.gemm_algorithms import file_text
from ..wording import counted, verb
from .distributed import replicated_differences
from .gemm_nodes import GemmChoice

PROFILE_REPLAYS, TRACE_REPLAYS = 200, 3


def gemm_summary(choices: Sequence[GemmChoice]) -> str:
    """The nodes grouped by how their algorithm was chosen: `stored (tune): all 14 nodes`, or
    `stored (tune): 12 of 14 nodes; heuristic: <why not the stored one>: `a`, `b``."""
    groups: dict[str, list[str]] = {}
    for choice in choices:
        groups.setdefault(choice.why, []).append(choice.node)
    total = len(choices)

    def nodes(names: list[str]) -> str:
        if len(names) == total > 1:
            return f"all {total} nodes"
        if len(names) <= 3:
            return ", ".join(f"`{name}`" for name in names)
        return f"{len(names)} of {total} nodes"
    return "; ".join(f"{why}: {nodes(names)}" for why, names in groups.items())


def save_gemm_algorithms(args, pipeline, info) -> None:
    data = pipeline.gemm_algorithms()
    path = args.save_gemm_algorithms
    try:
        write_atomically(path, file_text(data))
    except OSError as error:
        raise SystemExit(f"{args.prog}: error: cannot write {path}: {error.strerror or error}") from None
    print(f"{args.prog}: saved the algorithms of {counted(len(data['gemms']), 'GEMM node')} on "
          f"{pipeline.device.name} to {path}", file=info)


def verify_report(args, pipeline, info) -> int:
    report = pipeline.verify(args.verify)
    for line in report.describe_branches():
        print(f"{args.prog}: verify: branches taken (eager) {line}", file=info)
    differences = []
    if pipeline.distributed is not None:
        # On every rank, whatever its own comparison gave: the others replay (and so issue
        # collectives) and exchange digests here too, and would wait for this rank.
        differences = replicated_differences(pipeline, args.verify)
        for line in differences:
            print(f"{args.prog}: verify: {line}", file=info)
        if not differences and pipeline.distributed.launch.world_size > 1:  # one rank compares nothing
            replicated = sum(b.replicated for b in pipeline.plan.buffers)
            print(f"{args.prog}: verify: {'the ' * (replicated != 1)}{counted(replicated, 'replicated buffer')} "
                  f"{verb('holds', replicated)} the same bits on all {pipeline.distributed.launch.world_size} ranks "
                  f"after {counted(args.verify, 'step')}", file=info)
    if report.ok and not differences:
        print(f"{args.prog}: verify: {counted(report.steps, 'eager step')} and {counted(report.steps, 'graph replay')} "
              f"agree bit for bit on all {counted(report.buffers, 'buffer')}; two graph runs agree too "
              f"({counted(len(report.poisoned), 'output buffer')} poisoned first)", file=info)
        return EXIT_OK
    if not report.ok:
        print(f"{args.prog}: verify: {counted(len(report.mismatches), 'difference')} after "
              f"{counted(report.steps, 'step')}:", file=info)
        for mismatch in report.mismatches:
            print(f"  {mismatch.describe()}", file=info)
    return EXIT_FAILED


def profile_report(args, pipeline, info) -> int:
    from .trace import write_chrome_trace

    report = pipeline.profile(PROFILE_REPLAYS)
    print(f"{args.prog}: profile of {counted(report.node_count, 'node')} inside "
          f"{counted(report.replays, 'graph replay')} (CUPTI; "
          "medians; * on the critical path)", file=info)
    width = max((len(n.name) for n in report.nodes), default=4)
    print(f"    {'node':<{width}}  {'kind':<6}  {'us':>7}  {'latency':>7}  {'slack':>7}  location", file=info)
    for node in report.nodes:
        mark = "*" if node.critical else " "
        print(f"  {mark} {node.name:<{width}}  {node.kind:<6}  {node.microseconds:7.2f}  "
              f"{node.latency_us:7.2f}  {node.slack_us:7.2f}  {node.location}", file=info)
    print(f"  critical path    {counted(len(report.critical_path), 'node')}: {report.kernel_us:.1f} us of node time + "
          f"{report.latency_us:.1f} us of dependency latency = {report.critical_path_us:.1f} us, "
          "the floor for one step", file=info)
    print(f"  graph replay     {report.replay_us:.1f} us from first node start to last node end "
          f"({report.replay_over_floor:.2f}x the floor); {report.event_us:.1f} us per step by CUDA events",
          file=info)
    if report.replay_us > 0:
        kernel, latency, idle = (f"{us:.1f} us ({100 * us / report.replay_us:.0f}%)"
                                 for us in (report.kernel_us, report.latency_us, report.idle_us))
        print(f"  where time goes  node time {kernel}, dependency latency {latency}, idle {idle}", file=info)
    if args.trace:
        try:
            write_chrome_trace(report, pipeline.plan.pipe, args.trace, TRACE_REPLAYS)
        except OSError as error:
            raise SystemExit(f"piperun: error: cannot write {args.trace}: {error.strerror or error}") from None
        print(f"{args.prog}: wrote the timeline of {counted(min(TRACE_REPLAYS, report.replays), 'replay')} to "
              f"{args.trace}",
              file=info)
    return EXIT_OK


def plot_run(log, path: Path, title: str) -> None:
    """The mapped readback's labelled values against the step, one panel each (`log`: the run's RunLog)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("piperun: error: --plot needs matplotlib (pip install 'pipec[plot]')") from None
    labels = [k for k in (log.points[0]["readback"] if log.points else {}) if k != "step"]
    if not labels:
        raise SystemExit("piperun: error: --plot needs a mapped buffer with labels to plot")
    fig, axes = plt.subplots(len(labels), 1, figsize=(8, 2.2 * len(labels)), sharex=True, squeeze=False)
    steps = [p["step"] for p in log.points]
    for ax, label in zip(axes[:, 0], labels):
        ax.plot(steps, [p["readback"][label] for p in log.points], linewidth=1.2)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("step")
    fig.suptitle(title)
    fig.tight_layout()
    try:
        with replacing(path) as temporary:  # the format follows the suffix, which `replacing` keeps
            fig.savefig(temporary, dpi=120)
    except OSError as error:
        raise SystemExit(f"piperun: error: cannot write {path}: {error.strerror or error}") from None
