#!/usr/bin/env python3
"""Mutation testing that works with pipec's layout (the package `pipec` is the repository root).

    PYTHONPATH=<site> python scripts/mutate.py compiler/dag.py compiler/checks --jobs 2 --json out.json

For each target module it parses the source with `ast`, derives small mutants (an operator
swapped, a constant nudged, a statement deleted, ...) and runs, for each one, the tests that
executed the mutated line in a traced baseline run. No file is ever written: a forked child
imports the mutant through an import hook, so an interrupted run leaves the checkout intact.
A mutant is killed when a test fails (or the tests cannot even be collected), survives when
they all pass, and times out after `--timeout-factor` times its tests' baseline time.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.abc
import importlib.util
import json
import os
import shlex
import signal
import sys
import tempfile
import threading
import time
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutants import Mutant, generate, mutated_tree  # noqa: E402 (a sibling script, not a package)

ROOT = Path(__file__).resolve().parent.parent

# ---------------------------------------------------------------- running tests in forked children


def module_name(path: Path, root: Path, package: str) -> str:
    parts = path.resolve().relative_to(root).with_suffix("").parts
    return ".".join([package, *(parts[:-1] if parts[-1] == "__init__" else parts)])


class _MutantImporter(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves one module from a compiled mutant instead of its file."""

    def __init__(self, name: str, path: Path, code) -> None:
        self.name, self.path, self.code = name, path, code

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        package = [str(self.path.parent)] if self.path.name == "__init__.py" else None
        return importlib.util.spec_from_file_location(fullname, self.path, loader=self,
                                                      submodule_search_locations=package)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        exec(self.code, module.__dict__)


class _Tracer:
    """A pytest plugin recording, per test, which lines of the target files ran."""

    def __init__(self, files: set[str]) -> None:
        self.files, self.real = files, {}
        self.lines: set = set()
        self.tests: dict[str, dict] = {}
        self.at_import: list = []  # lines run while the tests were collected (imports, decorators)

    def _file(self, frame):
        name = frame.f_code.co_filename
        if name not in self.real:
            self.real[name] = os.path.realpath(name)
        return self.real[name]

    def _call(self, frame, event, arg):
        return self._line if self._file(frame) in self.files else None

    def _line(self, frame, event, arg):
        if event == "line":
            self.lines.add((self._file(frame), frame.f_lineno))
        return self._line

    def _clear_caches(self) -> None:
        """Empty the caches of the target modules' cached functions (`functools.cache`): a
        cached body runs only on its first call, so without this its lines would count only
        for the first test to call it, and a mutant there would run only that test."""
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None)
            if path and os.path.realpath(path) in self.files:
                for value in list(vars(module).values()):
                    if callable(getattr(value, "cache_clear", None)):
                        value.cache_clear()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_collection(self, session):
        self.lines = set()
        sys.settrace(self._call)
        try:
            yield
        finally:
            sys.settrace(None)
            self.at_import = sorted(self.lines)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self._clear_caches()
        self.lines, start = set(), time.perf_counter()
        sys.settrace(self._call)
        threading.settrace(self._call)  # lines run on a test's threads (an abort thread) count too
        try:
            yield
        finally:
            sys.settrace(None)
            threading.settrace(None)
            entry = self.tests.setdefault(item.nodeid, {"passed": True})
            entry.update(seconds=time.perf_counter() - start, lines=sorted(self.lines))

    def pytest_runtest_logreport(self, report):
        if report.failed:
            self.tests.setdefault(report.nodeid, {})["passed"] = False


def _plugins() -> list[str]:
    """The installed pytest plugins, imported here once: children then load them by name
    (with autoloading off, which saves scanning every installed distribution per child)."""
    from importlib.metadata import entry_points
    names = []
    for entry in entry_points(group="pytest11"):
        try:
            importlib.import_module(entry.module)
            names.append(entry.module)
        except Exception:  # a broken plugin is left out, as pytest would fail on it anyway
            pass
    return names


def _pytest_args(root: Path, plugins: list[str]) -> list[str]:
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    args = ["-q", "-p", "no:cacheprovider", "--rootdir", str(root)]
    for name in plugins:
        args += ["-p", name]
    try:
        from hypothesis import settings
        settings.register_profile("mutate", deadline=None, database=None, derandomize=True, print_blob=False)
        args.append("--hypothesis-profile=mutate")
    except ImportError:
        pass
    return args


