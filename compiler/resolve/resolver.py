"""Syntax tree to checked model: imports, names, constants, buffers, kernel signatures, and the
unrolling of graphs, loops and compile-time `if`s into concrete nodes.

Problems that leave no meaningful model (an undefined name, a bad constant, a branch on
device data) are reported here; everything the model can represent, even when wrong (an
argument of the wrong kind, a `null` pointer, a baked value), is left to the checks.
"""

from __future__ import annotations

from ...dsl import SourceFile, Span, ast
from ...dsl.source import real_path
from ..diagnostics import Label
from ..model import Buffer, GraphBody, Program
from .scope import LoadedModule
from .unroll import Unrolling
from .waivers import Waivers


class Resolver(Waivers, Unrolling):
    """The passes over one shared scope: declarations (with kernel imports), waivers, then
    sizing and unrolling."""

    def resolve(self, source: SourceFile, tree: ast.Module) -> Program:
        path = real_path(source.path)
        main = LoadedModule(path, source, tree)
        self.allowed_dirs = self._allowed_dirs(path)
        self.defines = self._parse_defines()
        self._populate(main)
        for name, (_, span) in self.defines.items():
            if name not in self.used_defines:
                imported = main.scope.get(name)
                if imported is not None and imported.kind == "const":
                    hint = (f"`{name}` is `{imported.span.source.path.name}`'s: declare it in this file "
                            f"and bind it in the import, `with ({name} = {name})`")
                else:
                    hint = self._suggest(name, [n for n, s in main.scope.items() if s.kind == "const"],
                                         "constants")
                self.sink.add("PC103", f"`-D {name}` defines no constant of this file", span, hint)
        options = self._options(main)
        self.gemm_workspace = options.gemm_workspace
        waivers = self._waivers(main)
        roots: dict[type, ast.Block] = {}  # the first step and init: the ones unrolled
        for decl in main.tree.decls:
            if isinstance(decl, (ast.StepDecl, ast.InitDecl)):
                roots.setdefault(type(decl), decl.body)
        self._measure(main, list(roots.values()))
        step = init = None
        for decl in main.tree.decls:
            if isinstance(decl, ast.StepDecl):
                if step is not None:
                    self._duplicate_block("step", decl.span)
                else:
                    step = self._instantiate_root("step", decl.body, main)
            elif isinstance(decl, ast.InitDecl):
                if init is not None:
                    self._duplicate_block("init", decl.span)
                else:
                    init = self._instantiate_root("init", decl.body, main)
        scope = main.scope
        buffers: dict[str, Buffer] = {n: s.value for n, s in scope.items() if isinstance(s.value, Buffer)}
        self._add_used_buffers(buffers, [body for body in (init, step) if body is not None])
        return Program(
            path=source.path,
            sources=list({m.path: m.source for m in self.modules.values()}.values())
            + list(self.kernel_files.values()),
            consts={n: s.value for n, s in scope.items() if s.kind == "const"},
            buffers={**buffers, **self.control_buffers, **self.workspaces},
            kernels={n: s.value for n, s in scope.items() if s.kind == "kernel"},
            step=step, init=init, options=options, waivers=waivers,
            dropped_statements=self.dropped_statements,
            names_in_skipped_branches=frozenset(self.names_in_skipped_branches),
        )

    def _add_used_buffers(self, buffers: dict[str, Buffer], bodies: list[GraphBody]) -> None:
        """The buffers of imported files that the nodes use (a graph imported from a file uses
        that file's buffers). The plan names buffers by their declared names, so two buffers of
        one name (two instances of one file, loaded with other values) are PC104."""
        owners = {id(s.value): m for m in self.modules.values() for s in m.scope.values()
                  if s.kind == "buffer" and s.span.source is m.source}  # the declaring instance
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
                        self._buffer_name_clash(first, buffer, owners)

    def _buffer_name_clash(self, first: Buffer, second: Buffer, owners: dict[int, LoadedModule]) -> None:
        first_module, second_module = owners[id(first)], owners[id(second)]
        path = second.span.source.path.name
        if first_module.path == second_module.path:
            differing = sorted(name for name in first_module.bindings.keys() | second_module.bindings.keys()
                               if first_module.scope[name].value != second_module.scope[name].value)
            values = ", ".join(f"`{name}` {first_module.scope[name].value!r} and "
                               f"{second_module.scope[name].value!r}" for name in differing)
            what = f"from two instances of `{path}` loaded with other values ({values})"
        else:
            what = f"in `{first.span.source.path.name}` and in `{path}`"
        self.sink.add("PC104", f"two buffers named `{second.name}` {what}", second.span,
                      "the plan names buffers by their names: import the file once with one set of "
                      "values, or rename one buffer", labels=(Label(first.span, "the other buffer"),))

    def _duplicate_block(self, name: str, span: Span) -> None:
        self.sink.add("PC104", f"a second `{name}` block", span,
                      f"a pipeline has one `{name}`; merge the two blocks")
