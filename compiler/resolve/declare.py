"""The declaration pass: loading imported `.pipe` modules, `-D` definitions, constants,
buffers and graphs, and the kernels of imported CUDA sources, into each module's scope."""

from __future__ import annotations

from pathlib import Path

from ...dsl import PipeSyntaxError, SourceFile, Span, ast, parse, parse_expression
from ...wording import with_article
from ..codes import BY_CODE, PC101, PC102, PC103, PC104, PC112, PC113
from ..consteval import literal
from ..diagnostics import Label, Use
from ..fixes import syntax_fixes
from ..kernel_analysis import include_closure
from .bindings import Bindings, check_bindings, evaluate_bindings, instance
from .buffers import declare_buffer
from .context import Context
from .files import SHIPPED_KERNELS as SHIPPED_KERNELS  # where tests and tools look for it
from .files import ProjectFiles
from .kernel_imports import KernelImporter
from ..live import LiveTerm
from .ranks import LAUNCHER_CONSTANTS, PER_RANK, builtin_span, launcher_constants, reads_rank
from .scope import (
    Abort, BufferSymbol, ConstSymbol, GraphSymbol, KernelSymbol, LoadedModule, Symbol, declared, lose_import,
    mark_invalid,
)
from .spelling import did_you_mean

# The words dsl/grammar.lark starts statements with: a graph of one of these names could never
# be called, as its call would read as that statement.
# files loaded, each counted once per distinct set of values it is imported with: imports that
# bind other values at every level multiply (24 files importing the next twice: 2**24)
MAX_INSTANCES = 1_000
STATEMENT_KEYWORDS = ("launch", "fill", "copy", "gemm", "for", "if", "parallel", "switch", "every",
                      "while", "repeat", "allreduce", "broadcast", "allgather", "reducescatter")


