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
import ast
import copy
import importlib
import importlib.abc
import importlib.util
import json
import os
import shlex
import signal
import sys
import tempfile
import time
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# ---------------------------------------------------------------- generating mutants

_COMPARE = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
            ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}
_ARITHMETIC = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult,
               ast.Div: ast.Mult, ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult, ast.BitAnd: ast.BitOr,
               ast.BitOr: ast.BitAnd, ast.BitXor: ast.BitOr, ast.LShift: ast.RShift, ast.RShift: ast.LShift}
_BOOLEAN = {ast.And: ast.Or, ast.Or: ast.And}
# Subtrees that cannot change behaviour (annotations), only build messages (f-strings), or only
# run at type-checking time are not mutated.
# Deleting these is either meaningless or covered by another operator.
_KEPT_STATEMENTS = (ast.Pass, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Global, ast.Nonlocal,
                    ast.Import, ast.ImportFrom, ast.Break, ast.Continue)
_SKIPPED_FIELDS = {"annotation", "returns", "decorator_list", "type_comment"}


@dataclass(frozen=True)
class Mutant:
    path: str  # relative to the root
    line: int
    node: int  # position of the mutated node in `_walk` order
    choice: int  # which of that node's replacements
    kind: str
    original: str
    mutated: str
    module_level: bool  # runs at import time, so any test of the module may see it

    def label(self) -> str:
        return f"{self.path}:{self.line}: {self.original} -> {self.mutated}"


def _snippet(node: ast.AST | None) -> str:
    if node is None:
        return "(deleted)"
    lines = ast.unparse(node).splitlines() or [""]
    text = lines[0] + (" ..." if len(lines) > 1 else "")
    return text if len(text) <= 70 else text[:67] + "..."


def _is_docstring(node: ast.AST, parent: ast.AST, field: str, index: int | None) -> bool:
    return (index == 0 and field == "body" and isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            and isinstance(parent, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)))


def _skipped_block(node: ast.AST) -> bool:
    """`if TYPE_CHECKING:`, `if __name__ == "__main__":` and `__all__ = ...` are not behaviour."""
    if isinstance(node, ast.If):
        test = ast.unparse(node.test)
        return test in ("TYPE_CHECKING", "typing.TYPE_CHECKING") or test.startswith("__name__ ==")
    if isinstance(node, (ast.Assign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets)
    return False


def _walk(tree: ast.Module):
    """(node, parent, field, index, in_function) for every mutable node, in a fixed order."""
    def visit(node, in_function):
        for field, value in ast.iter_fields(node):
            if field in _SKIPPED_FIELDS:
                continue
            children = value if isinstance(value, list) else [value]
            for index, child in enumerate(children):
                if not isinstance(child, ast.AST) or _skipped_block(child) or isinstance(child, ast.JoinedStr):
                    continue
                if _is_docstring(child, node, field, index):
                    continue
                yield child, node, field, index if isinstance(value, list) else None, in_function
                inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                yield from visit(child, inner)
    yield from visit(tree, False)


def _with_op(node: ast.AST, op: type) -> ast.AST:
    new = copy.deepcopy(node)
    new.op = op()
    return new


def _plus(expr: ast.expr, delta: int) -> ast.expr:
    return ast.BinOp(copy.deepcopy(expr), ast.Add() if delta > 0 else ast.Sub(), ast.Constant(1))


def _replacements(node: ast.AST, in_function: bool) -> list[tuple[str, ast.AST | None]]:
    """The mutants of one node, as (operator name, replacement); None deletes a statement."""
    out: list[tuple[str, ast.AST | None]] = []
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in _COMPARE:
                new = copy.deepcopy(node)
                new.ops[i] = _COMPARE[type(op)]()
                out.append(("compare", new))
    elif isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in _ARITHMETIC:
        out.append(("arithmetic", _with_op(node, _ARITHMETIC[type(node.op)])))
    elif isinstance(node, ast.BoolOp):
        out.append(("boolean", _with_op(node, _BOOLEAN[type(node.op)])))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub, ast.Invert)):
        out.append(("unary", copy.deepcopy(node.operand)))
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
        out.append(("constant", ast.Constant(not node.value)))
    elif isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        out.append(("constant", ast.Constant(node.value + 1)))
        if node.value == 1:
            out.append(("constant", ast.Constant(type(node.value)(0))))
    elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        for bound in ("lower", "upper"):
            if getattr(node.slice, bound) is not None:
                for delta in (1, -1):
                    new = copy.deepcopy(node)
                    setattr(new.slice, bound, _plus(getattr(node.slice, bound), delta))
                    out.append(("slice", new))
    elif isinstance(node, ast.Break):
        out.append(("loop", ast.Continue()))
    elif isinstance(node, ast.Continue):
        out.append(("loop", ast.Break()))
    if isinstance(node, ast.Return) and node.value is not None:
        if ast.unparse(node.value) != "None":
            out.append(("return", ast.Return(ast.Constant(None))))
    elif in_function and isinstance(node, ast.stmt) and not isinstance(node, _KEPT_STATEMENTS):
        out.append(("delete", None))
    return out


