"""`piperun`: load a pipeline, replay its step, read diagnostics back, verify, profile.

Exit status: 0 done, 1 the run failed (a CUDA error, a verification difference, out of
memory, a closed output pipe), 2 it could not start (usage, an invalid `[tool.pipec]`, no
kernel compiler, a `.pipe` file that does not check, no GPU). Every failure is one line on
stderr (a file that does not check: the compiler's report), never a traceback.
"""

from __future__ import annotations

import argparse
import difflib
import itertools
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..cli.arguments import OneLineParser, ShowVersion, UsageError, add_color_options, check_toolchain, define
from ..cli.exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, report
from ..cli.terminal import finish_stdout, say, stdout_failures, use_color
from ..compiler import compile_file
from ..compiler.config import load_settings
from ..dsl import ast
from ..dsl.source import open_regular
from ..errors import Error
from ..wording import counted
from .bundle_cli import check_bundle_updates, is_bundle, refuse_compiling_options
from .cli_reports import gemm_summary, plot_run, profile_report, save_gemm_algorithms, verify_report
from .distributed import nccl_environment, stop_other_ranks
from .process_launchers import Launch, launch_from_environment

# With collectives, piperun never has more than IN_FLIGHT nodes (of graph launches or eager
# steps) enqueued and not known finished. A wait polls for a failed rank; a launch does not:
# once the stream's queue is full the next one blocks inside the driver, out of reach of any
# failure report or timeout, until a launch ahead of it finishes, which never happens when a
# peer has died. A graph launch fills that queue as its nodes do: measured on the H200s, 256
# launches of an 18-node graph blocked in cuGraphLaunch, 16 did not. The launches go in chunks
# of half of it, and before each chunk piperun waits for the one before the last: the GPU always
# has a chunk queued, so the waits cost it nothing.
IN_FLIGHT = 256


