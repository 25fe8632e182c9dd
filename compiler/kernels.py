"""What the compiler knows about a CUDA source: its kernels' signatures as the compiler sees
them, their launch bounds, and what their PTX does that the graph-safety rules forbid.

Signatures come from the compiler itself: a probe appended to the source encodes each
parameter's type (after macros, typedefs and includes) into a device array, and the PTX gives
it back. Parameter names and `/// pipec:` annotations come from the source text. Results are
cached by the content of the source and its includes, the options, the target and the
compiler's version.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache as memoize
from pathlib import Path

import jinja2

from . import cache, ptx
from .toolchain import CompileRequest

ANALYSIS_VERSION = "ptx-5"  # bump when the analysis output format or meaning changes

POINTER_BIT = 0x100
CONST_BIT = 0x200
UNSUPPORTED = 0xFFF
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

_TYPE_WORDS = {
    "const", "volatile", "unsigned", "signed", "int", "float", "double", "char", "short",
    "long", "bool", "void", "__restrict__", "__restrict", "restrict", "struct",
}
_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
_GLOBAL = re.compile(r"\b__global__\b")
_ANNOTATION = re.compile(r"pipec:\s*(extent|out)\s+(.*)$")


@dataclass(frozen=True)
class SourceAnalysis:
    path: Path
    key: str
    kernels: dict[str, dict]  # kernel name -> JSON-ready description (see _describe_kernel)
    mangled: tuple[str, ...]  # entries that are not extern "C" (C++ names)


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
                candidate = (folder / name).resolve()
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
    parts += [str(d) for d in include_dirs]
    return cache.digest(*parts)


def analyze(path: Path, include_dirs: tuple[Path, ...], toolchain, arch: str) -> SourceAnalysis:
    """Signatures and PTX findings of every kernel in `path` (raises CompileFailed)."""
    path = path.resolve()
    key = source_key(path, include_dirs, toolchain, arch, "analysis")
    if (cached := cache.load("analysis", key)) is not None:
        data = json.loads(cached)
        return SourceAnalysis(path, key, data["kernels"], tuple(data["mangled"]))
    text = path.read_text(errors="replace")
    dirs = (path.parent, *include_dirs)
    module = ptx.parse(toolchain.compile(CompileRequest(text, str(path), dirs, arch, "ptx")).decode())
    entries = [e for e in module.entries if not e.name.startswith("_Z")]
    probe_source = text + "\n" + _probe_template().render(
        scalar_codes=[(c, code) for c, code, _ in SCALAR_CODES], half_code=HALF_CODE,
        bfloat16_code=BFLOAT16_CODE, pointer_bit=POINTER_BIT, const_bit=CONST_BIT,
        unsupported_code=UNSUPPORTED,
        kernels=[{"name": e.name, "max_params": e.params} for e in entries],
    )
    probe = ptx.parse(toolchain.compile(CompileRequest(probe_source, str(path), dirs, arch, "ptx")).decode())
    declarations = scan_declarations(text)
    kernels = {
        e.name: _describe_kernel(e, probe.globals.get(f"pipec_sig_{e.name}", [0]),
                                 declarations.get(e.name), module)
        for e in entries
    }
    mangled = tuple(e.name for e in module.entries if e.name.startswith("_Z"))
    cache.store("analysis", key, json.dumps({"kernels": kernels, "mangled": mangled}).encode())
    return SourceAnalysis(path, key, kernels, mangled)


def compile_cubin(path: Path, include_dirs: tuple[Path, ...], toolchain, arch: str) -> bytes:
    """The cubin of a kernel source for one `sm_XY` target, from the cache when possible."""
    path = path.resolve()
    key = source_key(path, include_dirs, toolchain, arch, "cubin")
    if (cached := cache.load("cubin", key)) is not None:
        return cached
    request = CompileRequest(path.read_text(), str(path), (path.parent, *include_dirs), arch, "cubin")
    binary = toolchain.compile(request)
    cache.store("cubin", key, binary)
    return binary


def compile_generated_cubin(name: str, source: str, toolchain, arch: str) -> bytes:
    """The cubin of compiler-generated code (copy and fill kernels)."""
    key = cache.digest(ANALYSIS_VERSION, toolchain.name, toolchain.version, arch, name, source)
    if (cached := cache.load("cubin", key)) is not None:
        return cached
    binary = toolchain.compile(CompileRequest(source, name, (), arch, "cubin"))
    cache.store("cubin", key, binary)
    return binary


def _describe_kernel(entry: ptx.Function, words: list[int], decl: dict | None, module: ptx.PtxModule) -> dict:
    count, codes = (words[0], words[1 : 1 + words[0]]) if words else (0, [])
    names = decl["params"] if decl and len(decl["params"]) == count else [f"arg{i}" for i in range(count)]
    annotations = decl["annotations"] if decl else {}
    params = []
    for index, (code, name) in enumerate(zip(codes, names)):
        params.append(_describe_param(index, code, name, annotations))
    findings = [
        {
            "rule": f.rule, "instruction": f.instruction,
            "location": [f.location.file, f.location.line, f.location.column] if f.location else None,
            "inlined_at": [f.inlined_at.file, f.inlined_at.line, f.inlined_at.column] if f.inlined_at else None,
        }
        for f in _unique(module.findings(entry.name))
    ]
    writes = module.writes(entry.name)
    written = [  # per parameter: yes | no | unknown, and where
        [status.value, [where.file, where.line, where.column] if where else None]
        for status, where in (writes.get(index, (ptx.Written.UNKNOWN, None)) for index in range(len(params)))
    ]
    return {
        "params": params, "max_threads": entry.max_threads, "findings": findings, "written": written,
        "decl": decl["span"] if decl else None,
        "unknown_annotations": [a for a in annotations.get("_unknown", [])],
    }


def _describe_param(index: int, code: int, name: str, annotations: dict) -> dict:
    pointer = bool(code & POINTER_BIT) and code != UNSUPPORTED
    base = code & 0xFF
    ctype, dtype = _CODE_TO_TYPE.get(base, ("?", None))
    if code == UNSUPPORTED or (not pointer and (base == 0 or ctype == "void")):
        kind, dtype, ctype = "unsupported", None, "a type pipec cannot bind"
    elif pointer:
        kind = "pointer"
        ctype = ("const " if code & CONST_BIT else "") + ("struct" if base == 0 else ctype) + "*"
        if base == 0:
            kind, dtype = "unsupported", None
    else:
        kind = "scalar"
    return {
        "index": index, "name": name, "kind": kind, "dtype": dtype, "ctype": ctype,
        "const": bool(code & CONST_BIT), "write_only": name in annotations.get("out", {}),
        "extent": annotations.get("extent", {}).get(name),
    }


def _unique(findings: list[ptx.Finding]) -> list[ptx.Finding]:
    seen, out = set(), []
    for f in findings:
        key = (f.rule, f.location)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


# --- reading the source text ------------------------------------------------------------------


def _blank_comments(text: str) -> str:
    """The text with comments replaced by spaces (offsets and newlines kept)."""
    out, i, n = list(text), 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out[i:j] = " " * (j - i)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out[i:j] = [c if c == "\n" else " " for c in text[i:j]]
            i = j
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"' and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        else:
            i += 1
    return "".join(out)


def _matching_paren(text: str, open_index: int) -> int:
    depth = 0
    for i in range(open_index, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _split_params(params: str) -> list[str]:
    parts, depth, current = [], 0, []
    for ch in params:
        if ch in "([<":
            depth += 1
        elif ch in ")]>":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if "".join(current).strip():
        parts.append("".join(current))
    return [p for p in parts if p.strip() and p.strip() != "void"]


def _param_name(param: str, index: int) -> str:
    words = re.findall(r"[A-Za-z_]\w*", param.split("=")[0])
    meaningful = [w for w in words if w not in _TYPE_WORDS]
    if len(words) >= 2 and meaningful and words[-1] not in _TYPE_WORDS and not param.rstrip().endswith("*"):
        return words[-1]
    return f"arg{index}"


def scan_declarations(text: str) -> dict[str, dict]:
    """Kernel name -> parameter names, signature span and `/// pipec:` annotations."""
    plain = _blank_comments(text)
    found: dict[str, dict] = {}
    for match in _GLOBAL.finditer(plain):
        pos = match.end()
        while True:  # skip `void`, `__launch_bounds__(...)` and other qualifiers
            m = re.compile(r"\s*([A-Za-z_]\w*)").match(plain, pos)
            if not m:
                break
            word = m.group(1)
            after = m.end()
            if word == "__launch_bounds__":
                close = _matching_paren(plain, plain.index("(", after))
                pos = close + 1
                continue
            rest = plain[after:].lstrip()
            if rest.startswith("("):
                open_index = plain.index("(", after)
                close = _matching_paren(plain, open_index)
                if close < 0:
                    break
                params = _split_params(plain[open_index + 1 : close])
                start = _declaration_start(plain, match.start())
                found[word] = {
                    "params": [_param_name(p, i) for i, p in enumerate(params)],
                    "span": [start, close + 1],
                    "annotations": _annotations(text, start),
                }
                break
            pos = after
    return found


def _declaration_start(plain: str, global_index: int) -> int:
    line_start = plain.rfind("\n", 0, global_index) + 1
    prefix = plain[line_start:global_index].strip()
    if prefix in ("", 'extern "C"'):
        previous_start = plain.rfind("\n", 0, max(line_start - 1, 0)) + 1
        if prefix == "" and plain[previous_start : line_start].strip() == 'extern "C"':
            return previous_start
        return line_start
    return global_index


def _annotations(text: str, decl_start: int) -> dict:
    """`/// pipec: extent NAME = EXPR` and `/// pipec: out NAME[, NAME]` lines directly above
    the declaration."""
    result: dict = {"extent": {}, "out": {}, "_unknown": []}
    end = decl_start
    while end > 0:
        line_start = text.rfind("\n", 0, end - 1) + 1
        line = text[line_start : end].rstrip("\n")
        if not line.strip().startswith("///"):
            break
        if m := _ANNOTATION.search(line):
            offset = line_start + m.start(2)
            body = m.group(2).rstrip()
            if m.group(1) == "out":
                for name_match in re.finditer(r"[A-Za-z_]\w*", body):
                    result["out"][name_match.group(0)] = [offset + name_match.start(), offset + name_match.end()]
            elif em := re.match(r"([A-Za-z_]\w*)\s*=\s*(.+)$", body):
                expr_start = offset + em.start(2)
                result["extent"][em.group(1)] = {
                    "text": em.group(2), "start": expr_start, "end": expr_start + len(em.group(2)),
                }
            else:
                result["_unknown"].append([offset, offset + len(body)])
        elif "pipec:" in line:
            at = line_start + line.index("pipec:")
            result["_unknown"].append([at, line_start + len(line)])
        end = line_start
    return result
