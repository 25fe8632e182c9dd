"""The declaration pass: loading imported `.pipe` modules, `-D` definitions, constants,
buffers with their initial values and options, into each module's scope."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..dsl import PipeSyntaxError, SourceFile, Span, ast, parse, parse_expression
from .config import CompileOptions
from .consteval import Value, literal, representable
from .diagnostics import DiagnosticSink, Label
from .kernels import include_closure
from .model import BUFFER_DTYPES, DTYPES, Buffer, Init, Options
from .resolve_bindings import ImportBindings, instance
from .resolve_collective import LAUNCHER_CONSTANTS, PER_RANK, builtin_span
from .resolve_kernels import KernelImports
from .resolve_scope import Abort, LoadedModule, Symbol

MAX_BUFFER_BYTES = 1 << 40  # 1 TiB: more than any GPU holds (an H200 has 141 GB)
MAX_GEMM_WORKSPACE = 1 << 30  # per GEMM node; cuBLASLt's heuristics ask for tens of MiB at most
_OPTIONS = ("lanes", "copy", "share_modules", "gemm_workspace")
# The words dsl/grammar.lark starts statements with: a graph of one of these names could never
# be called, as its call would read as that statement.
STATEMENT_KEYWORDS = ("launch", "fill", "copy", "gemm", "for", "if", "parallel", "switch", "every",
                      "while", "repeat", "allreduce", "broadcast", "allgather", "reducescatter")
INT64_MAX = (1 << 63) - 1
# the kernels shipped with pipec: importable from any project
SHIPPED_KERNELS = Path(__file__).resolve().parent.parent / "kernels"


class Declarations(KernelImports, ImportBindings):
    """Owns the chain of modules being loaded (for cycles) and the `-D` definitions."""

    def __init__(self, options: CompileOptions, sink: DiagnosticSink, toolchain) -> None:
        super().__init__(options, sink, toolchain)
        self.loading: list[Path] = []
        self.defines: dict[str, tuple[ast.Expr, Span]] = {}
        self.used_defines: set[str] = set()
        self.launcher_symbols: dict[str, Symbol] = {}
        self.allowed_dirs: tuple[Path, ...] = ()  # set by `resolve` from the main file

    def _load(self, path: Path, via: Span, bindings: dict) -> LoadedModule | None:
        if (path, instance(bindings)) in self.modules:
            return self.modules[path, instance(bindings)]
        if path in self.loading:
            self.sink.add("PC102", f"`{path.name}` imports itself through a cycle", via,
                          "move the shared declarations into a third file both can import")
            return None
        try:
            source = SourceFile.read(path)
        except OSError as error:
            self.sink.add("PC102", f"cannot read `{path}`: {error.strerror or error}", via,
                          "paths are relative to the importing file")
            return None
        try:
            tree = parse(source)
        except PipeSyntaxError as error:
            self.sink.add(error.code, error.message, error.span,
                          error.hint or "see docs/language.md for the syntax")
            return None
        module = LoadedModule(path, source, tree, bindings=bindings)
        self._populate(module)
        self._check_bindings(module)
        for decl in tree.decls:
            if isinstance(decl, (ast.StepDecl, ast.InitDecl)):
                keyword = "step" if isinstance(decl, ast.StepDecl) else "init"
                self.sink.add("PC102", f"imported file `{path.name}` has a `{keyword}` block",
                              via, "keep steps in the top-level file; import declarations only",
                              labels=(Label(decl.span, "declared here"),))
        return module

    def _parse_defines(self) -> dict[str, tuple[ast.Expr, Span]]:
        """`-D NAME=EXPR` values, parsed like constant expressions of the main file."""
        parsed = {}
        for name, text in self.options.defines:
            source = SourceFile(Path(f"<-D {name}>"), text)
            try:
                parsed[name] = (parse_expression(source, 0, len(text)), Span(source, 0, len(text)))
            except PipeSyntaxError as error:
                self.sink.add("PC101", f"`-D {name}={text}`: {error.message}", error.span,
                              "a definition is a constant expression, e.g. `-D ENVS=1024`")
        return parsed

    def _populate(self, module: LoadedModule) -> None:
        self.loading.append(module.path)
        if not self.modules and len(self.loading) == 1:  # the main file: the launcher's values
            self.launcher = self.launcher_constants(self.defines, self.used_defines)
        for name, value in self.launcher.items():
            symbol = self.launcher_symbols.setdefault(name, Symbol("const", value, builtin_span(name)))
            module.scope[name] = symbol
            if name in PER_RANK:
                self.per_rank_symbols.add(id(symbol))
        try:
            for decl in module.tree.decls:
                self._declare_top(module, decl)
        finally:
            self.loading.pop()
        self.modules[module.path, instance(module.bindings)] = module

    def _declare_top(self, module: LoadedModule, decl) -> None:
        try:
            match decl:
                case ast.Import():
                    self._import(module, decl)
                case ast.ConstDecl(name=name, value=value):
                    if name.text in LAUNCHER_CONSTANTS:
                        self.sink.add("PC104", f"`{name.text}` is a launcher constant pipec defines",
                                      name.span, f"piperun sets it from the launcher; to check a "
                                      f"value, pass `-D {name.text}=...`")
                        return
                    if name.text in module.bindings:  # the importer's value replaces this one
                        bound, _, per_rank = module.bindings[name.text]
                        symbol = Symbol("const", bound, name.span)
                        self.bound_names.add((id(module), name.text))
                    else:
                        if module.path == self.loading[0] and name.text in self.defines:
                            value = self.defines[name.text][0]
                            self.used_defines.add(name.text)
                        symbol = Symbol("const", self._const(module, value), name.span)
                        per_rank = self.reads_rank(module, {}, value)
                    self._declare(module, name, symbol)
                    if per_rank:
                        self.per_rank_symbols.add(id(symbol))
                case ast.BufferDecl():
                    self._declare(module, decl.name, Symbol("buffer", self._buffer(module, decl), decl.name.span))
                case ast.GraphDecl(name=name) if name.text in STATEMENT_KEYWORDS:
                    self.sink.add("PC104", f"`{name.text}` is a statement keyword", name.span,
                                  f"a statement that starts with `{name.text}` is a `{name.text}` "
                                  "statement, so no call could name this graph: rename it")
                    self._mark_invalid(module, (name,))
                case ast.GraphDecl(name=name):
                    self._declare(module, name, Symbol("graph", decl, name.span, module))
        except Abort:
            if isinstance(decl, (ast.ConstDecl, ast.BufferDecl)):
                self._mark_invalid(module, (decl.name,))


    def _import(self, module: LoadedModule, decl: ast.Import) -> None:
        target, refused = self._find_file(module.path.parent, decl.path.value)
        if target is None:
            if refused:
                self._refuse(decl.path.value, decl.path.span)
            else:
                self.sink.add("PC102", f"cannot find `{decl.path.value}`", decl.path.span,
                              "paths are relative to the importing file, then to each include "
                              "directory (`--include-dir`, `include-dirs` in [tool.pipec])")
            self._mark_invalid(module, decl.names or ())
            return
        if target.suffix in (".cu", ".cuh", ".cuda"):
            if decl.bindings:
                self.sink.add("PC113", f"`{decl.path.value}` is a kernel source; it declares no "
                              "constants to bind", decl.bindings[0].span,
                              "remove `with (...)`; kernels take values as launch arguments")
            outside = [h for h in include_closure(target, target.read_text(errors="replace"),
                                                  self.options.include_dirs) if not self._allowed(h)]
            if outside:
                self._refuse(f"{decl.path.value}` includes `{outside[0].name}", decl.path.span)
                self._mark_invalid(module, decl.names or ())
                return
            self._import_kernels(module, decl, target)
            return
        imported = self._load(target, decl.path.span, self._bindings(module, decl))
        if imported is None:
            self._mark_invalid(module, decl.names or ())
            return
        if decl.names is None:
            for name, symbol in imported.scope.items():
                if not self._is_bound(imported, name):  # the importer has the values it bound
                    self._declare(module, ast.Ident(name, decl.path.span), symbol)
            return
        for ident in decl.names:
            symbol = imported.scope.get(ident.text)
            if symbol is None:
                self.sink.add("PC103", f"`{decl.path.value}` declares no `{ident.text}`", ident.span,
                              self._suggest(ident.text, imported.scope, "declarations"))
            else:
                self._declare(module, ident, symbol)

    def _find_file(self, base: Path, relative: str) -> tuple[Path | None, bool]:
        """The first existing file the path names inside the allowed folders, and whether
        some folder's reading of it lies outside them (refused whether it exists or not)."""
        refused = False
        for folder in (base, *self.options.include_dirs):
            candidate = (folder / relative).resolve()
            if not self._allowed(candidate):
                refused = True
            elif candidate.is_file():
                return candidate, refused
        return None, refused

    def _allowed_dirs(self, main: Path) -> tuple[Path, ...]:
        options = self.options
        root = options.project_root or main.parent
        return (root, *options.include_dirs, *options.allow_paths, SHIPPED_KERNELS)

    def _allowed(self, path: Path) -> bool:
        return any(path.is_relative_to(folder) for folder in self.allowed_dirs)

    def _refuse(self, what: str, span: Span) -> None:
        """PC110; the file is never read, so nothing of it can appear in a report."""
        hint = (f"imports and `load` files stay inside {self.allowed_dirs[0]} and the include "
                "folders; list more folders in `allow-paths` under [tool.pipec]")
        if self.options.project_root is None:
            hint = (f"without a pyproject.toml the project is the pipeline's folder, {self.allowed_dirs[0]}: "
                    "add a pyproject.toml with a [tool.pipec] table (for example `include-dirs = "
                    "[\"kernels\"]`) in the folder that holds the pipelines and their kernels, "
                    "or start one with `pipec init`")
        self.sink.add("PC110", f"`{what}` lies outside the project", span, hint)

    def _buffer(self, module: LoadedModule, decl: ast.BufferDecl) -> Buffer:
        type_name = decl.dtype.text
        symbol = module.scope.get(type_name)
        if symbol is not None and symbol.kind == "const" and isinstance(symbol.value, str):
            type_name = symbol.value  # `const DT = "bf16"`: a type chosen by a constant (`-D`)
        dtype = DTYPES.get(type_name)
        if dtype is None or type_name not in BUFFER_DTYPES:
            named = f" (`{type_name}`)" if type_name != decl.dtype.text else ""
            self.sink.add("PC107", f"unknown element type `{decl.dtype.text}`{named}", decl.dtype.span,
                          "element types: " + ", ".join(BUFFER_DTYPES))
            raise Abort
        shape = tuple(self._int(module, {}, d, "a dimension") for d in decl.shape)
        for dim, expr in zip(shape, decl.shape):
            if dim <= 0:
                self.sink.add("PC107", f"dimension {dim} is not positive", expr.span,
                              "every dimension must be at least 1")
                raise Abort
        count = int(np.prod(shape, dtype=object))
        if count > INT64_MAX:
            self.sink.add("PC107", f"the shape holds {count} elements, more than a 64-bit count "
                          "can hold", decl.span, "a buffer's element count must fit in int64")
            raise Abort
        if count * dtype.size > MAX_BUFFER_BYTES:
            self.sink.add("PC107", f"`{decl.name.text}` takes {count * dtype.size} bytes, more than "
                          f"the {MAX_BUFFER_BYTES} (1 TiB) any device holds", decl.span,
                          "split the data, or keep it on the host and stream it in")
            raise Abort
        labels = tuple(label.text for label in decl.labels)
        if len(labels) > count:
            self.sink.add("PC107", f"{len(labels)} labels for {count} elements",
                          decl.labels[count].span, "give at most one label per element")
            raise Abort
        if labels and not decl.mapped:
            self.sink.add("PC107", "labels name the elements piperun reads back, so they need a "
                          "`mapped` buffer", decl.labels[0].span, "add `mapped` or drop the labels")
            raise Abort
        init = self._init(module, decl, dtype, shape)
        return Buffer(decl.name.text, dtype, shape, decl.mapped, labels, init, decl.span, decl.replicated)

    def _init(self, module: LoadedModule, decl: ast.BufferDecl, dtype, shape) -> Init:
        expr = decl.init
        if expr is None:
            return Init("zeros")
        hint = "initial values: zeros, uninit, fill(v), uniform(lo, hi, seed=s), normal(mean, std, seed=s), load(\"file.npy\")"
        if isinstance(expr, ast.Name) and expr.ident.text in ("zeros", "uninit"):
            return Init(expr.ident.text)
        if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name)):
            self.sink.add("PC107", f"`{expr.span.text}` is not an initial value", expr.span, hint)
            raise Abort
        kind = expr.func.ident.text
        arity = {"fill": 1, "uniform": 2, "normal": 2, "load": 1}.get(kind)
        if arity is None:
            self.sink.add("PC107", f"unknown initial value `{kind}`", expr.func.span, hint)
            raise Abort
        if len(expr.args) != arity:
            self.sink.add("PC107", f"`{kind}` takes {arity} argument{'s' * (arity > 1)}", expr.span, hint)
            raise Abort
        args = tuple(self._const(module, a) for a in expr.args)
        seed = 0
        for keyword in expr.keywords:
            if keyword.name.text != "seed" or kind in ("fill", "load"):
                self.sink.add("PC107", f"`{kind}` takes no argument `{keyword.name.text}`",
                              keyword.span, hint)
                raise Abort
            seed = self._int(module, {}, keyword.value, "a seed")
            if not 0 <= seed < 1 << 64:
                self.sink.add("PC107", f"seed {seed} is outside 0 to 2**64 - 1", keyword.value.span,
                              "seeds are unsigned 64-bit integers")
                raise Abort
        if kind == "load":
            return self._load_init(module, expr, args[0], dtype, shape)
        for value, arg in zip(args, expr.args):
            if isinstance(value, (bool, str)):
                self.sink.add("PC107", f"`{kind}` needs numbers, found `{literal(value)}`", arg.span, hint)
                raise Abort
        if kind == "fill":
            problem = representable(args[0], dtype)
            if problem:
                self.sink.add("PC107", f"fill value {problem}", expr.args[0].span,
                              f"choose a value that fits `{dtype.name}`")
                raise Abort
        else:
            self._check_random(kind, args, expr, dtype)
        return Init(kind, args, seed)

    def _check_random(self, kind: str, args: tuple, expr: ast.Call, dtype) -> None:
        """uniform(lo, hi): finite, lo < hi, values the element type holds (hi excluded for
        integers); normal(mean, std): a floating-point buffer, finite, std >= 0."""
        problem = None
        for value, arg in zip(args, expr.args):
            if isinstance(value, float) and not math.isfinite(value):
                problem = (f"`{kind}` needs finite numbers, found `{literal(value)}`", arg.span)
        if problem is None and kind == "normal":
            if dtype.kind != "f":
                problem = (f"`normal` fills floating-point buffers; `{dtype.name}` holds integers",
                           expr.span)
            elif args[1] < 0:
                problem = (f"a standard deviation of {args[1]} is negative", expr.args[1].span)
        elif problem is None:
            lo, hi = args
            last = hi - 1 if dtype.kind != "f" and isinstance(hi, int) else hi
            if not lo < hi:
                problem = (f"`uniform({literal(lo)}, {literal(hi)})` is empty: the low end must be "
                           "below the high end", expr.span)
            elif (why := representable(lo, dtype)) is not None:
                problem = (f"`uniform` low end {why}", expr.args[0].span)
            elif (why := representable(last, dtype)) is not None:
                problem = (f"`uniform` draws up to {literal(last)}: {why}", expr.args[1].span)
        if problem is not None:
            self.sink.add("PC107", problem[0], problem[1], f"the buffer is `{dtype.name}`; "
                          "uniform(lo, hi) needs lo < hi, normal(mean, std) needs std >= 0")
            raise Abort

    def _load_init(self, module: LoadedModule, expr: ast.Call, value: Value, dtype, shape) -> Init:
        if not isinstance(value, str):
            self.sink.add("PC107", "`load` takes a path string", expr.args[0].span,
                          "write `load(\"file.npy\")`, relative to the .pipe file")
            raise Abort
        path = (module.path.parent / value).resolve()
        if not self._allowed(path):
            self._refuse(value, expr.args[0].span)
            raise Abort
        try:
            with path.open("rb") as f:
                version = np.lib.format.read_magic(f)
                if version == (1, 0):
                    header = np.lib.format.read_array_header_1_0(f)
                else:  # 2.0 and 3.0 share the header layout
                    header = np.lib.format.read_array_header_2_0(f)
                data_start = f.tell()
            file_shape, _, file_dtype = header
            data_bytes = path.stat().st_size - data_start
        except (OSError, ValueError) as error:
            self.sink.add("PC107", f"cannot read `{value}` as a .npy file: {error}", expr.args[0].span,
                          "the path is relative to the .pipe file")
            raise Abort from None
        expected = np.dtype(dtype.numpy)
        if tuple(file_shape) != shape or np.dtype(file_dtype) != expected:
            self.sink.add("PC107", f"`{value}` holds {np.dtype(file_dtype)}{list(file_shape)}, the "
                          f"buffer is {dtype.name}{list(shape)}", expr.args[0].span,
                          "save the array with the buffer's shape and element type")
            raise Abort
        if data_bytes < int(np.prod(shape, dtype=object)) * expected.itemsize:
            self.sink.add("PC107", f"`{value}` is truncated: it holds {data_bytes} bytes of data, "
                          f"its header promises {int(np.prod(shape, dtype=object)) * expected.itemsize}",
                          expr.args[0].span, "save the array again")
            raise Abort
        return Init("load", (), None, path)

    # --- options ----------------------------------------------------------------------------

    def _options(self, module: LoadedModule) -> Options:
        values: dict = {}
        share_span = None
        for decl in module.tree.decls:
            if not isinstance(decl, ast.OptionDecl):
                continue
            name = decl.name.text
            try:
                value = self._const(module, decl.value)
            except Abort:
                continue
            if name == "lanes" and isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 1024:
                values["lanes"] = value
            elif name == "copy" and value in ("memcpy", "kernel"):
                values["copy"] = value
            elif name == "share_modules" and isinstance(value, bool):
                values["share_modules"] = value
                share_span = decl.span
            elif (name == "gemm_workspace" and isinstance(value, int) and not isinstance(value, bool)
                  and 0 < value <= MAX_GEMM_WORKSPACE and value % 256 == 0):
                values["gemm_workspace"] = value
            elif name in _OPTIONS:
                expected = {"lanes": "an integer from 1 to 1024", "copy": '"memcpy" or "kernel"',
                            "share_modules": "true or false",
                            "gemm_workspace": "a positive multiple of 256 bytes up to 1 GiB"}[name]
                self.sink.add("PC108", f"option `{name}` cannot be `{literal(value)}`", decl.value.span,
                              f"`{name}` takes {expected}")
            else:
                self.sink.add("PC108", f"unknown option `{name}`", decl.name.span,
                              self._suggest(name, list(_OPTIONS), "options"))
        if self.options.lanes is not None:
            values["lanes"] = self.options.lanes
        return Options(**values, share_modules_span=share_span)

