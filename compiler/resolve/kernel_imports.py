"""Kernel imports: `from "file.cu" import k` runs kernel analysis (kernel_analysis.py) and turns
its records into model kernels, with spans in the CUDA source for signatures and findings."""

from __future__ import annotations

import re
from pathlib import Path

from ...dsl import PipeSyntaxError, SourceFile, Span, ast, parse_expression
from ...dsl.source import real_path
from .. import kernel_analysis
from ..codes import PC106, PC109, PC112
from ..diagnostics import Label
from ..kernel_records import CallSite, KernelRecord, LaunchControlRecord, SiteRecord, SourceLocation, outermost
from ..model import DTYPES, EarlyAccess, Extent, Kernel, KernelFinding, KernelSource, LaunchControl, Param, Site
from ..source_scan import ExtentAnnotation
from ..toolchain import CompileFailed
from .context import Context
from .spelling import did_you_mean

_COMPILER_ERROR = re.compile(r"^(?P<file>.*?)\((?P<line>\d+)\): (?P<kind>error|catastrophic error)\s*:?\s*(?P<msg>.*)$", re.M)


class KernelImporter:
    """Owns the CUDA sources read so far and one model kernel per (source, name)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.files: dict[Path, SourceFile] = {}
        # one object per kernel identity (its source's analysis key, which covers the path, the
        # content and the compile options, and its name), however often it is imported
        self.kernels: dict[tuple[str, str], Kernel] = {}
        self.declared: dict[Path, tuple[str, ...]] = {}  # the kernels each analysed source declares

    def import_kernels(self, decl: ast.Import, path: Path) -> list[tuple[ast.Ident, Kernel | None]] | None:
        """The kernels the import names, each None when it is not there (reported); None when
        the source cannot be analysed at all (reported)."""
        options = self.ctx.options
        try:
            analysis = kernel_analysis.analyze(path, options.include_dirs, self.ctx.toolchain,
                                               options.virtual_arch)
        except CompileFailed as failure:
            self._report_compile_failure(path, failure, decl.path.span)
            return None
        except kernel_analysis.KernelInputLimit as limit:  # too large to hand the compiler
            where = limit.where
            if where is None:
                self.ctx.sink.add(PC112, limit.message, decl.path.span, limit.hint)
            else:
                self.ctx.sink.add(PC112, limit.message, Span(self.source(path), where.start, where.end),
                                  limit.hint, labels=(Label(decl.path.span, "imported here"),))
            return None
        source = self.source(path)
        self.declared[path] = tuple(analysis.kernels)
        names = decl.names or tuple(ast.Ident(n, decl.path.span) for n in analysis.kernels)
        found: list[tuple[ast.Ident, Kernel | None]] = []
        for ident in names:
            record = analysis.kernels.get(ident.text)
            if record is None:
                mangled = [m for m in analysis.mangled if ident.text in m]
                similar = did_you_mean(ident.text, analysis.kernels, "kernels", ident.span)
                hint = (f"`{ident.text}` is compiled with a C++ name; declare it `extern \"C\"`"
                        if mangled else similar.hint)
                self.ctx.sink.add(PC106, f"`{path.name}` has no kernel `{ident.text}`", ident.span, hint,
                                  fixes=() if mangled else similar.fixes)
                found.append((ident, None))
                continue
            kernel = self.kernels.get((analysis.key, ident.text))
            if kernel is None:
                kernel = self._kernel(ident, record, path, source, analysis.key)
                self.kernels[analysis.key, ident.text] = kernel
            found.append((ident, kernel))
        return found

    def source(self, path: Path) -> SourceFile:
        if path not in self.files:
            self.files[path] = SourceFile.read(path)
        return self.files[path]

    def _report_compile_failure(self, path: Path, failure: CompileFailed, via: Span) -> None:
        """One finding per line the compiler's errors name (its first five such lines): the
        errors after the first on a line mostly follow from it, and become notes."""
        source = self.source(path)
        by_line: dict[int, list[str]] = {}
        for m in _COMPILER_ERROR.finditer(failure.log):
            line = min(int(m.group("line")), source.line_count)
            if Path(m.group("file")).name == path.name and (line in by_line or len(by_line) < 5):
                by_line.setdefault(line, []).append(m.group("msg").strip())
        for line, (first, *then) in by_line.items():
            self.ctx.sink.add(PC106, f"kernel source does not compile: {first}", Span.of_line(source, line),
                              failure.advice or "fix the CUDA source; the note shows how it was compiled",
                              labels=(Label(via, "imported here"),),
                              notes=(*(f"then: {message}" for message in then), failure.command))
        if not by_line:
            self.ctx.sink.add(PC106, f"`{path.name}` does not compile", via,
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
                  self._trail(p.written_at, p.written_reached_from, "the store itself"), p.table,
                  self._site(p.read_first, "the load itself", decl_span),
                  self._site(p.read_through, "the load itself", decl_span),
                  self._site(p.written_through, "the store itself", decl_span))
            for p in record.params
        )
        if where is None:
            self.ctx.sink.add(PC109, f"pipec cannot find the declaration of `{ident.text}` in "
                              f"`{path.name}`: its parameters are named by position and no "
                              "`/// pipec:` annotation applies to it", ident.span,
                              "write the kernel's name in the source, or let a macro take it as an "
                              "argument: `#define K(name) __global__ void name(...)`, then `K(my_kernel)`")
        for unreadable in record.unreadable_annotations:
            self.ctx.sink.add(PC106, "cannot read this `pipec:` annotation",
                              Span(source, unreadable.start, unreadable.end),
                              "annotations are `pipec: extent NAME = EXPR` and `pipec: out NAME`")
        findings = tuple(
            KernelFinding(f.rule, f.instruction, self._cuda_span(f.reported_at, decl_span),
                          self._trail(f.location, f.reached_from, f"`{f.instruction}` itself"
                                      if f.rule != "unfollowed-call" else "the call itself"))
            for f in record.findings
        )
        return Kernel(ident.text, KernelSource(path, source, key), params, record.max_threads,
                      findings, decl_span, record.cluster, self._launch_control(record.launch_control, decl_span),
                      self._site(record.unknown_read, "the load itself", decl_span),
                      self._site(record.unknown_write, "the store itself", decl_span))

    def _site(self, record: SiteRecord | None, itself: str, decl_span: Span) -> Site | None:
        """Where the kernel's own body reaches an instruction (its declaration when the PTX
        has no line info), with the trail through headers and helpers."""
        if record is None:
            return None
        span = self._cuda_span(record.reported_at, decl_span)
        assert span is not None  # the declaration is the fallback
        return Site(span, self._trail(record.location, record.reached_from, itself))

    def _launch_control(self, record: LaunchControlRecord, decl_span: Span) -> LaunchControl:
        early = tuple(EarlyAccess(a.params, a.mode, a.instruction, self._cuda_span(a.reported_at, decl_span),
                                  self._trail(a.location, a.reached_from, "the access itself"))
                      for a in record.early)
        trigger = self._cuda_span(outermost(record.trigger, record.trigger_reached_from), decl_span) \
            if record.trigger is not None else None
        return LaunchControl(record.waits, early, trigger)

    def _extent(self, source: SourceFile, extent: ExtentAnnotation) -> Extent | None:
        span = Span(source, extent.where.start, extent.where.end)
        try:
            return Extent(parse_expression(source, extent.where.start, extent.where.end), span)
        except PipeSyntaxError as error:
            self.ctx.sink.add(PC106, f"cannot read the extent expression: {error.message}", span,
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
            source = self.source(real_path(path))
        except OSError:
            return fallback
        line = min(max(location.line, 1), source.line_count)
        start = source.offset(line, max(location.column, 1))
        text = source.line_text(line)
        end_col = text.find(";", location.column - 1)
        end = source.offset(line, (end_col if end_col >= 0 else len(text)) + 1)
        return Span(source, start, max(end, start + 1))