def _fork(root: Path, log: Path, body) -> int:
    """Runs body() (returning an exit status) in a child in its own process group."""
    pid = os.fork()
    if pid:
        return pid
    status = 3
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.setpgid(0, 0)
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.chdir(root)
        status = int(body())
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # a child must never return into the parent's loop
        import traceback
        traceback.print_exc()
    os._exit(status)


def baseline(root: Path, package: str, targets: list[Path], tests: list[str], scratch: Path) -> dict:
    """Runs the tests once, traced; returns per-test lines, seconds and outcome, and the
    third-party modules they imported (preloaded here so that children start fast)."""
    result = scratch / "baseline.json"

    def body():
        tracer = _Tracer({str(t) for t in targets})
        status = pytest.main(_pytest_args(root, _plugins()) + tests, plugins=[tracer])
        modules = sorted(name for name, m in sys.modules.items()
                         if "." not in name and not name.startswith("_") and name != package
                         and not os.path.realpath(getattr(m, "__file__", None) or "/").startswith(f"{root}/"))
        result.write_text(json.dumps({"status": int(status), "tests": tracer.tests, "modules": modules,
                                      "at_import": tracer.at_import}))
        return 0
    pid = _fork(root, scratch / "baseline.log", body)
    try:
        os.waitpid(pid, 0)
    except KeyboardInterrupt:
        os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    if not result.exists():
        log = (scratch / "baseline.log").read_text()
        sys.exit(f"mutate: the baseline run failed; see its log:\n{log[-3000:]}")
    return json.loads(result.read_text())


def _preload(modules: list[str]) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except BaseException:  # a module that only imports in its test context is simply not preloaded
            pass


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # killed, survived, timeout, error, uncovered
    seconds: float
    detail: str = ""


