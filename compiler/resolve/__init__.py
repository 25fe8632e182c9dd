"""Syntax tree to checked model, as passes over explicit state: the declaration pass
(imports, constants, buffers, kernel signatures: declare.py), waivers, the size pass, and the
unrolling of graphs, loops and compile-time `if`s into concrete nodes (unroll.py, with the
statement handlers of statements.py). Every pass holds the one `Context` (context.py).

Problems that leave no meaningful model (an undefined name, a bad constant, a branch on
device data) are reported here; everything the model can represent, even when wrong (an
argument of the wrong kind, a `null` pointer, a baked value), is left to compiler/checks/.
"""

from __future__ import annotations

from ...dsl import SourceFile, ast
from ...dsl.source import real_path
from ..config import CompileOptions
from ..diagnostics import DiagnosticSink
from ..model import Program
from .assemble import program, report_unused_defines, root_blocks
from .context import Context
from .declare import Declarer
from .options import program_options
from .scope import LoadedModule
from .size import Sizer
from .statements import STATEMENTS
from .unroll import Unroller
from .waivers import program_waivers


def resolve(source: SourceFile, tree: ast.Module, options: CompileOptions, sink: DiagnosticSink,
            toolchain) -> Program:
    ctx = Context(options, sink, toolchain)
    main = LoadedModule(real_path(source.path), source, tree)
    declarer = Declarer(ctx, main.path)
    declarer.populate(main)
    declarer.mark_shared_imports()
    report_unused_defines(declarer, main)
    program_opts = program_options(ctx, main)
    kernels = list(declarer.kernel_sources.kernels.values())
    waivers = program_waivers(ctx, declarer.files, kernels, main)
    roots = root_blocks(declarer, main)
    fits = Sizer(ctx).measure(main, list(roots.values()))
    unroller = Unroller(ctx, STATEMENTS, declarer.launcher, program_opts.gemm_workspace)
    bodies = {name: unroller.root(name, block, main, fits=fits) for name, block in roots.items()}
    step, init = bodies.get("step"), bodies.get("init")
    return program(source, declarer, unroller, main, program_opts, waivers, step, init)


__all__ = ["resolve"]