def generate(source: str, path: str) -> list[Mutant]:
    tree = ast.parse(source)
    mutants = []
    for number, (node, _, _, _, in_function) in enumerate(_walk(tree)):
        for choice, (kind, new) in enumerate(_replacements(node, in_function)):
            mutants.append(Mutant(path, node.lineno, number, choice, kind, _snippet(node), _snippet(new),
                                  not in_function))
    return mutants


def mutated_tree(source: str, mutant: Mutant) -> ast.Module:
    """The module with `mutant` applied (a statement deletion becomes `pass`)."""
    tree = ast.parse(source)
    for number, (node, parent, field, index, in_function) in enumerate(_walk(tree)):
        if number == mutant.node:
            _, new = _replacements(node, in_function)[mutant.choice]
            new = ast.copy_location(new or ast.Pass(), node)
            if index is None:
                setattr(parent, field, new)
            else:
                getattr(parent, field)[index] = new
            return ast.fix_missing_locations(tree)
    raise ValueError(f"{mutant.label()}: no such node")

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

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self.lines, start = set(), time.perf_counter()
        sys.settrace(self._call)
        try:
            yield
        finally:
            sys.settrace(None)
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
        result.write_text(json.dumps({"status": int(status), "tests": tracer.tests, "modules": modules}))
        return 0
    pid = _fork(root, scratch / "baseline.log", body)
    os.waitpid(pid, 0)
    if not result.exists():
        sys.exit(f"mutate: the baseline run failed; see its log:\n{(scratch / 'baseline.log').read_text()[-3000:]}")
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