class _Pool:
    """Forked children, each running one mutant's tests in its own process group."""

    def __init__(self, root: Path, package: str, scratch: Path) -> None:
        self.root, self.package, self.scratch = root, package, scratch
        self.plugins = _plugins()
        self.sources: dict[str, str] = {}
        self.running: dict[int, tuple[Mutant, float, float, Path]] = {}  # pid: mutant, start, limit, log
        self.started = 0

    def start(self, mutant: Mutant, tests: list[str], limit: float) -> Outcome | None:
        """Starts the mutant's child, or returns its outcome when the mutant does not compile."""
        path = self.root / mutant.path
        source = self.sources.setdefault(mutant.path, path.read_text())
        try:
            code = compile(mutated_tree(source, mutant), str(path), "exec")
        except (SyntaxError, ValueError) as error:
            return Outcome(mutant, "error", 0.0, str(error))
        importer = _MutantImporter(module_name(path, self.root, self.package), path, code)

        def body():
            sys.meta_path.insert(0, importer)
            return pytest.main(_pytest_args(self.root, self.plugins) + ["-x"] + tests)
        self.started += 1
        log = self.scratch / f"mutant-{self.started}.log"
        pid = _fork(self.root, log, body)
        try:
            os.setpgid(pid, pid)  # also here, so that a kill cannot race the child's own call
        except OSError:
            pass
        self.running[pid] = (mutant, time.monotonic(), limit, log)
        return None

    def reap(self) -> Outcome | None:
        """The outcome of a child that ended, if any; kills those past their time limit."""
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            now = time.monotonic()
            for child, (mutant, start, limit, log) in self.running.items():
                if now - start > limit > 0:
                    self._kill(child)
                    self.running[child] = (mutant, start, -1.0, log)  # -1: timed out
            time.sleep(0.05)
            return None
        mutant, start, limit, log = self.running.pop(pid)
        code = os.waitstatus_to_exitcode(status)
        output = log.read_text(errors="replace")
        log.unlink(missing_ok=True)
        if limit < 0:
            kind = "timeout"
        elif code in (1, 2) or code == 4 and "ERROR collecting" in output:
            kind = "killed"  # 4: a test file that no longer imports (pytest: "not found")
        else:
            kind = "survived" if code == 0 else "error"
        return Outcome(mutant, kind, time.monotonic() - start, output[-2000:] if kind == "error" else "")

    @staticmethod
    def _kill(child: int) -> None:
        try:
            os.killpg(child, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def stop(self) -> None:
        for child in self.running:
            self._kill(child)
            os.waitpid(child, 0)
        self.running.clear()


def run_mutants(root: Path, package: str, jobs: list[tuple[Mutant, list[str], float]], parallel: int,
                scratch: Path, report) -> None:
    """Runs the jobs, `parallel` at a time, calling report(outcome) as each ends."""
    pool, pending = _Pool(root, package, scratch), list(jobs)
    try:
        while pending or pool.running:
            while pending and len(pool.running) < parallel:
                if outcome := pool.start(*pending.pop(0)):
                    report(outcome)
            if outcome := pool.reap():
                report(outcome)
    finally:  # interrupted too: no child may outlive the run
        pool.stop()

# ---------------------------------------------------------------- choosing tests, reporting


class _Coverage:
    """Which passing tests ran which lines, and the order in which to try them on a mutant."""

    def __init__(self, tests: dict[str, dict], at_import: list) -> None:
        self.at_import = {(file, line) for file, line in at_import}
        self.seconds = {name: test["seconds"] for name, test in tests.items()}
        self.lines: dict[str, dict[str, set[int]]] = {}  # test: file: lines it ran
        self.runs: dict[tuple[str, int], int] = {}  # (file, line): how many tests ran it
        for name, test in tests.items():
            self.lines[name] = {}
            for file, line in test["lines"]:
                self.lines[name].setdefault(file, set()).add(line)
                self.runs[(file, line)] = self.runs.get((file, line), 0) + 1
        self._rarity: dict[tuple, float] = {}

    def tests_for(self, mutant: Mutant, path: Path, most: int) -> list[str]:
        """The tests that ran the mutated line (any line of the module, for code that runs at
        import: module-level code, and lines that ran while the tests were collected, such as a
        decorator's body).
        Those in a file named after the module or its package come first (tests/test_dag*.py
        for dag.py, tests/test_checks*.py for checks/*.py), all of them; then, at most `most`
        (0: all) others, those that ran the rarest lines of the enclosing function first (they
        take the branches few tests take, so they are likelier to notice a changed condition),
        then the fastest."""
        file = str(path)
        at_import = mutant.module_level or (file, mutant.line) in self.at_import
        tests = [name for name, files in self.lines.items()
                 if (files.get(file) if at_import else mutant.line in files.get(file, ()))]

        tests.sort(key=lambda name: (-self.rarity(name, file, mutant.scope), self.seconds[name]))
        prefixes = (f"test_{path.stem}", f"test_{path.parent.name}")  # dag.py; or checks/*.py
        named = [name for name in tests if Path(name.split("::")[0]).name.startswith(prefixes)]
        others = [name for name in tests if name not in named]
        return named + (others[:most] if most else others)

    def rarity(self, name: str, file: str, scope: tuple[int, int]) -> float:
        key = (name, file, scope)
        if key not in self._rarity:
            self._rarity[key] = sum(1 / self.runs[(file, line)] for line in self.lines[name].get(file, ())
                                    if scope[0] <= line <= scope[1])
        return self._rarity[key]


def _package(root: Path) -> str:
    """The import name of a repository whose root is the package: pyproject's `[project] name`
    (pipec maps its root in setup.py), else the folder's name."""
    pyproject = root / "pyproject.toml"
    config = tomllib.loads(pyproject.read_text()) if pyproject.exists() else {}
    return config.get("project", {}).get("name", root.name).replace("-", "_")


def _targets(paths: list[str], root: Path) -> list[Path]:
    found = []
    for p in paths:
        path = (root / p).resolve()
        found += sorted(path.glob("*.py")) if path.is_dir() else [path]
    return found


STATUSES = ("killed", "timeout", "survived", "uncovered", "error")


def summarize(outcomes: list[Outcome], root: Path, targets: list[Path]) -> dict:
    """Per module: counts by status, the score (detected over judged), survivors and errors."""
    modules = {}
    for target in targets:
        rel = str(target.relative_to(root))
        mine = [o for o in outcomes if o.mutant.path == rel]
        count = {status: sum(o.status == status for o in mine) for status in STATUSES}
        judged = len(mine) - count["error"]
        detected = count["killed"] + count["timeout"]
        modules[rel] = {"total": len(mine), **count,
                        "score": round(100 * detected / judged, 1) if judged else None,
                        "survivors": [dict(asdict(o.mutant), status=o.status) for o in mine
                                      if o.status in ("survived", "uncovered")],
                        "errors": [{"mutant": o.mutant.label(), "log": o.detail}
                                   for o in mine if o.status == "error"]}
    return modules


def table(modules: dict) -> str:
    rows = [f"{'module':44} {'total':>5} " + " ".join(f"{s:>9}" for s in STATUSES) + "  score"]
    for rel, m in modules.items():
        score = f"{m['score']:.1f}%" if m["score"] is not None else "-"
        rows.append(f"{rel:44} {m['total']:5} " + " ".join(f"{m[s]:9}" for s in STATUSES) + f" {score:>6}")
    rows.append("")
    for m in modules.values():
        for s in m["survivors"]:
            note = "  [no test runs this line]" if s["status"] == "uncovered" else ""
            rows.append(f"{s['path']}:{s['line']}: {s['original']} -> {s['mutated']}{note}")
        rows += [f"ERROR {e['mutant']}" for e in m["errors"]]
    return "\n".join(rows)


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="+", help="modules (or folders of modules) to mutate")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--tests", default="tests",
                        help="pytest arguments for the baseline run, in one string (default: tests)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the package's root folder")
    parser.add_argument("--package", help="its import name (default: pyproject's project name)")
    parser.add_argument("--timeout-factor", type=float, default=3.0)
    parser.add_argument("--timeout-floor", type=float, default=30.0,
                        help="seconds added for a child's start")
    parser.add_argument("--max-tests", type=int, default=0,
                        help="run at most this many tests per mutant besides those of "
                             "tests/test_<module>*.py (0: all); scores become lower bounds")
    parser.add_argument("--list", action="store_true", help="list the mutants; run nothing")
    return parser.parse_args(argv)