class Declarer:
    """Owns the modules loaded so far (one instance per set of bound values), the chain being
    loaded (for cycles), the `-D` definitions and which of them a constant used, the launcher's
    values, and the constants an importer's binding replaced."""

    def __init__(self, ctx: Context, main: Path) -> None:
        self.ctx = ctx
        self.files = ProjectFiles(ctx.options, ctx.sink, main)
        self.kernel_sources = KernelImporter(ctx)
        # by path and the values bound to the file's constants: one instance per set of values
        self.modules: dict[tuple[Path, tuple], LoadedModule] = {}
        self.loading: list[Path] = []
        self.too_many_instances = False  # reported once; every later load is refused
        self.defines = self._parse_defines()
        self.used_defines: set[str] = set()
        self.launcher = launcher_constants(ctx.sink, self.defines, self.used_defines)
        self.launcher_symbols = {name: ConstSymbol(value, builtin_span(name), per_rank=name in PER_RANK)
                                 for name, value in self.launcher.items()}
        self.bound_names: set[tuple[int, str]] = set()  # (id of module, constant) given a binding
        # for the live-update record: each file's bindings, and how many imports load each file
        self.bound_files: dict[Path, list[tuple[ast.Keyword, LiveTerm | None]]] = {}
        self.import_count: dict[Path, int] = {}

    def _parse_defines(self) -> dict[str, tuple[ast.Expr, Span]]:
        """`-D NAME=EXPR` values, parsed like constant expressions of the main file."""
        parsed = {}
        for name, text in self.ctx.options.defines:
            source = SourceFile(Path(f"<-D {name}>"), text)
            try:
                parsed[name] = (parse_expression(source, 0, len(text)), Span(source, 0, len(text)))
            except PipeSyntaxError as error:
                self.ctx.sink.add(PC101, f"`-D {name}={text}`: {error.message}", error.span,
                                  "a definition is a constant expression, e.g. `-D ENVS=1024`")
        return parsed

    def populate(self, module: LoadedModule) -> None:
        """Declare everything `module` declares and imports into its scope."""
        self.loading.append(module.path)
        module.scope.update(self.launcher_symbols)
        try:
            for decl in module.tree.decls:
                self._declare_top(module, decl)
        finally:
            self.loading.pop()
        self.modules[module.path, instance(module.bindings)] = module

    def is_bound(self, module: LoadedModule, name: str) -> bool:
        """Whether the importer gave `module`'s constant `name` its value."""
        return (id(module), name) in self.bound_names

    def declare(self, module: LoadedModule, name: ast.Ident, symbol: Symbol) -> None:
        existing = module.scope.get(name.text)
        if existing is not None and declared(existing) is not declared(symbol):
            self.ctx.sink.add(PC104, f"`{name.text}` is declared twice", name.span,
                              "rename one of them", label="declared again here",
                              labels=(Label(existing.span, "first declared here"),))
            return
        module.scope[name.text] = symbol

    def _declare_top(self, module: LoadedModule, decl) -> None:
        try:
            match decl:
                case ast.Import():
                    self._import(module, decl)
                case ast.ConstDecl():
                    self._declare_const(module, decl)
                case ast.BufferDecl():
                    buffer = declare_buffer(self.ctx, self.files, module, decl)
                    self.declare(module, decl.name, BufferSymbol(buffer, decl.name.span))
                case ast.GraphDecl(name=name) if name.text in STATEMENT_KEYWORDS:
                    self.ctx.sink.add(PC104, f"`{name.text}` is a statement keyword", name.span,
                                      f"a statement that starts with `{name.text}` is {with_article(f'`{name.text}`')} "
                                      "statement, so no call could name this graph: rename it")
                    mark_invalid(module, (name,))
                case ast.GraphDecl(name=name):
                    self.declare(module, name, GraphSymbol(decl, name.span, module))
        except Abort:
            if isinstance(decl, (ast.ConstDecl, ast.BufferDecl)):
                mark_invalid(module, (decl.name,))

    def _declare_const(self, module: LoadedModule, decl: ast.ConstDecl) -> None:
        name, value = decl.name, decl.value
        if name.text in LAUNCHER_CONSTANTS:
            self.ctx.sink.add(PC104, f"`{name.text}` is a launcher constant pipec defines",
                              name.span, f"piperun sets it from the launcher; to check a "
                              f"value, pass `-D {name.text}=...`")
            return
        live = self.ctx.live
        if name.text in module.bindings:  # the importer's value replaces this one
            bound, _, per_rank, term = module.bindings[name.text]
            self.bound_names.add((id(module), name.text))
            entry = live.add(f"{module.path.name}:{name.text}", name.span, False, term, bound) \
                if term is not None and term.roots else None
            symbol = ConstSymbol(bound, name.span, per_rank, entry)
        else:
            main = module.path == self.loading[0]  # the main file's constants are updatable
            if main and name.text in self.defines:
                value = self.defines[name.text][0]
                self.used_defines.add(name.text)
            computed, term = self.ctx.flow(module, value)
            entry = None
            if main or (term is not None and term.roots):
                entry = live.add(name.text if main else f"{module.path.name}:{name.text}", name.span, main,
                                 term, computed)
            symbol = ConstSymbol(computed, name.span, reads_rank(module, {}, value), entry)
        self.declare(module, name, symbol)

    def mark_shared_imports(self) -> None:
        """An import binding that reads an updatable constant passes its value on, unless its
        file is imported more than once: the values then decide whether the imports share one
        instance (with its buffers), so the constants they read are structural."""
        for path, bound in self.bound_files.items():
            if self.import_count[path] > 1:
                for binding, term in bound:
                    if term is not None:
                        self.ctx.live.mark(term.roots, f"a binding of `{binding.name.text}` for `{path.name}`, "
                                           f"which is imported {self.import_count[path]} times (the values "
                                           "decide which imports share an instance)", binding.span)

    def _import(self, module: LoadedModule, decl: ast.Import) -> None:
        target, refused = self.files.find(module.path.parent, decl.path.value)
        if target is None:
            if refused:
                self.files.refuse(decl.path.value, decl.path.span)
            else:
                self.ctx.sink.add(PC102, f"cannot find `{decl.path.value}`", decl.path.span,
                                  "paths are relative to the importing file, then to each include "
                                  "directory (`--include-dir`, `include-dirs` in [tool.pipec])")
            lose_import(module, decl)
        elif target.suffix in (".cu", ".cuh", ".cuda"):
            self._import_kernels(module, decl, target)
        else:
            bindings = evaluate_bindings(self.ctx, module, decl)
            self.bound_files.setdefault(target, []).extend((b, term) for _, b, _, term in bindings.values())
            imported = self._load(target, decl.path.span, bindings)
            if imported is None:
                lose_import(module, decl)
            else:
                self._import_names(module, decl, imported)

    def _import_kernels(self, module: LoadedModule, decl: ast.Import, target: Path) -> None:
        if decl.bindings:
            self.ctx.sink.add(PC113, f"`{decl.path.value}` is a kernel source; it declares no "
                              "constants to bind", decl.bindings[0].span,
                              "remove `with (...)`; kernels take values as launch arguments")
        try:  # bounded, and refused unless a regular file (a FIFO would block forever)
            text = self.kernel_sources.source(target).text
        except OSError as error:
            self.ctx.sink.add(PC102, f"cannot read `{target}`: {error.strerror or error}", decl.path.span,
                              "a kernel source is a regular file of CUDA C++")
            lose_import(module, decl)
            return
        outside = [h for h in include_closure(target, text, self.ctx.options.include_dirs)
                   if not self.files.allowed(h)]
        if outside:
            self.files.refuse(f"{decl.path.value}` includes `{outside[0].name}", decl.path.span)
            lose_import(module, decl)
            return
        imported = self.kernel_sources.import_kernels(decl, target)
        if imported is None:
            lose_import(module, decl)
            return
        listed = {ident.text for ident, _ in imported}
        for name in self.kernel_sources.declared.get(target, ()):
            if name not in listed:
                module.unimported_kernels.setdefault(name, decl)
        for ident, kernel in imported:
            if kernel is None:
                mark_invalid(module, (ident,))
            else:
                self.declare(module, ident, KernelSymbol(kernel, ident.span))

    def _import_names(self, module: LoadedModule, decl: ast.Import, imported: LoadedModule) -> None:
        if decl.names is None:
            # the importer has the values it binds; a constant whose binding's value failed
            # (reported) keeps the file's own value, which is no second declaration of it either
            failed = {binding.name.text for binding in decl.bindings} - set(imported.bindings)
            for name, symbol in imported.scope.items():
                if self.is_bound(imported, name) or (name in failed and isinstance(symbol, ConstSymbol)):
                    continue
                self.declare(module, ast.Ident(name, decl.path.span), symbol)
            return
        for ident in decl.names:
            symbol = imported.scope.get(ident.text)
            if symbol is None:
                similar = did_you_mean(ident.text, imported.scope, "declarations", ident.span)
                self.ctx.sink.add(PC103, f"`{decl.path.value}` declares no `{ident.text}`", ident.span,
                                  similar.hint, fixes=similar.fixes)
            else:
                self.declare(module, ident, symbol)

    def _load(self, path: Path, via: Span, bindings: Bindings) -> LoadedModule | None:
        self.import_count[path] = self.import_count.get(path, 0) + 1
        if (path, instance(bindings)) in self.modules:
            return self.modules[path, instance(bindings)]
        if len(self.modules) + len(self.loading) >= MAX_INSTANCES:
            self._refuse_instance(path, via)
            return None
        if path in self.loading:
            self.ctx.sink.add(PC102, f"`{path.name}` imports itself through a cycle", via,
                              "move the shared declarations into a third file both can import")
            return None
        try:
            source = SourceFile.read(path)
            tree = parse(source)
        except OSError as error:
            self.ctx.sink.add(PC102, f"cannot read `{path}`: {error.strerror or error}", via,
                              "paths are relative to the importing file")
            return None
        except PipeSyntaxError as error:
            self.ctx.sink.add(BY_CODE[error.code], error.message, error.span,
                              error.hint or "see docs/language.md for the syntax", fixes=syntax_fixes(error))
            return None
        module = LoadedModule(path, source, tree, bindings=bindings)
        # a finding in a file imported with values names the import (the file can be right
        # for some values and wrong for others)
        values = ", ".join(f"{name} = {literal(value)}" for name, (value, *_) in bindings.items())
        with self.ctx.sink.within((Use(via, f"`{path.name}` imported here", values),) if values else ()):
            self.populate(module)
        check_bindings(self.ctx, module, self.bound_names)
        for decl in tree.decls:
            if isinstance(decl, (ast.StepDecl, ast.InitDecl)):
                keyword = "step" if isinstance(decl, ast.StepDecl) else "init"
                self.ctx.sink.add(PC102, f"imported file `{path.name}` has {with_article(f'`{keyword}`')} block",
                                  via, "keep steps in the top-level file; import declarations only",
                                  labels=(Label(decl.span, "declared here"),))
        return module

    def _refuse_instance(self, path: Path, via: Span) -> None:
        """PC112, once, naming the chain of imports that reached the limit."""
        if self.too_many_instances:
            return
        self.too_many_instances = True
        names = [f"`{p.name}`" for p in (*self.loading, path)]
        chain = " -> ".join(names if len(names) <= 10 else [*names[:5], "...", *names[-4:]])
        self.ctx.sink.add(PC112, f"the imports make more than {MAX_INSTANCES} file instances (a file imported "
                          f"with other values is another instance), reached through {chain}", via,
                          "bind such values in one file that the others import, not again at every level")
