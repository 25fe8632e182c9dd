"""Kernel imports: `from "file.cu" import k` runs kernel analysis (kernels.py) and turns its
records into model kernels, with spans in the CUDA source for signatures and findings."""

from __future__ import annotations

import re
from pathlib import Path

from ...dsl import PipeSyntaxError, SourceFile, Span, ast, parse_expression
from ...dsl.source import real_path
from .. import kernel_analysis
from ..config import CompileOptions
from ..diagnostics import DiagnosticSink, Label
from ..kernel_records import CallSite, KernelRecord, SourceLocation
from ..model import DTYPES, Extent, Kernel, KernelFinding, KernelSource, Param
from .scope import LoadedModule, Scope, Symbol
from ..source_scan import ExtentAnnotation
from ..toolchain import CompileFailed

_COMPILER_ERROR = re.compile(r"^(?P<file>.*?)\((?P<line>\d+)\): (?P<kind>error|catastrophic error)\s*:?\s*(?P<msg>.*)$", re.M)


class KernelImports(Scope):
    """Owns the CUDA sources read so far and one model kernel per (source, name)."""

    def __init__(self, options: CompileOptions, sink: DiagnosticSink, toolchain) -> None:
        super().__init__(options, sink, toolchain)
        self.kernel_files: dict[Path, SourceFile] = {}
        # one object per kernel identity (its source's analysis key, which covers the path, the
        # content and the compile options, and its name), however often it is imported
        self.kernels: dict[tuple[str, str], Kernel] = {}

    def _import_kernels(self, module: LoadedModule, decl: ast.Import, path: Path) -> None:
        try:
            analysis = kernel_analysis.analyze(
                path, self.options.include_dirs, self.toolchain, self.options.virtual_arch
            )
        except CompileFailed as failure:
            self._report_compile_failure(path, failure, decl.path.span)
            self._mark_invalid(module, decl.names or ())
            return
        except kernel_analysis.KernelInputLimit as limit:
            where = limit.where
            if where is None:
                self.sink.add("PC112", limit.message, decl.path.span, limit.hint)
            else:
                self.sink.add("PC112", limit.message, Span(self._kernel_file(path), where.start, where.end),
                              limit.hint, labels=(Label(decl.path.span, "imported here"),))
            self._mark_invalid(module, decl.names or ())
            return
        source = self._kernel_file(path)
        names = decl.names or tuple(ast.Ident(n, decl.path.span) for n in analysis.kernels)
        for ident in names:
            record = analysis.kernels.get(ident.text)
            if record is None:
                mangled = [m for m in analysis.mangled if ident.text in m]
                hint = (f"`{ident.text}` is compiled with a C++ name; declare it `extern \"C\"`"
                        if mangled else self._suggest(ident.text, analysis.kernels, "kernels"))
                self.sink.add("PC106", f"`{path.name}` has no kernel `{ident.text}`", ident.span, hint)
                self._mark_invalid(module, (ident,))
                continue
            kernel = self.kernels.get((analysis.key, ident.text))
            if kernel is None:
                kernel = self._kernel(ident, record, path, source, analysis.key)
                self.kernels[analysis.key, ident.text] = kernel
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
                          failure.advice or "fix the CUDA source; the note shows how it was compiled",
                          labels=(Label(via, "imported here"),), notes=(failure.command,))
            reported += 1
        if not reported:
            self.sink.add("PC106", f"`{path.name}` does not compile", via,
                          failure.advice or "fix the CUDA source; the compiler's log follows",
                          notes=(failure.log.strip()[-2000:], failure.command))

    def _kernel(self, ident: ast.Ident, record: KernelRecord, path: Path, source: SourceFile,
                key: str) -> Kernel:
        where = record.signature
        decl_span = Span(source, where.start, where.end) if where else Span.of_line(source, 1)
        params = tuple(
            Param(p.index, p.name, p.kind, DTYPES.get(p.dtype) if p.dtype else None, p.const,
                  p.write_only, self._extent(source, p.extent) if p.extent else None, p.ctype,
                  p.written, self._cuda_span(p.written_reported_at, None),
                  self._trail(p.written_at, p.written_reached_from, "the store itself"))
            for p in record.params
        )
        if where is None:
            self.sink.add("PC109", f"pipec cannot find the declaration of `{ident.text}` in "
                          f"`{path.name}`: its parameters are named by position and no "
                          "`/// pipec:` annotation applies to it", ident.span,
                          "write the kernel's name in the source, or let a macro take it as an "
                          "argument: `#define K(name) __global__ void name(...)`, then `K(my_kernel)`")
        for unreadable in record.unreadable_annotations:
            self.sink.add("PC106", "cannot read this `pipec:` annotation",
                          Span(source, unreadable.start, unreadable.end),
                          "annotations are `pipec: extent NAME = EXPR` and `pipec: out NAME`")
        findings = tuple(
            KernelFinding(f.rule, f.instruction, self._cuda_span(f.reported_at, decl_span),
                          self._trail(f.location, f.reached_from, f"`{f.instruction}` itself"
                                      if f.rule != "unfollowed-call" else "the call itself"))
            for f in record.findings
        )
        return Kernel(ident.text, KernelSource(path, source, key), params, record.max_threads,
                      findings, decl_span, record.cluster)

    def _extent(self, source: SourceFile, extent: ExtentAnnotation) -> Extent | None:
        span = Span(source, extent.where.start, extent.where.end)
        try:
            return Extent(parse_expression(source, extent.where.start, extent.where.end), span)
        except PipeSyntaxError as error:
            self.sink.add("PC106", f"cannot read the extent expression: {error.message}", span,
                          "write it like a .pipe constant expression over the kernel's scalar parameters")
            return None

    def _trail(self, location: SourceLocation | None, reached_from: tuple[CallSite, ...],
               itself: str) -> tuple[Label, ...]:
        """Labels for the lines between the kernel's own line (the diagnostic's span) and the
        instruction: the instruction in its header or helper, then each line that inlines or
        calls the function holding the one before."""
        if not reached_from:
            return ()
        steps = [(location, f"{itself}, in `{Path(location.file).name}`" if location else "")]
        steps += [(site.location, "called here" if site.called else "inlined here") for site in reached_from[:-1]]
        spans = [(self._cuda_span(where, None), text) for where, text in steps]
        return tuple(Label(span, text) for span, text in spans if span is not None)

    def _cuda_span(self, location: SourceLocation | None, fallback: Span | None) -> Span | None:
        if location is None:
            return fallback
        path = Path(location.file)
        try:
            source = self._kernel_file(real_path(path))
        except OSError:
            return fallback
        line = min(max(location.line, 1), source.line_count)
        start = source.offset(line, max(location.column, 1))
        text = source.line_text(line)
        end_col = text.find(";", location.column - 1)
        end = source.offset(line, (end_col if end_col >= 0 else len(text)) + 1)
        return Span(source, start, max(end, start + 1))