def _plan(base: dict, mutants: list[Mutant], root: Path, args) -> tuple[list, list[Outcome]]:
    """The jobs (mutant, tests, time limit) to run, and the outcomes of mutants no test runs."""
    passing = {n: t for n, t in base["tests"].items() if t.get("passed") and "lines" in t}
    failing = sorted(n for n, t in base["tests"].items() if not t.get("passed"))
    if failing:
        print(f"mutate: left out {len(failing)} test(s) failing without mutants: {', '.join(failing[:5])}",
              file=sys.stderr)
    coverage = _Coverage(passing, base.get("at_import", []))
    jobs, uncovered = [], []
    for m in mutants:
        tests = coverage.tests_for(m, root / m.path, args.max_tests)
        if tests:
            limit = args.timeout_factor * sum(passing[n]["seconds"] for n in tests) + args.timeout_floor
            jobs.append((m, tests, limit))
        else:
            uncovered.append(Outcome(m, "uncovered", 0.0))
    return jobs, uncovered


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    root = args.root.resolve()
    package = args.package or _package(root)
    targets = _targets(args.targets, root)
    mutants = [m for t in targets for m in generate(t.read_text(), str(t.relative_to(root)))]
    if args.list:
        print("\n".join(f"{m.label()}  [{m.kind}]" for m in mutants))
        return 0
    started = time.monotonic()
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop as on Ctrl-C, reporting what ran
    interrupted = False
    with tempfile.TemporaryDirectory(prefix="mutate-") as scratch:
        base = baseline(root, package, targets, shlex.split(args.tests), Path(scratch))
        baseline_seconds = time.monotonic() - started
        jobs, outcomes = _plan(base, mutants, root, args)
        _preload(base["modules"])

        def progress(outcome: Outcome) -> None:
            print(f"[{len(outcomes) + 1}/{len(mutants)}] {outcome.status:8} {outcome.seconds:5.1f} s "
                  f"{outcome.mutant.label()}", file=sys.stderr, flush=True)
            outcomes.append(outcome)
        try:
            run_mutants(root, package, jobs, max(1, args.jobs), Path(scratch), progress)
        except KeyboardInterrupt:
            interrupted = True
            print(f"mutate: interrupted; the results cover {len(outcomes)} of {len(mutants)} mutants",
                  file=sys.stderr)
    outcomes.sort(key=lambda o: (o.mutant.path, o.mutant.line, o.mutant.node, o.mutant.choice))
    modules = summarize(outcomes, root, targets)
    print(table(modules))
    elapsed = time.monotonic() - started
    print(f"\n{len(outcomes)} of {len(mutants)} mutants in {elapsed:.0f} s "
          f"(baseline {baseline_seconds:.0f} s, {args.jobs} jobs)")
    if args.json:
        result = {"seconds": round(elapsed, 1), "baseline_seconds": round(baseline_seconds, 1),
                  "interrupted": interrupted, "modules": modules}
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