def parser() -> argparse.ArgumentParser:
    # One add_argument per option, in --help's order: longer than a function should be, and
    # read as the table of options it is.
    p = OneLineParser(
        prog="piperun",
        description="Build a .pipe pipeline's CUDA graph explicitly and replay it.",
        epilog="docs/cli.md describes every option and exit code.",
    )
    p.add_argument("file", type=Path, metavar="FILE",
                   help="the .pipe pipeline, or a bundle's folder (`pipec build FILE -o DIR`)")
    p.add_argument("--steps", type=int, default=1000, help="steps to run (default 1000)")
    p.add_argument("--log-every", type=int, default=500, metavar="K",
                   help="read the mapped diagnostics every K steps (default 500)")
    p.add_argument("--steps-per-launch", type=int, default=1, metavar="K",
                   help="run K steps in a device-side loop per graph launch (divides --steps and --log-every)")
    p.add_argument("--unroll", action="store_true",
                   help="with --steps-per-launch K: K copies of the step in one graph instead of a device-side loop")
    p.add_argument("--json", action="store_true", help="one JSON object per log point, and a summary")
    p.add_argument("--eager", action="store_true", help="launch the nodes one by one instead of replaying")
    p.add_argument("--sync-each", action="store_true",
                   help="with --eager: wait after every node, to pin a fault on its node")
    p.add_argument("--verify", type=int, metavar="K",
                   help="run K steps eagerly and K as graph replays from one state; compare every buffer")
    p.add_argument("--profile", action="store_true",
                   help="per-node times inside graph replays (CUPTI), the critical path, its floor, slack")
    p.add_argument("--trace", type=Path, metavar="FILE.json",
                   help="profile, and write the replay timeline as a Chrome trace (Perfetto opens it)")
    p.add_argument("--save-state", type=Path, metavar="DIR", help="save every buffer at the end")
    p.add_argument("--load-state", type=Path, metavar="DIR", help="start from a saved state")
    p.add_argument("--plot", type=Path, metavar="PNG", help="plot the diagnostics against steps")
    p.add_argument("-D", "--define", action="append", type=define, dest="defines", default=[],
                   metavar="NAME=EXPR", help="override a constant of the file (repeatable)")
    p.add_argument("--set", action="append", type=scheduled_update, dest="updates", default=[],
                   metavar="NAME=VALUE@STEP",
                   help="from step STEP on, the constant NAME is VALUE, updated in the built graph (repeatable)")
    p.add_argument("--tune-gemms", action="store_true",
                   help="time the heuristic's best algorithms for each GEMM node and keep the fastest")
    p.add_argument("--save-gemm-algorithms", type=Path, metavar="F.json",
                   help="write each GEMM node's algorithm on this GPU, for `pipec build --gemm-algorithms F.json`")
    p.add_argument("--device", type=int,
                   help="CUDA device ordinal (default: the launcher's local rank, else 0)")
    p.add_argument("--lanes", type=int, help="bound the plan's parallel width")
    p.add_argument("--include-dir", action="append", type=Path, dest="include_dirs", default=[],
                   help="also look for imported files here (repeatable)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_color_options(p)
    p.add_argument("--version", action=ShowVersion)
    return p


def scheduled_update(text: str) -> tuple[int, str, str]:
    """`NAME=VALUE@STEP` as (step, name, value)."""
    assignment, at, step = text.rpartition("@")
    try:
        name, value = define(assignment)
        when = int(step)
    except (argparse.ArgumentTypeError, ValueError):
        raise argparse.ArgumentTypeError(f"`{text}` is not NAME=VALUE@STEP") from None
    if not at or when < 0:
        raise argparse.ArgumentTypeError(f"`{text}` is not NAME=VALUE@STEP")
    return when, name, value


@dataclass
class RunLog:
    """The log points of a run, each with its wall time since `started` (perf_counter seconds)."""

    started: float = field(default_factory=time.perf_counter)
    points: list[dict] = field(default_factory=list)
    interrupted: bool = False  # Ctrl-C ended the replays early


def main(argv: list[str] | None = None) -> int:
    try:
        try:
            return _main(parser().parse_args(argv))
        finally:
            finish_stdout()
    except BrokenPipeError:  # the reader of stdout went away (`piperun ... --json | head -1`)
        return EXIT_FAILED
    except Error as error:  # stdout failed (OutputError, a full disk): the run's log is lost
        return report("piperun", error, color=False, running=True)
    except KeyboardInterrupt:  # before the replays (compiling, loading) or in a report after them
        say("piperun", "error", "interrupted", color=False)
        return EXIT_INTERRUPTED


def _preflight(args) -> None:
    """What stops a run before any GPU work: the configuration, the kernel compiler (a bundle
    needs none, nor the options that compile), and for a profile, CUPTI."""
    if is_bundle(args.file):
        refuse_compiling_options(args)
        check_bundle_updates(args)
    else:
        open_regular(args.file).close()  # unreadable or a FIFO: said as pipec says it, before any GPU
        settings = load_settings(args.file)
        check_toolchain(settings.compile)
        if args.updates:
            _check_updated_names(args, settings)
    if args.profile or args.trace:
        from .profile_collect import load_cupti

        load_cupti()


def _check_updated_names(args, settings) -> None:
    """`--set NAME=...` must name a constant of the file, refused before a GPU is looked for
    rather than at its step, after the run's first part. A file that does not parse is left to
    the load, which reports its diagnostics."""
    tree = compile_file(args.file, settings, until="parse").tree
    if tree is None:
        return
    declared = sorted(decl.name.text for decl in tree.decls if isinstance(decl, ast.ConstDecl))
    for _, name, _ in args.updates:
        if name not in declared:
            close = difflib.get_close_matches(name, declared, n=1)
            raise UsageError(f"--set {name}: {args.file} declares no constant `{name}`"
                             + (f"; did you mean `{close[0]}`?" if close else
                                f" (its constants: {', '.join(declared) or 'none'})"))


def _worded(args, error: Error | OSError) -> Error | OSError:
    """A file that cannot be read, worded as pipec words it (the path as given when it is FILE)."""
    if not isinstance(error, OSError) or not error.filename:
        return error
    path = args.file if Path(error.filename).resolve() == args.file.resolve() else error.filename
    return OSError(f"cannot read {path}: {error.strerror or error}")


def _error(args, message: str, label: str = "error") -> None:
    say(args.prog, label, message, color=use_color(args.color, sys.stderr))


def _main(args) -> int:
    args.prog = "piperun"
    _check_arguments(args)
    try:
        from .bundle import load_bundle
        from .load import LoadOptions, load
    except ImportError as error:  # pragma: no cover - an incomplete installation
        _error(args, str(error))
        return EXIT_USAGE
    try:
        _preflight(args)
        launch = launch_from_environment()
        _join(args, launch)
        device = args.device if args.device is not None else launch.local_rank if launch else 0
        if is_bundle(args.file):
            pipeline = load_bundle(args.file, device=device, launch=launch, tune_gemms=args.tune_gemms)
        else:
            pipeline = load(args.file, LoadOptions(
                device=device, lanes=args.lanes, include_dirs=tuple(args.include_dirs), defines=dict(args.defines),
                steps_per_launch=args.steps_per_launch, unroll=args.unroll, launch=launch,
                tune_gemms=args.tune_gemms))
    except (Error, OSError) as error:
        return report(args.prog, _worded(args, error), color=use_color(args.color, sys.stderr))
    with pipeline:
        try:
            status = _run_reported(args, pipeline)
        except BaseException as error:  # an interrupt, or a bug: the other ranks must not wait
            stop_other_ranks(pipeline, f"it stopped: {type(error).__name__}")
            raise
        if status != EXIT_OK:
            stop_other_ranks(pipeline, f"it exited with status {status}")
        return status


def _check_arguments(args) -> None:
    """The options' combinations that make no run: a usage error, before anything is read."""
    if args.steps < 0 or args.log_every < 1 or (args.verify is not None and args.verify < 1):
        parser().error("--steps must be >= 0, --log-every and --verify >= 1")
    per_launch = args.steps_per_launch
    if per_launch < 1 or args.steps % per_launch or args.log_every % per_launch:
        parser().error("--steps-per-launch must be >= 1 and divide --steps and --log-every")
    if args.sync_each and not args.eager:
        parser().error("--sync-each goes with --eager")
    if args.updates and (args.verify is not None or args.profile or args.trace):
        parser().error("--set goes with a run, not with --verify, --profile or --trace")
    if any(step % per_launch for step, _, _ in args.updates):
        parser().error("--set steps must be multiples of --steps-per-launch (updates land between launches)")


def _join(args, launch: Launch | None) -> None:
    """This process as one rank of a launch: its name in every line, NCCL's environment."""
    if launch is None:
        return
    args.prog = f"piperun[rank {launch.rank}]"  # which rank says it, in every line it writes
    if args.save_gemm_algorithms and launch.world_size > 1:
        raise UsageError("--save-gemm-algorithms runs on one rank only: save the algorithms with WORLD_SIZE = 1")
    nccl_environment()  # before anything in this process can initialise NCCL
    if launch.rank != 0:  # one progress bar and one plot per run: rank 0's
        args.no_progress, args.plot = True, None


def _run_reported(args, pipeline) -> int:
    """`_run`, its failures reported as one line (or an update's diagnostics) and an exit status."""
    from .driver import CudaError

    try:
        return _run(args, pipeline)
    except Error as error:
        status = report(args.prog, error, color=use_color(args.color, sys.stderr), running=True)
        if isinstance(error, CudaError) and not args.eager:
            _error(args, "rerun with --eager --sync-each to find the node that fails", "hint")
        return status


def _run(args, pipeline) -> int:
    out = sys.stdout
    info = sys.stderr if args.json else sys.stdout
    print(f"{args.prog}: {pipeline.plan.pipe} on {pipeline.device.describe()}: "
          f"{counted(pipeline.graph.node_count, 'node')} in "
          f"{counted(len(list(pipeline.plan.graph_tree(pipeline.plan.step))), 'graph')}, "
          f"{counted(pipeline.modules.instance_count, 'module instance')}", file=info)
    if is_bundle(args.file) and pipeline.gemm_choices:  # whether the bundle's stored algorithms took effect
        print(f"{args.prog}: GEMM algorithms: {gemm_summary(pipeline.gemm_choices)}", file=info)
    if args.save_gemm_algorithms:
        save_gemm_algorithms(args, pipeline, info)
    start_step = 0
    if args.load_state:
        metadata = pipeline.load_state(_rank_folder(args.load_state, pipeline))
        start_step = int(metadata.get("steps", "0"))
        print(f"{args.prog}: resumed from {args.load_state} at step {start_step}", file=info)
    if args.verify is not None:
        return verify_report(args, pipeline, info)
    if args.profile or args.trace:
        return profile_report(args, pipeline, info)
    log, done = _replay(args, pipeline, start_step, out, info)
    if args.save_state:
        path = pipeline.save_state(_rank_folder(args.save_state, pipeline), start_step + done)
        print(f"{args.prog}: saved state after step {start_step + done} to {path}", file=info)
    if args.plot:
        plot_run(log, args.plot, pipeline.plan.pipe)
        print(f"{args.prog}: wrote {args.plot}", file=info)
    return EXIT_INTERRUPTED if log.interrupted else EXIT_OK


def _replay(args, pipeline, start_step: int, out, info) -> tuple[RunLog, int]:
    """Run `args.steps` steps (graph replays, or eagerly), logging every `args.log_every`, and
    report the run; returns the log and the steps done (fewer when interrupted)."""
    from tqdm import tqdm

    call = pipeline.driver.call
    run = (lambda n: pipeline.run_eager(n, synchronize_each=args.sync_each)) if args.eager else pipeline.step
    events = [call("cuEventCreate", 0) for _ in range(2)]
    if pipeline.collectives is not None:  # and two for the bounded launches' chunks
        events += [call("cuEventCreate", pipeline.driver.cu.CUevent_flags.CU_EVENT_DISABLE_TIMING) for _ in range(2)]
        run = _bounded(run, pipeline, events[2:])
    bar = tqdm(total=args.steps, unit="step", disable=True if args.no_progress or args.json else None,
               file=sys.stderr, dynamic_ncols=True)
    log = RunLog()
    call("cuEventRecord", events[0], pipeline.stream)
    try:
        done, log.interrupted = _run_steps(args, pipeline, run, events[1], start_step, log, bar, out, info)
    finally:
        bar.close()
    wall = time.perf_counter() - log.started
    gpu_ms = call("cuEventElapsedTime", events[0], events[1]) if done else 0.0
    for event in events:
        call("cuEventDestroy", event)
    _summarize(args, pipeline, done, log.interrupted, wall, gpu_ms, out, info)
    return log, done


def _run_steps(args, pipeline, run, mark, start_step: int, log: RunLog, bar, out, info) -> tuple[int, bool]:
    """The replay loop: the updates due, then steps up to the next log point or update; at a log
    point, `mark` recorded and waited for (between replays, never inside one) and the readback
    logged. Returns the steps done and whether an interrupt ended the loop."""
    call, done = pipeline.driver.call, 0
    schedule = sorted(args.updates, key=lambda update: update[0])  # (step, name, value), in order given
    try:
        while done < args.steps:
            schedule = _apply_updates(pipeline, schedule, start_step + done, args.json, out, info)
            until = min((done // args.log_every + 1) * args.log_every, args.steps,
                        *(step - start_step for step, _, _ in schedule[:1]))
            chunk = until - done
            run(chunk // args.steps_per_launch)
            done += chunk
            bar.update(chunk)
            if done % args.log_every and done < args.steps:
                continue  # an update is due before the next log point
            call("cuEventRecord", mark, pipeline.stream)
            if pipeline.collectives is not None:
                pipeline.synchronize()  # a wait that stops when another rank fails
            call("cuEventSynchronize", mark)
            point = {"step": start_step + done, "wall_s": round(time.perf_counter() - log.started, 4),
                     "readback": pipeline.readback()}
            log.points.append(point)
            bar.set_postfix_str(_short(point["readback"]), refresh=False)
            if args.json:
                _emit({"event": "log", **_rank(pipeline), **point}, out)
    except KeyboardInterrupt:
        pipeline.synchronize()
        return done, True
    return done, False


def _summarize(args, pipeline, done: int, interrupted: bool, wall: float, gpu_ms: float, out, info) -> None:
    summary = {
        "event": "summary", **_rank(pipeline), "pipe": pipeline.plan.pipe,
        "mode": "eager" if args.eager else "graph",
        "steps": done, "interrupted": interrupted, "wall_s": round(wall, 4),
        "steps_per_s": round(done / wall, 2) if wall > 0 else None,
        "gpu_us_per_step": round(gpu_ms * 1000 / done, 3) if done else None,
        "device": pipeline.device.name, "readback": pipeline.readback(),
    }
    if args.json:
        _emit(summary, out)
        return
    state = "interrupted after" if interrupted else "ran"
    print(f"{args.prog}: {state} {counted(done, 'step')} in {wall:.3f} s: {summary['steps_per_s']} steps/s, "
          f"{summary['gpu_us_per_step']} us of GPU time per step ({summary['mode']})", file=info)
    if summary["readback"]:
        print(f"{args.prog}: " + _short(summary["readback"]), file=info)


def _bounded(run, pipeline, marks: list):
    """`run` (of n graph launches, or n eager steps) in chunks of IN_FLIGHT / 2 nodes, a launch
    counting as the nodes of one step; after a chunk is enqueued (and `marks[k % 2]` recorded
    behind chunk k), it waits, polling for a failed rank, until chunk k - 1 has finished."""
    per_chunk = max(1, IN_FLIGHT // 2 // len(pipeline.eager.nodes))
    call, stream, collectives = pipeline.driver.call, pipeline.stream, pipeline.collectives
    chunks = itertools.count()

    def bounded(n: int) -> None:
        for start in range(0, n, per_chunk):
            run(min(per_chunk, n - start))
            k = next(chunks)
            call("cuEventRecord", marks[k % 2], stream)
            if k:
                collectives.wait(stream, event=marks[(k - 1) % 2])
    return bounded


def _emit(record: dict, out) -> None:
    """One JSON line in one write: the ranks of a launcher share its stdout, and `print` writes
    the text and the newline apart (two writes when unbuffered), so lines could interleave."""
    with stdout_failures(quiet_broken_pipe=False):  # `piperun --json | head -1` stops the run
        out.write(json.dumps(record) + "\n")
        out.flush()


def _rank(pipeline) -> dict:
    """The rank and world size, in each JSON line of a run under a launcher."""
    launch = pipeline.distributed.launch if pipeline.distributed else None
    return {"rank": launch.rank, "world_size": launch.world_size} if launch and launch.launcher != "none" else {}


def _apply_updates(pipeline, schedule: list, step: int, as_json: bool, out, info) -> list:
    """Apply the updates due at `step` (and, on a resumed run, those due before it), in order;
    returns the rest of the schedule."""
    due = [(when, name, value) for when, name, value in schedule if when <= step]
    for when, name, value in due:
        nodes = pipeline.update(**{name: value})
        if as_json:
            _emit({"event": "set", "step": step, "name": name, "value": value, "nodes": nodes}, out)
        else:
            print(f"piperun: step {step}: {name} = {value} ({counted(len(nodes), 'kernel node')} updated)", file=info)
    return schedule[len(due):]


def _short(values: dict) -> str:
    def fmt(v):
        return f"{v:.4g}" if isinstance(v, float) and math.isfinite(v) else str(v)
    return " ".join(f"{k}={fmt(v)}" for k, v in list(values.items())[:8])


def _rank_folder(folder: Path, pipeline) -> Path:
    """A state folder's part for this rank: each rank steps its own environments and replay,
    so each keeps its own state (`DIR/rank<R>`); one process keeps `DIR` itself."""
    distributed = pipeline.distributed
    if distributed is None or distributed.launch.world_size == 1:
        return folder
    return folder / f"rank{distributed.launch.rank}"


if __name__ == "__main__":
    sys.exit(main())
