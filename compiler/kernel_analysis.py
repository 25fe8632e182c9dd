"""What the compiler knows about a CUDA source: its kernels' signatures as the compiler sees
them, their launch bounds, and what their PTX does that the graph-safety rules forbid.

Signatures come from the compiler itself: a probe appended to the source encodes each
parameter's type (after macros, typedefs and includes) into a device array, and the PTX gives
it back. Parameter names and `/// pipec:` annotations come from the source text. Results are
cached by the content of the source and its includes, the options, the target and the
compiler's version.
"""

from __future__ import annotations

import re
from dataclasses import astuple, dataclass, replace
from functools import cache as memoize
from pathlib import Path

import jinja2

from ..dsl.source import MAX_READ_BYTES, real_path
from ..errors import Error
from . import cache, kernel_records, ptx
from .kernel_records import (CallSite, EarlyAccessRecord, FindingRecord, KernelRecord, LaunchControlRecord, ParamRecord,
                             SiteRecord, SourceAnalysis, SourceLocation)
from .source_scan import Declaration, TextRange, scan_declarations
from .toolchain import CompileRequest

ANALYSIS_VERSION = "9"  # bump when the analysis output format or meaning changes

# The probe's code for one parameter type: the scalar at the bottom of its pointers (0 when
# pipec cannot bind it: a struct, an enum, a reference), how many pointers lead to it (at most
# 3), whether the first pointer's target is const, and whether the bottom scalar is.
DEPTH_SHIFT = 8
MAX_DEPTH = 3
POINTEE_CONST_BIT = 0x400
SCALAR_CONST_BIT = 0x800
# (C type, code, pipec type); `void` only ever appears behind a pointer.
SCALAR_CODES = (
    ("float", 1, "f32"), ("double", 2, "f64"), ("signed char", 5, "i8"), ("char", 15, "i8"),
    ("unsigned char", 6, "u8"), ("short", 7, "i16"), ("unsigned short", 8, "u16"),
    ("int", 9, "i32"), ("unsigned int", 10, "u32"), ("long long", 11, "i64"),
    ("unsigned long long", 12, "u64"), ("long", 13, "i64"), ("unsigned long", 14, "u64"),
    ("bool", 16, "bool"), ("void", 17, None),
)
HALF_CODE, BFLOAT16_CODE = 3, 4
_CODE_TO_TYPE = {code: (ctype, name) for ctype, code, name in SCALAR_CODES}
_CODE_TO_TYPE[HALF_CODE] = ("__half", "f16")
_CODE_TO_TYPE[BFLOAT16_CODE] = ("__nv_bfloat16", "bf16")

# The most parameters of a kernel pipec hands the kernel compiler: NVRTC's time and memory
# grow with the square of their count (5,000 `char` parameters: 5 s; 10,000: 30 s and 0.9 GB;
# 30,000: beyond 5 minutes and 15 GB). 1,024 `int`s fill the 4 KiB of parameters CUDA allowed
# before 12.1; kernels of real pipelines have a few dozen.
MAX_KERNEL_PARAMS = 1024

_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


class KernelInputLimit(Error):
    """A kernel source beyond what pipec hands the compiler (PC112): larger than a file pipec
    reads, or a kernel of more than MAX_KERNEL_PARAMS parameters; `where` is the kernel's
    declaration, when the source text shows it."""

    def __init__(self, message: str, hint: str, where: TextRange | None = None) -> None:
        super().__init__(message)
        self.message, self.hint, self.where = message, hint, where


@dataclass(frozen=True)
class ParamType:
    """A parameter type as the probe encodes it."""

    kind: str  # pointer | scalar | unsupported
    dtype: str | None
    ctype: str
    const: bool  # a pointer through which the kernel cannot write
    table: bool = False  # a pointer to pointers to `dtype` (a table of addresses)


def decode_param_type(code: int) -> ParamType:
    scalar = code & 0xFF
    depth = (code >> DEPTH_SHIFT) & MAX_DEPTH
    ctype, dtype = _CODE_TO_TYPE.get(scalar, ("struct", None))
    if depth == 0:
        if scalar not in _CODE_TO_TYPE or ctype == "void":
            return ParamType("unsupported", None, "a type pipec cannot bind", False)
        return ParamType("scalar", dtype, ctype, False)
    pointee_const = bool(code & POINTEE_CONST_BIT)
    spelled = ("const " if code & SCALAR_CONST_BIT else "") + ctype + "*" * (depth - 1)
    spelled += " const*" if pointee_const and depth > 1 else "*"
    if depth > 2 or scalar not in _CODE_TO_TYPE:
        return ParamType("unsupported", None, spelled, False)
    return ParamType("pointer", dtype, spelled, pointee_const, depth == 2)