def run_mutants(root: Path, package: str, jobs: list[tuple[Mutant, list[str], float]], parallel: int,
                scratch: Path, progress) -> list[Outcome]:
    sources: dict[str, str] = {}
    plugins = _plugins()
    pending, running, outcomes, started = list(jobs), {}, [], 0
    while pending or running:
        while pending and len(running) < parallel:
            mutant, tests, limit = pending.pop(0)
            path = root / mutant.path
            source = sources.setdefault(mutant.path, path.read_text())
            try:
                code = compile(mutated_tree(source, mutant), str(path), "exec")
            except (SyntaxError, ValueError) as error:
                outcomes.append(Outcome(mutant, "error", 0.0, str(error)))
                continue
            importer = _MutantImporter(module_name(path, root, package), path, code)

            def body(importer=importer, tests=tests):
                sys.meta_path.insert(0, importer)
                return pytest.main(_pytest_args(root, plugins) + ["-x"] + tests)
            started += 1
            log = scratch / f"mutant-{started}.log"
            pid = _fork(root, log, body)
            try:
                os.setpgid(pid, pid)  # also here, so that a kill cannot race the child's own call
            except OSError:
                pass
            running[pid] = (mutant, time.monotonic(), limit, log)
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            now = time.monotonic()
            for child, (mutant, start, limit, _) in running.items():
                if now - start > limit > 0:
                    try:
                        os.killpg(child, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    running[child] = (mutant, start, -1.0, running[child][3])
            time.sleep(0.05)
            continue
        mutant, start, limit, log = running.pop(pid)
        code = os.waitstatus_to_exitcode(status)
        output = log.read_text(errors="replace")
        if limit < 0:
            kind = "timeout"
        elif code in (1, 2) or code == 4 and "ERROR collecting" in output:
            kind = "killed"  # 4: a test file that no longer imports (pytest: "not found")
        else:
            kind = "survived" if code == 0 else "error"
        detail = output[-2000:] if kind == "error" else ""
        log.unlink(missing_ok=True)
        outcomes.append(Outcome(mutant, kind, time.monotonic() - start, detail))
        progress(outcomes[-1])
    return outcomes

# ---------------------------------------------------------------- choosing tests, reporting


def _tests_for(mutant: Mutant, path: Path, covering: dict[tuple[str, int], list[str]],
               by_file: dict[str, list[str]], most: int) -> list[str]:
    """The tests that ran the mutated line (any line of the module, for import-time code): those
    in a file named after the module first (tests/test_dag*.py for dag.py), then the fastest."""
    tests = by_file.get(str(path), []) if mutant.module_level else covering.get((str(path), mutant.line), [])
    named = [t for t in tests if Path(t.split("::")[0]).name.startswith(f"test_{path.stem}")]
    tests = named + [t for t in tests if t not in named]
    return tests[:most] if most else tests


def _package(root: Path) -> str:
    config = tomllib.loads((root / "pyproject.toml").read_text()) if (root / "pyproject.toml").exists() else {}
    dirs = config.get("tool", {}).get("setuptools", {}).get("package-dir", {})
    return next((name for name, where in dirs.items() if where in (".", "")), root.name)


def _targets(paths: list[str], root: Path) -> list[Path]:
    found = []
    for p in paths:
        path = (root / p).resolve()
        found += sorted(path.glob("*.py")) if path.is_dir() else [path]
    return found


def summarize(outcomes: list[Outcome], root: Path, targets: list[Path]) -> dict:
    modules = {}
    for target in targets:
        rel = str(target.relative_to(root))
        mine = [o for o in outcomes if o.mutant.path == rel]
        count = {k: sum(o.status == k for o in mine) for k in ("killed", "timeout", "survived", "uncovered", "error")}
        judged = count["killed"] + count["timeout"] + count["survived"] + count["uncovered"]
        modules[rel] = {"total": len(mine), **count,
                        "score": round(100 * (count["killed"] + count["timeout"]) / judged, 1) if judged else None,
                        "survivors": [dict(asdict(o.mutant), status=o.status) for o in mine
                                      if o.status in ("survived", "uncovered")],
                        "errors": [{"mutant": o.mutant.label(), "log": o.detail} for o in mine if o.status == "error"]}
    return modules


def table(modules: dict) -> str:
    rows = [f"{'module':44} {'total':>5} {'killed':>6} {'timeout':>7} {'survived':>8} {'uncovered':>9} {'error':>5} {'score':>6}"]
    for rel, m in modules.items():
        score = f"{m['score']:.1f}%" if m["score"] is not None else "-"
        rows.append(f"{rel:44} {m['total']:5} {m['killed']:6} {m['timeout']:7} {m['survived']:8} "
                    f"{m['uncovered']:9} {m['error']:5} {score:>6}")
    rows.append("")
    for rel, m in modules.items():
        rows += [f"{s['path']}:{s['line']}: {s['original']} -> {s['mutated']}"
                 + ("  [no test runs this line]" if s["status"] == "uncovered" else "") for s in m["survivors"]]
        rows += [f"ERROR {e['mutant']}" for e in m["errors"]]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="+", help="modules (or folders of modules) to mutate")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--tests", default="tests",
                        help="pytest arguments for the baseline run, in one string (default: tests)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the package's root folder")
    parser.add_argument("--package", help="its import name (default: from pyproject's package-dir)")
    parser.add_argument("--timeout-factor", type=float, default=3.0)
    parser.add_argument("--timeout-floor", type=float, default=30.0, help="seconds added for a child's start")
    parser.add_argument("--max-tests", type=int, default=0,
                        help="run at most this many tests per mutant (0: all); scores become lower bounds")
    parser.add_argument("--list", action="store_true", help="list the mutants; run nothing")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    package = args.package or _package(root)
    targets = _targets(args.targets, root)
    mutants = [m for t in targets for m in generate(t.read_text(), str(t.relative_to(root)))]
    if args.list:
        print("\n".join(f"{m.label()}  [{m.kind}]" for m in mutants))
        return 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mutate-") as scratch:
        base = baseline(root, package, targets, shlex.split(args.tests), Path(scratch))
        passing = {n: t for n, t in base["tests"].items() if t.get("passed") and "lines" in t}
        failing = sorted(n for n, t in base["tests"].items() if not t.get("passed"))
        if failing:
            print(f"mutate: left out {len(failing)} test(s) failing without mutants: {', '.join(failing[:5])}",
                  file=sys.stderr)
        covering: dict[tuple[str, int], list[str]] = {}
        by_file: dict[str, list[str]] = {}
        for name in sorted(passing, key=lambda n: passing[n]["seconds"]):  # fast tests first, for -x
            for file in sorted({f for f, _ in passing[name]["lines"]}):
                by_file.setdefault(file, []).append(name)
            for file, line in passing[name]["lines"]:
                covering.setdefault((file, line), []).append(name)
        baseline_seconds = time.monotonic() - started
        _preload(base["modules"])
        jobs, outcomes = [], []
        for m in mutants:
            tests = _tests_for(m, root / m.path, covering, by_file, args.max_tests)
            if tests:
                limit = args.timeout_factor * sum(passing[n]["seconds"] for n in tests) + args.timeout_floor
                jobs.append((m, tests, limit))
            else:
                outcomes.append(Outcome(m, "uncovered", 0.0))
        done = [0]

        def progress(outcome):
            done[0] += 1
            print(f"[{done[0]}/{len(jobs)}] {outcome.status:8} {outcome.seconds:5.1f} s {outcome.mutant.label()}",
                  file=sys.stderr, flush=True)
        outcomes += run_mutants(root, package, jobs, max(1, args.jobs), Path(scratch), progress)
    outcomes.sort(key=lambda o: (o.mutant.path, o.mutant.line, o.mutant.node, o.mutant.choice))
    modules = summarize(outcomes, root, targets)
    print(table(modules))
    elapsed = time.monotonic() - started
    print(f"\n{len(mutants)} mutants in {elapsed:.0f} s (baseline {baseline_seconds:.0f} s, {args.jobs} jobs)")
    if args.json:
        args.json.write_text(json.dumps({"seconds": round(elapsed, 1), "baseline_seconds": round(baseline_seconds, 1),
                                         "modules": modules}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
