"""Syntax tree to checked model: imports, names, constants, buffers, kernel signatures, and the
unrolling of graphs, loops and compile-time `if`s into concrete nodes.

Problems that leave no meaningful model (an undefined name, a bad constant, a branch on
device data) are reported here; everything the model can represent, even when wrong (an
argument of the wrong kind, a `null` pointer, a baked value), is left to the checks.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..dsl import PipeSyntaxError, SourceFile, Span, ast, parse, parse_expression
from . import kernels as kernel_analysis
from .consteval import ConstError, RuntimeValue, Value, evaluate
from .diagnostics import DiagnosticSink, Label
from .model import (
    BUFFER_DTYPES, DTYPES, Access, Buffer, CopyNode, Extent, FillNode, GraphBody, GraphNode,
    Init, Kernel, KernelFinding, KernelSource, LaunchNode, Mode, NullArg, Options, Param,
    PointerArg, Program, RuntimeValueArg, ValueArg, Waiver,
)
from .toolchain import CompileFailed

MAX_NODES = 1_000_000
WAIVABLE_RULES = {
    "atomics": "atomics", "atomic_operation": "atomics", "PC305": "atomics",
    "spin_wait": "spin-wait", "inter_block_spin_wait": "spin-wait", "PC306": "spin-wait",
    "fence_barrier": "fence-barrier", "fence_as_barrier": "fence-barrier", "PC307": "fence-barrier",
}
_COMPILER_ERROR = re.compile(r"^(?P<file>.*?)\((?P<line>\d+)\): (?P<kind>error|catastrophic error)\s*:?\s*(?P<msg>.*)$", re.M)


@dataclass(frozen=True)
class CompileOptions:
    include_dirs: tuple[Path, ...] = ()
    compiler: str = "nvrtc"
    arch: str = "sm_90"
    lanes: int | None = None
    defines: tuple[tuple[str, str], ...] = ()  # NAME=EXPR overriding constants of the main file

    @property
    def virtual_arch(self) -> str:
        return "compute_" + self.arch.split("_", 1)[-1]


@dataclass(frozen=True)
class Symbol:
    kind: str  # const | buffer | kernel | graph
    value: object
    span: Span
    module: _Module | None = None  # where a graph was declared (its names resolve there)


@dataclass(eq=False)
class _Module:
    path: Path
    source: SourceFile
    tree: ast.Module
    scope: dict[str, Symbol] = field(default_factory=dict)


class _Abort(Exception):
    """A problem already reported that makes the current statement meaningless."""


class Resolver:
    def __init__(self, options: CompileOptions, sink: DiagnosticSink, toolchain) -> None:
        self.options = options
        self.sink = sink
        self.toolchain = toolchain
        self.modules: dict[Path, _Module] = {}
        self.loading: list[Path] = []
        self.kernel_files: dict[Path, SourceFile] = {}
        self.kernels: dict[tuple[Path, str], Kernel] = {}  # one object per kernel, however imported
        self.node_count = 0
        self.dropped_statements = 0
        self.next_group = 0
        self.names_taken: dict[str, dict[str, int]] = {}
        self.defines: dict[str, tuple[ast.Expr, Span]] = {}
        self.used_defines: set[str] = set()

    # --- entry ------------------------------------------------------------------------------

    def resolve(self, source: SourceFile, tree: ast.Module) -> Program:
        path = source.path.resolve()
        main = _Module(path, source, tree)
        self.defines = self._parse_defines()
        self._populate(main)
        for name, (_, span) in self.defines.items():
            if name not in self.used_defines:
                self.sink.add("PC103", f"`-D {name}` defines no constant of this file", span,
                              self._suggest(name, [n for n, s in main.scope.items() if s.kind == "const"],
                                            "constants"))
        options = self._options(main)
        waivers = self._waivers(main)
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
        return Program(
            path=source.path,
            sources=[m.source for m in self.modules.values()] + list(self.kernel_files.values()),
            consts={n: s.value for n, s in scope.items() if s.kind == "const"},
            buffers={n: s.value for n, s in scope.items() if s.kind == "buffer"},
            kernels={n: s.value for n, s in scope.items() if s.kind == "kernel"},
            step=step, init=init, options=options, waivers=waivers,
            dropped_statements=self.dropped_statements,
        )

    def _duplicate_block(self, name: str, span: Span) -> None:
        self.sink.add("PC104", f"a second `{name}` block", span,
                      f"a pipeline has one `{name}`; merge the two blocks")

    # --- modules ----------------------------------------------------------------------------

    def _load(self, path: Path, via: Span) -> _Module | None:
        if path in self.modules:
            return self.modules[path]
        if path in self.loading:
            self.sink.add("PC102", f"`{path.name}` imports itself through a cycle", via,
                          "move the shared declarations into a third file both can import")
            return None
        try:
            source = SourceFile.read(path)
        except (OSError, UnicodeDecodeError) as error:
            self.sink.add("PC102", f"cannot read `{path}`: {error.strerror or error}", via,
                          "paths are relative to the importing file")
            return None
        try:
            tree = parse(source)
        except PipeSyntaxError as error:
            self.sink.add(error.code, error.message, error.span,
                          error.hint or "see docs/language.md for the syntax")
            return None
        module = _Module(path, source, tree)
        self._populate(module)
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

    def _populate(self, module: _Module) -> None:
        self.loading.append(module.path)
        try:
            for decl in module.tree.decls:
                self._declare_top(module, decl)
        finally:
            self.loading.pop()
        self.modules[module.path] = module

    def _declare_top(self, module: _Module, decl) -> None:
        try:
            match decl:
                case ast.Import():
                    self._import(module, decl)
                case ast.ConstDecl(name=name, value=value):
                    if module.path == self.loading[0] and name.text in self.defines:
                        value = self.defines[name.text][0]
                        self.used_defines.add(name.text)
                    self._declare(module, name, Symbol("const", self._const(module, value), name.span))
                case ast.BufferDecl():
                    self._declare(module, decl.name, Symbol("buffer", self._buffer(module, decl), decl.name.span))
                case ast.GraphDecl(name=name):
                    self._declare(module, name, Symbol("graph", decl, name.span, module))
        except _Abort:
            if isinstance(decl, (ast.ConstDecl, ast.BufferDecl)):
                self._mark_invalid(module, (decl.name,))

    @staticmethod
    def _mark_invalid(module: _Module, names) -> None:
        """Names whose declaration failed (and was reported): uses of them are dropped
        silently instead of being reported again as undefined."""
        for ident in names:
            module.scope.setdefault(ident.text, Symbol("invalid", None, ident.span))

    def _declare(self, module: _Module, name: ast.Ident, symbol: Symbol) -> None:
        existing = module.scope.get(name.text)
        if existing is not None and existing.value is not symbol.value:
            self.sink.add("PC104", f"`{name.text}` is declared twice", name.span,
                          "rename one of them", label="declared again here",
                          labels=(Label(existing.span, "first declared here"),))
            return
        module.scope[name.text] = symbol

    def _import(self, module: _Module, decl: ast.Import) -> None:
        target = self._find_file(module.path.parent, decl.path.value)
        if target is None:
            self.sink.add("PC102", f"cannot find `{decl.path.value}`", decl.path.span,
                          "paths are relative to the importing file, then to each include "
                          "directory (`--include-dir`, `include-dirs` in [tool.pipec])")
            self._mark_invalid(module, decl.names or ())
            return
        if target.suffix in (".cu", ".cuh", ".cuda"):
            self._import_kernels(module, decl, target)
            return
        imported = self._load(target, decl.path.span)
        if imported is None:
            self._mark_invalid(module, decl.names or ())
            return
        if decl.names is None:
            for name, symbol in imported.scope.items():
                self._declare(module, ast.Ident(name, decl.path.span), symbol)
            return
        for ident in decl.names:
            symbol = imported.scope.get(ident.text)
            if symbol is None:
                self.sink.add("PC103", f"`{decl.path.value}` declares no `{ident.text}`", ident.span,
                              self._suggest(ident.text, imported.scope, "declarations"))
            else:
                self._declare(module, ident, symbol)

    def _find_file(self, base: Path, relative: str) -> Path | None:
        for folder in (base, *self.options.include_dirs):
            candidate = (folder / relative).resolve()
            if candidate.is_file():
                return candidate
        return None

    def _import_kernels(self, module: _Module, decl: ast.Import, path: Path) -> None:
        try:
            analysis = kernel_analysis.analyze(
                path, self.options.include_dirs, self.toolchain, self.options.virtual_arch
            )
        except CompileFailed as failure:
            self._report_compile_failure(path, failure, decl.path.span)
            self._mark_invalid(module, decl.names or ())
            return
        source = self._kernel_file(path)
        names = decl.names or tuple(ast.Ident(n, decl.path.span) for n in analysis.kernels)
        for ident in names:
            info = analysis.kernels.get(ident.text)
            if info is None:
                mangled = [m for m in analysis.mangled if ident.text in m]
                hint = (f"`{ident.text}` is compiled with a C++ name; declare it `extern \"C\"`"
                        if mangled else self._suggest(ident.text, analysis.kernels, "kernels"))
                self.sink.add("PC106", f"`{path.name}` has no kernel `{ident.text}`", ident.span, hint)
                self._mark_invalid(module, (ident,))
                continue
            kernel = self.kernels.get((path, ident.text))
            if kernel is None:
                kernel = self.kernels[path, ident.text] = self._kernel(ident, info, path, source, analysis.key)
            self._declare(module, ident, Symbol("kernel", kernel, ident.span))

    def _kernel_file(self, path: Path) -> SourceFile:
        if path not in self.kernel_files:
            self.kernel_files[path] = SourceFile.read(path)
        return self.kernel_files[path]

    def _report_compile_failure(self, path: Path, failure: CompileFailed, via: Span) -> None:
        source = self._kernel_file(path)
        reported = 0
        for m in _COMPILER_ERROR.finditer(failure.log):
            if Path(m.group("file")).name != path.name or reported >= 5:
                continue
            line = min(int(m.group("line")), source.line_count)
            self.sink.add("PC106", f"kernel source does not compile: {m.group('msg').strip()}",
                          Span.of_line(source, line),
                          "fix the CUDA source; the note shows how it was compiled",
                          labels=(Label(via, "imported here"),), notes=(failure.command,))
            reported += 1
        if not reported:
            self.sink.add("PC106", f"`{path.name}` does not compile", via,
                          "fix the CUDA source; the compiler's log follows",
                          notes=(failure.log.strip()[-2000:], failure.command))

    def _kernel(self, ident: ast.Ident, info: dict, path: Path, source: SourceFile, key: str) -> Kernel:
        decl = info["decl"]
        decl_span = Span(source, decl[0], decl[1]) if decl else Span.of_line(source, 1)
        params = []
        for p in info["params"]:
            extent = None
            if p["extent"]:
                extent = self._extent(source, p["extent"])
            dtype = DTYPES.get(p["dtype"]) if p["dtype"] else None
            params.append(Param(p["index"], p["name"], p["kind"], dtype, p["const"],
                                p["write_only"], extent, p["ctype"]))
        for start, end in info.get("unknown_annotations", []):
            self.sink.add("PC106", "cannot read this `pipec:` annotation", Span(source, start, end),
                          "annotations are `pipec: extent NAME = EXPR` and `pipec: out NAME`")
        findings = tuple(
            KernelFinding(f["rule"], f["instruction"], self._cuda_span(f["location"], decl_span),
                          self._cuda_span(f["inlined_at"], None))
            for f in info["findings"]
        )
        return Kernel(ident.text, KernelSource(path, source, key), tuple(params), info["max_threads"],
                      findings, decl_span)

    def _extent(self, source: SourceFile, extent: dict) -> Extent | None:
        span = Span(source, extent["start"], extent["end"])
        try:
            return Extent(parse_expression(source, extent["start"], extent["end"]), span)
        except PipeSyntaxError as error:
            self.sink.add("PC106", f"cannot read the extent expression: {error.message}", span,
                          "write it like a .pipe constant expression over the kernel's scalar parameters")
            return None

    def _cuda_span(self, location, fallback: Span | None) -> Span | None:
        if not location:
            return fallback
        path = Path(location[0])
        try:
            source = self._kernel_file(path.resolve())
        except (OSError, UnicodeDecodeError):
            return fallback
        line = min(max(location[1], 1), source.line_count)
        start = source.offset(line, max(location[2], 1))
        text = source.line_text(line)
        end_col = text.find(";", location[2] - 1)
        end = source.offset(line, (end_col if end_col >= 0 else len(text)) + 1)
        return Span(source, start, max(end, start + 1))

    # --- constants and buffers --------------------------------------------------------------

    def _suggest(self, name: str, names, what: str) -> str:
        close = difflib.get_close_matches(name, list(names), n=1)
        if close:
            return f"a name with a similar spelling exists: `{close[0]}`"
        return f"check the spelling; no {what} with that name exist"

    def _lookup(self, module: _Module, env: dict[str, Value]):
        def lookup(ident: ast.Ident) -> Value:
            if ident.text in env:
                return env[ident.text]
            symbol = module.scope.get(ident.text)
            if symbol is not None and symbol.kind == "invalid":
                raise _Abort
            if symbol is None:
                raise ConstError(f"undefined name `{ident.text}`", ident.span,
                                 self._suggest(ident.text, list(env) + list(module.scope), "declarations"),
                                 code="PC103")
            if symbol.kind == "const":
                return symbol.value
            if symbol.kind == "buffer":
                raise RuntimeValue(f"buffer `{ident.text}`", ident.span, ident.text)
            raise ConstError(f"`{ident.text}` is a {symbol.kind}, not a value", ident.span,
                             "only constants, loop variables and graph parameters have values")
        return lookup

    def _eval(self, module: _Module, env: dict[str, Value], expr: ast.Expr, *, context: str) -> Value:
        """Evaluate a constant; report and abort on failure. `context` names the place for the
        rule a run-time value breaks: `branch` (PC301), `value` (PC302) or `const` (PC105)."""
        try:
            return evaluate(expr, self._lookup(module, env))
        except ConstError as error:
            self.sink.add(error.code, error.message, error.span, error.hint)
        except RuntimeValue as rv:
            self._report_runtime_value(rv, context)
        raise _Abort

    def _report_runtime_value(self, rv: RuntimeValue, context: str) -> None:
        if context == "branch":
            self.sink.add("PC301", f"this decision depends on {rv.description}, which is only "
                          "known on the device while the step runs", rv.span,
                          "only compile-time `if` and `for` exist: let a kernel read the value "
                          "and do nothing when it should do nothing, or use a CUDA conditional node",
                          label="device data")
        elif context == "value":
            self.sink.add("PC302", f"{rv.description} changes between steps but would be read "
                          "once, when the graph is built", rv.span,
                          "bind the buffer as a pointer and let the kernel read the value",
                          label="baked at build time")
        else:
            self.sink.add("PC105", f"{rv.description} is not a compile-time constant", rv.span,
                          "use constants, loop variables and graph parameters here")

    def _const(self, module: _Module, expr: ast.Expr) -> Value:
        return self._eval(module, {}, expr, context="const")

    def _int(self, module: _Module, env: dict, expr: ast.Expr, what: str, context: str = "const") -> int:
        value = self._eval(module, env, expr, context=context)
        if isinstance(value, bool) or not isinstance(value, int):
            self.sink.add("PC105", f"{what} must be an integer, found `{literal(value)}`", expr.span,
                          "use an integer expression")
            raise _Abort
        return value

    def _buffer(self, module: _Module, decl: ast.BufferDecl) -> Buffer:
        dtype = DTYPES.get(decl.dtype.text)
        if dtype is None or decl.dtype.text not in BUFFER_DTYPES:
            self.sink.add("PC107", f"unknown element type `{decl.dtype.text}`", decl.dtype.span,
                          "element types: " + ", ".join(BUFFER_DTYPES))
            raise _Abort
        shape = tuple(self._int(module, {}, d, "a dimension") for d in decl.shape)
        for dim, expr in zip(shape, decl.shape):
            if dim <= 0:
                self.sink.add("PC107", f"dimension {dim} is not positive", expr.span,
                              "every dimension must be at least 1")
                raise _Abort
        count = int(np.prod(shape, dtype=object))
        labels = tuple(label.text for label in decl.labels)
        if len(labels) > count:
            self.sink.add("PC107", f"{len(labels)} labels for {count} elements",
                          decl.labels[count].span, "give at most one label per element")
            raise _Abort
        if labels and not decl.mapped:
            self.sink.add("PC107", "labels name the elements piperun reads back, so they need a "
                          "`mapped` buffer", decl.labels[0].span, "add `mapped` or drop the labels")
            raise _Abort
        init = self._init(module, decl, dtype, shape)
        return Buffer(decl.name.text, dtype, shape, decl.mapped, labels, init, decl.span)

    def _init(self, module: _Module, decl: ast.BufferDecl, dtype, shape) -> Init:
        expr = decl.init
        if expr is None:
            return Init("zeros")
        hint = "initial values: zeros, uninit, fill(v), uniform(lo, hi, seed=s), normal(mean, std, seed=s), load(\"file.npy\")"
        if isinstance(expr, ast.Name) and expr.ident.text in ("zeros", "uninit"):
            return Init(expr.ident.text)
        if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name)):
            self.sink.add("PC107", f"`{expr.span.text}` is not an initial value", expr.span, hint)
            raise _Abort
        kind = expr.func.ident.text
        arity = {"fill": 1, "uniform": 2, "normal": 2, "load": 1}.get(kind)
        if arity is None:
            self.sink.add("PC107", f"unknown initial value `{kind}`", expr.func.span, hint)
            raise _Abort
        if len(expr.args) != arity:
            self.sink.add("PC107", f"`{kind}` takes {arity} argument{'s' * (arity > 1)}", expr.span, hint)
            raise _Abort
        args = tuple(self._const(module, a) for a in expr.args)
        seed = 0
        for keyword in expr.keywords:
            if keyword.name.text != "seed" or kind in ("fill", "load"):
                self.sink.add("PC107", f"`{kind}` takes no argument `{keyword.name.text}`",
                              keyword.span, hint)
                raise _Abort
            seed = self._int(module, {}, keyword.value, "a seed")
        if kind == "load":
            return self._load_init(module, expr, args[0], dtype, shape)
        for value, arg in zip(args, expr.args):
            if isinstance(value, (bool, str)):
                self.sink.add("PC107", f"`{kind}` needs numbers, found `{literal(value)}`", arg.span, hint)
                raise _Abort
        if kind == "fill":
            problem = representable(args[0], dtype)
            if problem:
                self.sink.add("PC107", f"fill value {problem}", expr.args[0].span,
                              f"choose a value a `{dtype.name}` can hold")
                raise _Abort
        return Init(kind, args, seed)

    def _load_init(self, module: _Module, expr: ast.Call, value: Value, dtype, shape) -> Init:
        if not isinstance(value, str):
            self.sink.add("PC107", "`load` takes a path string", expr.args[0].span,
                          "write `load(\"file.npy\")`, relative to the .pipe file")
            raise _Abort
        path = (module.path.parent / value).resolve()
        try:
            with path.open("rb") as f:
                version = np.lib.format.read_magic(f)
                if version == (1, 0):
                    header = np.lib.format.read_array_header_1_0(f)
                else:  # 2.0 and 3.0 share the header layout
                    header = np.lib.format.read_array_header_2_0(f)
            file_shape, _, file_dtype = header
        except (OSError, ValueError) as error:
            self.sink.add("PC107", f"cannot read `{value}` as a .npy file: {error}", expr.args[0].span,
                          "the path is relative to the .pipe file")
            raise _Abort from None
        expected = np.dtype(dtype.numpy)
        if tuple(file_shape) != shape or np.dtype(file_dtype) != expected:
            self.sink.add("PC107", f"`{value}` holds {np.dtype(file_dtype)}{list(file_shape)}, the "
                          f"buffer is {dtype.name}{list(shape)}", expr.args[0].span,
                          "save the array with the buffer's shape and element type")
            raise _Abort
        return Init("load", (), None, path)

    # --- options and waivers ----------------------------------------------------------------

    def _options(self, module: _Module) -> Options:
        values: dict = {}
        share_span = None
        for decl in module.tree.decls:
            if not isinstance(decl, ast.OptionDecl):
                continue
            name = decl.name.text
            try:
                value = self._const(module, decl.value)
            except _Abort:
                continue
            if name == "lanes" and isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 1024:
                values["lanes"] = value
            elif name == "copy" and value in ("memcpy", "kernel"):
                values["copy"] = value
            elif name == "share_modules" and isinstance(value, bool):
                values["share_modules"] = value
                share_span = decl.span
            elif name in ("lanes", "copy", "share_modules"):
                expected = {"lanes": "an integer from 1 to 1024", "copy": '"memcpy" or "kernel"',
                            "share_modules": "true or false"}[name]
                self.sink.add("PC108", f"option `{name}` cannot be `{literal(value)}`", decl.value.span,
                              f"`{name}` takes {expected}")
            else:
                self.sink.add("PC108", f"unknown option `{name}`", decl.name.span,
                              self._suggest(name, ["lanes", "copy", "share_modules"], "options"))
        if self.options.lanes is not None:
            values["lanes"] = self.options.lanes
        return Options(**values, share_modules_span=share_span)

    def _waivers(self, module: _Module) -> list[Waiver]:
        waivers = []
        for decl in module.tree.decls:
            if not isinstance(decl, ast.WaiveDecl):
                continue
            rule = WAIVABLE_RULES.get(decl.rule.text)
            symbol = module.scope.get(decl.kernel.text)
            if rule is None:
                self.sink.add("PC108", f"`{decl.rule.text}` cannot be waived", decl.rule.span,
                              "waivable rules: atomics, spin_wait, fence_barrier")
            elif symbol is not None and symbol.kind == "invalid":
                continue  # its import failed, and was reported
            elif symbol is None or symbol.kind != "kernel":
                self.sink.add("PC103", f"`{decl.kernel.text}` is not an imported kernel", decl.kernel.span,
                              self._suggest(decl.kernel.text, module.scope, "kernels"))
            elif not decl.reason.value.strip():
                self.sink.add("PC108", "a waiver needs a reason", decl.reason.span,
                              "say why this kernel is safe despite the rule")
            else:
                waivers.append(Waiver(rule, symbol.value, decl.reason.value, decl.span))
        return waivers

    # --- graphs and nodes -------------------------------------------------------------------

    def _instantiate_root(self, name: str, block: ast.Block, module: _Module) -> GraphBody:
        body = GraphBody(name, name, block.span)
        self._block(module, {}, block, body, None, [])
        return body

    def _block(self, module: _Module, env: dict, block: ast.Block | ast.For, body: GraphBody,
               group: int | None, stack: list) -> None:
        statements = (block,) if isinstance(block, ast.For) else block.stmts
        for stmt in statements:
            try:
                self._statement(module, env, stmt, body, group, stack)
            except _Abort:
                self.dropped_statements += 1
                continue

    def _statement(self, module, env, stmt, body: GraphBody, group, stack) -> None:
        match stmt:
            case ast.Launch():
                self._add(body, self._launch(module, env, stmt, body, group))
            case ast.Fill():
                self._add(body, self._fill(module, env, stmt, body, group))
            case ast.Copy():
                self._add(body, self._copy(module, env, stmt, body, group))
            case ast.GraphCall():
                node = self._graph_call(module, env, stmt, body, group, stack)
                if node is not None:
                    self._add(body, node)
            case ast.For():
                start = self._int(module, env, stmt.start, "a loop bound", "branch")
                stop = self._int(module, env, stmt.stop, "a loop bound", "branch")
                if stop - start > MAX_NODES:
                    self.sink.add("PC105", f"the loop unrolls {stop - start} times", stmt.span,
                                  f"a step holds at most {MAX_NODES} nodes")
                    raise _Abort
                for value in range(start, stop):
                    self._block(module, {**env, stmt.var.text: value}, stmt.body, body, group, stack)
            case ast.If():
                cond = self._eval(module, env, stmt.cond, context="branch")
                if not isinstance(cond, bool):
                    self.sink.add("PC105", f"a condition must be a boolean, found `{literal(cond)}`",
                                  stmt.cond.span, "compare explicitly, for example `N > 0`")
                    raise _Abort
                chosen = stmt.then if cond else stmt.orelse
                if isinstance(chosen, ast.If):
                    self._statement(module, env, chosen, body, group, stack)
                elif chosen is not None:
                    self._block(module, env, chosen, body, group, stack)
            case ast.Parallel():
                if group is None:
                    self.next_group += 1
                    group = self.next_group
                self._block(module, env, stmt.body, body, group, stack)

    def _add(self, body: GraphBody, node) -> None:
        self.node_count += 1
        if self.node_count > MAX_NODES:
            self.sink.add("PC105", f"the step has more than {MAX_NODES} nodes", node.span,
                          "split the work into fewer, larger kernels")
            raise _Abort
        body.items.append(node)

    def _node_name(self, body: GraphBody, base: str) -> str:
        taken = self.names_taken.setdefault(body.name, {})
        count = taken[base] = taken.get(base, 0) + 1
        return f"{body.name}/{base}" + (f"#{count}" if count > 1 else "")

    def _symbol(self, module: _Module, ident: ast.Ident, kind: str) -> Symbol:
        symbol = module.scope.get(ident.text)
        if symbol is not None and symbol.kind == "invalid":
            raise _Abort
        if symbol is None:
            candidates = [n for n, s in module.scope.items() if s.kind == kind]
            self.sink.add("PC103", f"undefined {kind} `{ident.text}`", ident.span,
                          self._suggest(ident.text, candidates, f"{kind}s"))
            raise _Abort
        if symbol.kind != kind:
            hint = {
                "kernel": f"launch kernels with `launch {ident.text}<<<grid, block>>>(...)`",
                "buffer": "use buffers as kernel arguments, fill or copy targets",
                "graph": f"use a graph by writing its name: `{ident.text}`",
            }.get(symbol.kind, "")
            self.sink.add("PC103", f"`{ident.text}` is a {symbol.kind}, not a {kind}", ident.span,
                          hint or "check the name", labels=(Label(symbol.span, "declared here"),))
            raise _Abort
        return symbol

    def _dims(self, module, env, expr: ast.Expr, what: str) -> tuple[int, int, int]:
        items = expr.items if isinstance(expr, ast.TupleLit) else (expr,)
        if len(items) > 3:
            self.sink.add("PC105", f"a {what} has at most three dimensions", expr.span,
                          "write `(x, y, z)`")
            raise _Abort
        dims = [self._int(module, env, item, f"a {what} dimension") for item in items]
        return tuple(dims + [1] * (3 - len(dims)))  # type: ignore[return-value]

    def _launch(self, module, env, stmt: ast.Launch, body: GraphBody, group) -> LaunchNode:
        kernel: Kernel = self._symbol(module, stmt.kernel, "kernel").value
        grid = self._dims(module, env, stmt.grid, "grid")
        block = self._dims(module, env, stmt.block, "block")
        shared = 0
        if stmt.shared_bytes is not None:
            shared = self._int(module, env, stmt.shared_bytes, "shared memory")
        args = tuple(self._arg(module, env, a) for a in stmt.args)
        config_end = stmt.shared_bytes or stmt.block
        node = LaunchNode(
            self._node_name(body, kernel.name), kernel, grid, block, shared, args, stmt.span,
            stmt.grid.span.to(config_end.span), group=group,
        )
        node.accesses = launch_accesses(node)
        return node

    def _arg(self, module, env, arg: ast.Arg):
        value = arg.value
        pointer = self._pointer(module, env, value, arg.access, arg.span)
        if pointer is not None:
            return pointer
        if arg.access is not None:
            self.sink.add("PC205", f"`{arg.access}` qualifies a buffer, but `{value.span.text}` is a value",
                          arg.span, f"remove `{arg.access}`")
            raise _Abort
        if isinstance(value, ast.NullLit):
            return NullArg(value.span)
        try:
            return ValueArg(evaluate(value, self._lookup(module, env)), value.span)
        except RuntimeValue as rv:
            return RuntimeValueArg(rv.description, self._buffer_named(module, rv.buffer_name), value.span)
        except ConstError as error:
            self.sink.add(error.code, error.message, error.span, error.hint)
            raise _Abort from None

    def _buffer_named(self, module: _Module, name: str | None) -> Buffer | None:
        symbol = module.scope.get(name) if name else None
        return symbol.value if symbol is not None and symbol.kind == "buffer" else None

    def _pointer(self, module, env, expr: ast.Expr, qualifier, span: Span) -> PointerArg | None:
        """A buffer or a slice of one, as a pointer argument; None for anything else."""
        base = expr.base if isinstance(expr, ast.Slice) else expr
        if not isinstance(base, ast.Name) or base.ident.text in env:
            return None
        symbol = module.scope.get(base.ident.text)
        if symbol is not None and symbol.kind == "invalid":
            raise _Abort
        if symbol is None or symbol.kind != "buffer":
            return None
        buffer: Buffer = symbol.value
        start, stop = 0, buffer.count
        if isinstance(expr, ast.Slice):
            if expr.start is not None:
                start = self._int(module, env, expr.start, "a slice bound", "value")
            if expr.stop is not None:
                stop = self._int(module, env, expr.stop, "a slice bound", "value")
            if not 0 <= start <= stop <= buffer.count or start == stop:
                self.sink.add("PC206", f"slice [{start}:{stop}] of `{buffer.name}` lies outside its "
                              f"{buffer.count} elements" if start != stop or start > buffer.count
                              else f"slice [{start}:{stop}] of `{buffer.name}` is empty",
                              expr.span, f"element indices run from 0 to {buffer.count}; slices are half-open")
                raise _Abort
        return PointerArg(buffer, start, stop, isinstance(expr, ast.Slice), qualifier, span)

    def _target(self, module, env, expr: ast.Expr, what: str) -> PointerArg:
        pointer = self._pointer(module, env, expr, None, expr.span)
        if pointer is None:
            self.sink.add("PC103", f"the {what} must be a buffer or a slice of one, found "
                          f"`{expr.span.text}`", expr.span, "name a declared buffer, e.g. `x` or `x[0:4]`")
            raise _Abort
        return pointer

    def _fill(self, module, env, stmt: ast.Fill, body: GraphBody, group) -> FillNode:
        target = self._target(module, env, stmt.target, "fill target")
        value = self._eval(module, env, stmt.value, context="value")
        if isinstance(value, str):
            self.sink.add("PC105", "a fill value must be a number", stmt.value.span, "fill with a number")
            raise _Abort
        node = FillNode(self._node_name(body, f"fill:{target.buffer.name}"), target.buffer,
                        target.start, target.stop, value, stmt.span, group=group)
        node.accesses = (Access(target.buffer, target.start, target.stop, Mode.WRITE, stmt.target.span),)
        return node

    def _copy(self, module, env, stmt: ast.Copy, body: GraphBody, group) -> CopyNode:
        src = self._target(module, env, stmt.src, "copy source")
        dst = self._target(module, env, stmt.dst, "copy destination")
        node = CopyNode(self._node_name(body, f"copy:{src.buffer.name}->{dst.buffer.name}"), src, dst,
                        stmt.span, group=group)
        node.accesses = (
            Access(src.buffer, src.start, src.stop, Mode.READ, stmt.src.span),
            Access(dst.buffer, dst.start, dst.stop, Mode.WRITE, stmt.dst.span),
        )
        return node

    def _graph_call(self, module, env, stmt: ast.GraphCall, body: GraphBody, group, stack) -> GraphNode | None:
        symbol = self._symbol(module, stmt.name, "graph")
        decl: ast.GraphDecl = symbol.value
        if any(name == decl.name.text for name, _ in stack):
            chain = [span for name, span in stack] + [stmt.span]
            start = next(i for i, (name, _) in enumerate(stack) if name == decl.name.text)
            self.sink.add("PC315", f"graph `{decl.name.text}` uses itself", stmt.span,
                          "a graph cannot contain itself; unroll with a compile-time `for` instead",
                          labels=tuple(Label(s, "used here") for s in chain[start:-1]))
            raise _Abort
        if len(stmt.args) != len(decl.params):
            self.sink.add("PC201", f"graph `{decl.name.text}` takes {len(decl.params)} argument"
                          f"{'s' * (len(decl.params) != 1)}, found {len(stmt.args)}", stmt.span,
                          "pass one constant per graph parameter",
                          labels=(Label(decl.name.span, "declared here"),))
            raise _Abort
        values = [self._eval(module, env, a, context="value") for a in stmt.args]
        suffix = f"[{', '.join(map(str, values))}]" if values else ""
        name = self._node_name(body, decl.name.text + suffix)
        child = GraphBody(name, decl.name.text, decl.span)
        inner_env = {p.text: v for p, v in zip(decl.params, values)}
        self._block(symbol.module, inner_env, decl.body, child, None, stack + [(decl.name.text, stmt.span)])
        return GraphNode(name, child, stmt.span, group=group)


def literal(value: Value) -> str:
    """A value as the .pipe language writes it (`true`, `"kernel"`, `0.5`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def representable(value: Value, dtype) -> str | None:
    """Why `value` does not fit `dtype`, or None if it does."""
    if isinstance(value, bool):
        value = int(value)
    if dtype.kind == "f":
        if not isinstance(value, (int, float)):
            return f"`{literal(value)}` is not a number"
        limit = {2: 65504.0 if dtype.name == "f16" else 3.3895e38, 4: 3.4028234e38, 8: 1.7976931348623157e308}[dtype.size]
        if abs(float(value)) > limit:
            return f"{value!r} overflows `{dtype.name}`"
        return None
    if not isinstance(value, (int, float)):
        return f"`{literal(value)}` is not a number"
    if isinstance(value, float):
        return f"{value!r} is not an integer, and `{dtype.name}` holds integers"
    low, high = dtype.int_range()
    if not low <= value <= high:
        return f"{value} is outside the range of `{dtype.name}` ({low} to {high})"
    return None


def pointer_mode(param: Param, qualifier: str | None) -> Mode:
    if qualifier == "in" or param.const:
        return Mode.READ
    if qualifier == "out" or (qualifier is None and param.write_only):
        return Mode.WRITE
    return Mode.READ_WRITE


def launch_accesses(node: LaunchNode) -> tuple[Access, ...]:
    """The element ranges a launch reads and writes, from its well-formed pointer bindings.

    A pointer covers its slice; an extent the kernel declares narrows that to the elements
    the kernel actually touches, which sharpens the dependency DAG."""
    scalars = scalar_bindings(node)
    accesses = []
    for param, arg in zip(node.kernel.params, node.args):
        if param.kind != "pointer" or not isinstance(arg, PointerArg):
            continue
        stop = arg.stop
        if param.extent is not None:
            extent = extent_value(param, node, scalars)
            if extent is not None and 0 < extent < arg.stop - arg.start:
                stop = arg.start + extent
        accesses.append(Access(arg.buffer, arg.start, stop, pointer_mode(param, arg.qualifier), arg.span))
    return tuple(accesses)


def scalar_bindings(node: LaunchNode) -> dict[str, Value]:
    values: dict[str, Value] = {}
    for param, arg in zip(node.kernel.params, node.args):
        if param.kind == "scalar" and isinstance(arg, ValueArg):
            values[param.name] = arg.value
    return values


def extent_value(param: Param, node: LaunchNode, scalars: dict[str, Value]) -> int | None:
    """The number of elements `param`'s extent expression asks for at this launch, or None
    when it cannot be computed (a parameter it uses is not a constant)."""
    dims = {"gridDim": node.grid, "blockDim": node.block}

    def lookup(ident: ast.Ident) -> Value:
        if ident.text in scalars:
            return scalars[ident.text]
        raise ConstError(f"`{ident.text}` is not a scalar parameter", ident.span, "")

    try:
        value = evaluate(_dims_to_names(param.extent.expr, dims), lookup)
    except (ConstError, RuntimeValue):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _dims_to_names(expr: ast.Expr, dims: dict) -> ast.Expr:
    """Replace `gridDim.x`-style attributes by their values at this launch. Iterative, with the
    rebuilt operands on a stack: an extent may be a long chain such as `n + n + ... + n`."""
    rebuilt: list[ast.Expr] = []
    pending: list = [expr]  # expressions to visit, and (node, operand count) to rebuild
    while pending:
        item = pending.pop()
        if isinstance(item, tuple):
            node, count = item
            parts = rebuilt[len(rebuilt) - count :]
            del rebuilt[len(rebuilt) - count :]
            match node:
                case ast.Binary(op=op, span=span):
                    rebuilt.append(ast.Binary(op, parts[0], parts[1], span))
                case ast.Unary(op=op, span=span):
                    rebuilt.append(ast.Unary(op, parts[0], span))
                case ast.Call(func=func, keywords=keywords, span=span):
                    rebuilt.append(ast.Call(func, tuple(parts), keywords, span))
            continue
        match item:
            case ast.Attribute(base=ast.Name(ident=ident), name=name, span=span) if ident.text in dims:
                axis = "xyz".find(name.text)
                rebuilt.append(ast.IntLit(dims[ident.text][axis], span) if axis >= 0 else item)
            case ast.Binary(left=left, right=right):
                pending += [(item, 2), right, left]
            case ast.Unary(operand=operand):
                pending += [(item, 1), operand]
            case ast.Call(args=args):
                pending += [(item, len(args)), *reversed(args)]
            case _:
                rebuilt.append(item)
    return rebuilt.pop()