@memoize
def _probe_template() -> jinja2.Template:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    return env.get_template("signature_probe.cu.j2")


def include_closure(path: Path, text: str, include_dirs: tuple[Path, ...]) -> list[Path]:
    """Every local header the source includes, transitively (quoted and angled includes that
    resolve in the source's folder or the include folders)."""
    found: list[Path] = []
    stack = [(path, text)]
    while stack:
        current, body = stack.pop()
        for _, name in _INCLUDE.findall(body):
            for folder in (current.parent, *include_dirs):
                candidate = real_path(folder / name)
                if candidate.is_file():
                    if candidate not in found:
                        found.append(candidate)
                        stack.append((candidate, candidate.read_text(errors="replace")))
                    break
    return found


def source_key(path: Path, include_dirs: tuple[Path, ...], toolchain, arch: str, extra: str = "") -> str:
    text = path.read_text(errors="replace")
    parts = [ANALYSIS_VERSION, toolchain.name, toolchain.version, arch, extra, str(path), text]
    for header in include_closure(path, text, include_dirs):
        parts += [str(header), header.read_text(errors="replace")]
    parts += [str(d) for d in (*include_dirs, *toolchain.system_headers)]
    return cache.digest(*parts)


def analyze(path: Path, include_dirs: tuple[Path, ...], toolchain, arch: str) -> SourceAnalysis:
    """Signatures and PTX findings of every kernel in `path` (raises CompileFailed, and
    KernelInputLimit before compiling what would cost the compiler minutes)."""
    path = real_path(path)
    if path.stat().st_size > MAX_READ_BYTES:
        raise KernelInputLimit(f"`{path.name}` is larger than {MAX_READ_BYTES >> 20} MiB, the most pipec "
                               "reads of a source", "split it into sources of their own")
    key = source_key(path, include_dirs, toolchain, arch, "analysis")
    if (cached := cache.load("analysis", key)) is not None:
        if (analysis := kernel_records.from_json(path, key, cached)) is not None:
            return analysis
    text = path.read_text(errors="replace")
    declarations = scan_declarations(text)
    for name, declaration in declarations.items():
        _limit_params(name, len(declaration.params), declaration.where)
    dirs = (path.parent, *include_dirs)
    module = ptx.parse(toolchain.compile(CompileRequest(text, str(path), dirs, arch, "ptx")).decode())
    entries = [e for e in module.entries if not e.name.startswith("_Z")]
    for entry in entries:  # a macro or a template may make what the text does not show
        _limit_params(entry.name, entry.params, declarations[entry.name].where
                      if entry.name in declarations else None)
    probe_source = text + "\n" + _probe_template().render(
        scalar_codes=[(c, code) for c, code, _ in SCALAR_CODES], half_code=HALF_CODE,
        bfloat16_code=BFLOAT16_CODE, depth_shift=DEPTH_SHIFT, max_depth=MAX_DEPTH,
        pointee_const_bit=POINTEE_CONST_BIT, scalar_const_bit=SCALAR_CONST_BIT,
        kernels=[{"name": e.name, "max_params": e.params} for e in entries],
    )
    probe = ptx.parse(toolchain.compile(CompileRequest(probe_source, str(path), dirs, arch, "ptx")).decode())
    kernels = {
        e.name: _kernel_record(e, probe.globals.get(f"pipec_sig_{e.name}", [0]),
                               declarations.get(e.name), module, toolchain.system_headers)
        for e in entries
    }
    mangled = tuple(e.name for e in module.entries if e.name.startswith("_Z"))
    cache.store("analysis", key, kernel_records.to_json(kernels, mangled))
    return SourceAnalysis(path, key, kernels, mangled)


def _limit_params(kernel: str, count: int, where: TextRange | None) -> None:
    if count > MAX_KERNEL_PARAMS:
        raise KernelInputLimit(f"kernel `{kernel}` has {count} parameters; pipec compiles kernels of up "
                               f"to {MAX_KERNEL_PARAMS}",
                               "pass the values in a buffer: one pointer parameter instead of many scalars", where)


def compile_cubin(path: Path, include_dirs: tuple[Path, ...], toolchain, arch: str,
                  target: str = "cubin") -> bytes:
    """The cubin of a kernel source for one `sm_XY` target (or, with `target="ptx"`, its PTX
    for a `compute_XY` one), from the cache when possible."""
    path = real_path(path)
    key = source_key(path, include_dirs, toolchain, arch, target)
    if (cached := cache.load(target, key)) is not None:
        return cached
    request = CompileRequest(path.read_text(), str(path), (path.parent, *include_dirs), arch, target)
    binary = toolchain.compile(request)
    cache.store(target, key, binary)
    return binary


