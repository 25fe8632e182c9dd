"""The compiler as a pipeline of stages, each a function from one representation to the next:

    source text --parse--> syntax tree --resolve--> checked model
                --check--> checked model with DAGs --plan--> plan (runtime: built graph)

`compile_file` calls them in that order (`_compile`). Stages report into one sink; the
compile stops before planning when errors remain after suppressions and the rule selection,
or when any unsuppressible error was found at all: suppressions and the selection change
what is reported, never what is built. Many steps per launch (`CompileOptions.steps_per_launch`)
are made on either side of the middle stages: the step's body copied in the syntax tree before
resolving (`unroll`), or the planned step wrapped in a device-side loop
(compiler/steps_per_launch.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..dsl import PipeSyntaxError, SourceFile, ast, parse
from ..dsl.source import real_path
from . import codes
from .checks import CheckContext, run_checks
from .config import Settings
from .dag import Dag, build_dag
from .dag import _without_cycle_collection as without_cycle_collection
from .diagnostics import Diagnostic, DiagnosticSink
from .fixes import syntax_fixes
from .lower import build_plan
from .model import Program, child_bodies
from .programmatic_edges import UnitHazards
from .resolve import resolve
from .steps_per_launch import per_launch, unroll_step
from .suppressions import apply_suppressions, find_suppressions
from .toolchain import get_toolchain
from ..plan.schema import Plan

Until = Literal["parse", "check", "plan"]


@dataclass
class CheckedProgram:
    program: Program
    dags: list[Dag]
    unit_hazards: UnitHazards  # found by the checks (PC323), for the programmatic edges
    # every statement became nodes and every launch touches what its kernel does (the checks'
    # `accesses_known`): the findings are all there were to make
    complete: bool = True


@dataclass
class Compilation:
    """Everything one run of the pipeline produced, whatever stage it reached."""

    path: Path
    settings: Settings
    sink: DiagnosticSink = field(default_factory=DiagnosticSink)
    sources: list[SourceFile] = field(default_factory=list)
    tree: ast.Module | None = None
    checked: CheckedProgram | None = None
    plan: Plan | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def program(self) -> Program | None:
        return self.checked.program if self.checked else None

    @property
    def has_errors(self) -> bool:
        return any(d.severity is codes.Severity.ERROR for d in self.diagnostics)


def parse_source(source: SourceFile, c: Compilation) -> ast.Module | None:
    c.sources.append(source)
    try:
        return parse(source)
    except PipeSyntaxError as error:
        c.sink.add(codes.BY_CODE[error.code], error.message, error.span,
                   error.hint or "see docs/language.md for the syntax", fixes=syntax_fixes(error))
        return None


def resolve_program(tree: ast.Module, c: Compilation) -> Program:
    options = c.settings.compile
    program = resolve(c.sources[0], tree, options, c.sink, get_toolchain(options.compiler))
    c.sources[:] = program.sources
    return program


def check_program(program: Program, c: Compilation) -> CheckedProgram:
    dags = [build_dag(body) for body in _all_bodies(program)]
    context = CheckContext(program, dags, c.sink, c.settings.compile.arch)
    run_checks(context)
    return CheckedProgram(program, dags, context.unit_hazards, context.accesses_known)


def plan_program(checked: CheckedProgram, c: Compilation) -> Plan:
    options = c.settings.compile
    return build_plan(checked.program, checked.dags, checked.unit_hazards, options.arch, options.compiler,
                      tuple(str(d) for d in options.include_dirs))


def _all_bodies(program: Program):
    for body in program.bodies():
        stack = [body]
        while stack:
            current = stack.pop()
            yield current
            stack.extend(child for item in current.items for child in child_bodies(item))


def compile_file(path: Path, settings: Settings, *, until: Until = "plan",
                 text: str | bytes | None = None) -> Compilation:
    """Run the stages on one file, up to and including `until`; `text`, when given, stands for
    the file's content (`pipec -` reads it from stdin: bytes, decoded as a file's are). Raises
    OSError when the file cannot be read, ToolchainUnavailable when kernels cannot be compiled
    at all, and StepsPerLaunchRefused when the program cannot run the steps per launch its
    options ask for."""
    c = Compilation(path, settings)
    if text is None:
        source = SourceFile.read(real_path(path))
    elif isinstance(text, bytes):
        source = SourceFile.from_bytes(real_path(path), text)
    else:
        source = SourceFile(real_path(path), text)
    # Every stage, not only the DAG, builds millions of objects for a large program and frees
    # few: the cycle collector would rescan them (40% of a 100,000-node check) to find little.
    with without_cycle_collection():
        _compile(c, source, until)
    return c


def _compile(c: Compilation, source: SourceFile, until: Until) -> None:
    options = c.settings.compile
    c.tree = parse_source(source, c)
    if c.tree is not None and until != "parse":
        tree = unroll_step(c.tree, options.steps_per_launch) if options.unroll else c.tree
        c.checked = check_program(resolve_program(tree, c), c)
        if until == "plan":
            _finish_diagnostics(c)  # what is reported decides whether a plan is made
            if not (c.has_errors or _unsuppressible_errors(c)):
                c.plan = per_launch(plan_program(c.checked, c), options, c.path)
    _finish_diagnostics(c)
    if until == "plan" and c.plan is None:
        # the errors that stop the plan are reported even when the selection hid them
        hidden = [d for d in _unsuppressible_errors(c) if d not in c.diagnostics]
        c.diagnostics = sorted(c.diagnostics + hidden, key=Diagnostic.sort_key)


def _unsuppressible_errors(c: Compilation) -> list[Diagnostic]:
    """The errors found before suppressions and selection that leave no meaningful plan."""
    return [d for d in c.sink.diagnostics
            if d.severity is codes.Severity.ERROR and not codes.BY_CODE[d.code].suppressible]


def _finish_diagnostics(c: Compilation) -> None:
    """Suppressions first, then the rule selection; PC001/PC002 findings join the rest."""
    meta = DiagnosticSink()
    suppressions = [s for source in c.sources if source.path.suffix == ".pipe"
                    for s in find_suppressions(source, meta)]
    complete = c.checked is not None and c.checked.complete
    kept = apply_suppressions(c.sink.sorted(), suppressions, meta, complete=complete)
    selected = codes.select(list(c.settings.select)) - codes.select(list(c.settings.ignore))
    c.diagnostics = sorted((d for d in kept + meta.diagnostics if d.code in selected),
                           key=Diagnostic.sort_key)
