"""The resolver's bookkeeping around the passes: `-D` definitions no constant used (PC103),
the `step` and `init` blocks (one of each, PC104), and the checked model's `Program` with
the buffers its nodes use (two of one name are PC104: the plan names buffers by name)."""

from __future__ import annotations

from ...dsl import SourceFile, ast
from ..codes import PC103, PC104
from ..diagnostics import Label
from ..model import Buffer, GraphBody, Options, Program, Waiver
from .declare import Declarer
from .scope import BufferSymbol, ConstSymbol, KernelSymbol, LoadedModule
from .spelling import did_you_mean
from .unroll import Unroller


def report_unused_defines(d: Declarer, main: LoadedModule) -> None:
    for name, (_, span) in d.defines.items():
        if name in d.used_defines:
            continue
        imported = main.scope.get(name)
        if isinstance(imported, ConstSymbol):
            hint = (f"`{name}` is `{imported.span.source.path.name}`'s: declare it in this file "
                    f"and bind it in the import, `with ({name} = {name})`")
        else:
            hint = did_you_mean(name, main.names_of(ConstSymbol), "constants").hint
        d.ctx.sink.add(PC103, f"`-D {name}` defines no constant of this file", span, hint)


def root_blocks(d: Declarer, main: LoadedModule) -> dict[str, ast.Block]:
    """The first `step` and the first `init`, in file order: the ones unrolled; a second of
    either is PC104."""
    roots: dict[str, ast.Block] = {}
    for decl in main.tree.decls:
        if not isinstance(decl, (ast.StepDecl, ast.InitDecl)):
            continue
        name = "step" if isinstance(decl, ast.StepDecl) else "init"
        if name in roots:
            d.ctx.sink.add(PC104, f"a second `{name}` block", decl.span,
                           f"a pipeline has one `{name}`; merge the two blocks")
        else:
            roots[name] = decl.body
    return roots


def program(source: SourceFile, d: Declarer, u: Unroller, main: LoadedModule, options: Options,
            waivers: list[Waiver], step: GraphBody | None, init: GraphBody | None) -> Program:
    scope = main.scope
    buffers = {n: s.buffer for n, s in scope.items() if isinstance(s, BufferSymbol)}
    _add_used_buffers(d, buffers, [body for body in (init, step) if body is not None])
    return Program(
        path=source.path,
        sources=list({m.path: m.source for m in d.modules.values()}.values())
        + list(d.kernel_sources.files.values()),
        consts={n: s.value for n, s in scope.items() if isinstance(s, ConstSymbol)},
        buffers={**buffers, **u.control_buffers, **u.workspaces},
        kernels={n: s.kernel for n, s in scope.items() if isinstance(s, KernelSymbol)},
        step=step, init=init, options=options, waivers=waivers,
        dropped_statements=u.dropped_statements,
        names_in_skipped_branches=frozenset(u.names_in_skipped_branches), live=d.ctx.live,
        names_in_scope=_names_in_scope([main, *d.modules.values()]),
    )


def _names_in_scope(modules: list[LoadedModule]) -> dict:
    """The names each file's scope binds (a file loaded with several sets of values binds the
    same names in each)."""
    names: dict = {}
    for module in modules:
        names[module.path] = names.get(module.path, frozenset()) | frozenset(module.scope)
    return names


def _add_used_buffers(d: Declarer, buffers: dict[str, Buffer], bodies: list[GraphBody]) -> None:
    """The buffers of imported files that the nodes use (a graph imported from a file uses
    that file's buffers). The plan names buffers by their declared names, so two buffers of
    one name (two instances of one file, loaded with other values) are PC104."""
    owners = {id(s.buffer): m for m in d.modules.values() for s in m.scope.values()
              if isinstance(s, BufferSymbol) and s.span.source is m.source}  # the declaring instance
    clashes: set[str] = set()
    for body in bodies:
        for node in body.walk():
            for access in node.accesses:
                buffer = access.buffer
                if id(buffer) not in owners:  # a workspace or control buffer pipec made
                    continue
                first = buffers.setdefault(buffer.name, buffer)
                if first is not buffer and buffer.name not in clashes:
                    clashes.add(buffer.name)
                    _buffer_name_clash(d, first, buffer, owners)


def _buffer_name_clash(d: Declarer, first: Buffer, second: Buffer, owners: dict[int, LoadedModule]) -> None:
    first_module, second_module = owners[id(first)], owners[id(second)]
    path = second.span.source.path.name
    if first_module.path == second_module.path:
        differing = sorted(name for name in first_module.bindings.keys() | second_module.bindings.keys()
                           if _value(first_module, name) != _value(second_module, name))
        values = ", ".join(f"`{name}` {_value(first_module, name)!r} and "
                           f"{_value(second_module, name)!r}" for name in differing)
        what = f"from two instances of `{path}` loaded with other values ({values})"
    else:
        what = f"in `{first.span.source.path.name}` and in `{path}`"
    d.ctx.sink.add(PC104, f"two buffers named `{second.name}` {what}", second.span,
                   "the plan names buffers by their names: import the file once with one set of "
                   "values, or rename one buffer", labels=(Label(first.span, "the other buffer"),))


def _value(module: LoadedModule, name: str) -> object:
    symbol = module.scope[name]
    return symbol.value if isinstance(symbol, ConstSymbol) else None