def compile_generated_cubin(name: str, source: str, toolchain, arch: str, target: str = "cubin") -> bytes:
    """The cubin (or PTX) of compiler-generated code (copy and fill kernels)."""
    key = cache.digest(ANALYSIS_VERSION, toolchain.name, toolchain.version, arch, name, source,
                       *([target] if target != "cubin" else []))
    if (cached := cache.load(target, key)) is not None:
        return cached
    binary = toolchain.compile(CompileRequest(source, name, (), arch, target))
    cache.store(target, key, binary)
    return binary


def _kernel_record(entry: ptx.Function, words: list[int], decl: Declaration | None,
                   module: ptx.AnalysedModule, system: tuple[Path, ...]) -> KernelRecord:
    count, codes = (words[0], words[1 : 1 + words[0]]) if words else (0, [])
    names = decl.params if decl and len(decl.params) == count else [f"arg{i}" for i in range(count)]
    params = tuple(_param_record(i, code, name, decl) for i, (code, name) in enumerate(zip(codes, names)))
    findings = tuple(
        FindingRecord(f.rule, f.instruction, *_located(f.location, system))
        for f in _unique(module.findings(entry.name))
    )
    writes = module.writes(entry.name)
    accesses, first_reads = module.accesses(entry.name), module.first_reads(entry.name)
    params = tuple(replace(_with_writes(p, writes.get(p.index, (ptx.Written.UNKNOWN, None)), system),
                           read_first=_site(first_reads, p.index, system),
                           read_through=_site(accesses.through[ptx.READ], p.index, system),
                           written_through=_site(accesses.through[ptx.WRITE], p.index, system))
                   for p in params)
    return KernelRecord(entry.name, params, entry.max_threads, findings,
                        decl.where if decl else None, decl.unreadable if decl else (), entry.cluster,
                        _launch_control_record(module.launch_control(entry.name), system),
                        _site(accesses.unknown, ptx.READ, system), _site(accesses.unknown, ptx.WRITE, system))


def _site(found: dict, key, system: tuple[Path, ...]) -> SiteRecord | None:
    """The record of `found[key]`, a location (None: without line info), or None when absent."""
    return SiteRecord(*_located(found[key], system)) if key in found else None


def _launch_control_record(control: ptx.LaunchControl, system: tuple[Path, ...]) -> LaunchControlRecord:
    early = tuple(EarlyAccessRecord(a.params, a.mode, a.instruction, *_located(a.location, system))
                  for a in control.early)
    return LaunchControlRecord(control.waits.value, early, *_located(control.trigger, system))


def _param_record(index: int, code: int, name: str, decl: Declaration | None) -> ParamRecord:
    kind, dtype, ctype, const, table = astuple(decode_param_type(code))
    return ParamRecord(index, name, kind, dtype, ctype, const,
                       write_only=decl is not None and name in decl.outputs,
                       extent=decl.extent(name) if decl else None, table=table)


def _with_writes(param: ParamRecord, write: tuple[ptx.Written, ptx.Location | None],
                 system: tuple[Path, ...]) -> ParamRecord:
    status, where = write
    written_at, reached_from = _located(where, system)
    return replace(param, written=status.value, written_at=written_at, written_reached_from=reached_from)


def _located(location: ptx.Location | None, system: tuple[Path, ...]) -> tuple[SourceLocation | None,
                                                                             tuple[CallSite, ...]]:
    """A PTX location as records: the line itself, and the lines that reach it through inlining
    and calls, innermost first. Lines in the compiler's own headers (`atomicAdd` in the toolkit's
    `device_atomic_functions.hpp`, `cuda::atomic_ref` in CCCL) are skipped: they are no line the
    user can change, and one compiler shows them where another has a built-in."""
    if location is None:
        return None, ()
    lines = location.chain()
    own = [i for i, line in enumerate(lines) if i == len(lines) - 1 or not _under(line.file, system)]
    reached_from = tuple(CallSite(_source(lines[outer]), any(line.called for line in lines[inner:outer]))
                         for inner, outer in zip(own, own[1:]))
    return _source(lines[own[0]]), reached_from


def _under(file: str, folders: tuple[Path, ...]) -> bool:
    path = real_path(Path(file))
    return any(path.is_relative_to(folder) for folder in folders)


def _source(location: ptx.Location) -> SourceLocation:
    return SourceLocation(location.file, location.line, location.column)


def _unique(findings: list[ptx.Finding]) -> list[ptx.Finding]:
    seen, out = set(), []
    for f in findings:
        key = (f.rule, f.location)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out
