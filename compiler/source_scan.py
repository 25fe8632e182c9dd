"""Reading a CUDA source as text: where each kernel is declared, its parameter names, and the
`/// pipec:` annotations directly above the declaration.

Types come from the compiler (see kernels.py); names and annotations only exist in the text.
A kernel declared by a function-like macro whose parameter is the kernel's name
(`#define K(name) __global__ void name(float* x)` then `K(foo)`) is found at the macro's use,
with the parameter names of the macro's body and the annotations above the use. Any other
kernel the compiler reports but the text does not show (a name pasted with `##`) has no
declaration here, and the resolver says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_GLOBAL = re.compile(r"\b__global__\b")
_WORD = re.compile(r"\s*([A-Za-z_]\w*)")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_DIRECTIVE = re.compile(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", re.M)  # with its continuation lines
_MACRO = re.compile(r"#\s*define\s+([A-Za-z_]\w*)\(([^)]*)\)")
_ANNOTATION = re.compile(r"pipec:\s*(extent|out)\s+(.*)$")
_TYPE_WORDS = {
    "const", "volatile", "unsigned", "signed", "int", "float", "double", "char", "short",
    "long", "bool", "void", "__restrict__", "__restrict", "restrict", "struct", "enum",
}


@dataclass(frozen=True)
class TextRange:
    start: int  # character offsets into the source text, end exclusive
    end: int


@dataclass(frozen=True)
class ExtentAnnotation:
    """`/// pipec: extent PARAM = EXPR`: the expression's text and where it stands."""

    param: str
    text: str
    where: TextRange


@dataclass(frozen=True)
class Declaration:
    name: str
    params: tuple[str, ...]  # parameter names as written, `argN` where a parameter has none
    where: TextRange  # the signature, or the macro use that declares the kernel
    extents: tuple[ExtentAnnotation, ...] = ()
    outputs: tuple[str, ...] = ()  # `/// pipec: out NAME, ...`
    unreadable: tuple[TextRange, ...] = ()  # `pipec:` lines that follow neither form
    macro: str | None = None  # the macro whose use declares the kernel

    def extent(self, param: str) -> ExtentAnnotation | None:
        return next((e for e in self.extents if e.param == param), None)


@dataclass(frozen=True)
class _Signature:
    name: str
    open_paren: int
    close_paren: int


@dataclass(frozen=True)
class _KernelMacro:
    name: str
    name_index: int  # which macro argument is the kernel's name
    params: tuple[str, ...]


def scan_declarations(text: str) -> dict[str, Declaration]:
    """Kernel name -> its declaration; the last declaration of a name wins."""
    plain = blank_comments(text)
    directives = [TextRange(m.start(), m.end()) for m in _DIRECTIVE.finditer(plain)]
    found: dict[str, Declaration] = {}
    for match in _GLOBAL.finditer(plain):
        if _inside(directives, match.start()):
            continue
        signature = _signature(plain, match.end())
        if signature is not None:
            start = declaration_start(plain, match.start())
            params = _param_names(plain[signature.open_paren + 1 : signature.close_paren])
            found[signature.name] = _annotated(
                text, signature.name, params, TextRange(start, signature.close_paren + 1))
    for macro in _kernel_macros(plain, directives):
        for use in re.finditer(rf"\b{macro.name}\s*\(", plain):
            if _inside(directives, use.start()):
                continue
            close = matching_paren(plain, use.end() - 1)
            args = split_params(plain[use.end() : close]) if close > 0 else []
            if len(args) <= macro.name_index or not _IDENTIFIER.fullmatch(args[macro.name_index].strip()):
                continue
            name = args[macro.name_index].strip()
            start = declaration_start(plain, use.start())
            found[name] = _annotated(text, name, macro.params, TextRange(start, close + 1), macro.name)
    return found


def _inside(ranges: list[TextRange], offset: int) -> bool:
    return any(r.start <= offset < r.end for r in ranges)


def _signature(plain: str, pos: int) -> _Signature | None:
    """The kernel name and parameter list after `__global__` at `pos`, skipping the return
    type, `__launch_bounds__(...)`, `__cluster_dims__(...)` and other qualifiers."""
    while m := _WORD.match(plain, pos):
        word, after = m.group(1), m.end()
        rest = plain[after:].lstrip()
        if word in ("__launch_bounds__", "__cluster_dims__") and rest.startswith("("):
            pos = matching_paren(plain, plain.index("(", after)) + 1
            if pos == 0:
                return None
            continue
        if rest.startswith("("):
            open_paren = plain.index("(", after)
            close = matching_paren(plain, open_paren)
            return _Signature(word, open_paren, close) if close >= 0 else None
        pos = after
    return None


def _kernel_macros(plain: str, directives: list[TextRange]) -> list[_KernelMacro]:
    """Function-like macros whose body declares a kernel named by one of their parameters."""
    macros = []
    for directive in directives:
        body = plain[directive.start : directive.end].replace("\\\n", "  ")
        m = _MACRO.match(body.lstrip())
        glob = _GLOBAL.search(body)
        if m is None or glob is None:
            continue
        macro_params = [p.strip() for p in m.group(2).split(",")]
        signature = _signature(body, glob.end())
        if signature is not None and signature.name in macro_params:
            params = _param_names(body[signature.open_paren + 1 : signature.close_paren])
            macros.append(_KernelMacro(m.group(1), macro_params.index(signature.name), params))
    return macros


def _annotated(text: str, name: str, params: tuple[str, ...], where: TextRange,
               macro: str | None = None) -> Declaration:
    """A declaration with the `/// pipec: extent NAME = EXPR` and `/// pipec: out NAME[, NAME]`
    lines directly above it."""
    extents: list[ExtentAnnotation] = []
    outputs: list[str] = []
    unreadable: list[TextRange] = []
    end = where.start
    while end > 0:
        line_start = text.rfind("\n", 0, end - 1) + 1
        line = text[line_start:end].rstrip("\n")
        if not line.strip().startswith("///"):
            break
        if m := _ANNOTATION.search(line):
            offset = line_start + m.start(2)
            body = m.group(2).rstrip()
            if m.group(1) == "out":
                outputs += _IDENTIFIER.findall(body)
            elif em := re.match(r"([A-Za-z_]\w*)\s*=\s*(.+)$", body):
                start = offset + em.start(2)
                extents.append(ExtentAnnotation(em.group(1), em.group(2),
                                                TextRange(start, start + len(em.group(2)))))
            else:
                unreadable.append(TextRange(offset, offset + len(body)))
        elif "pipec:" in line:
            unreadable.append(TextRange(line_start + line.index("pipec:"), line_start + len(line)))
        end = line_start
    return Declaration(name, params, where, tuple(extents), tuple(outputs), tuple(unreadable), macro)


def blank_comments(text: str) -> str:
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


def matching_paren(text: str, open_index: int) -> int:
    """The index of the `)` closing the `(` at `open_index`, or -1."""
    depth = 0
    for i in range(open_index, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


def split_params(params: str) -> list[str]:
    """A parameter (or argument) list split at its top-level commas; `(void)` is empty."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
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


def _param_names(params: str) -> tuple[str, ...]:
    return tuple(param_name(p, i) for i, p in enumerate(split_params(params)))


def param_name(param: str, index: int) -> str:
    """The declared name of one parameter (`argN` when it has none, as in `float*`)."""
    declarator = re.sub(r"\[[^\]]*\]", "", param.split("=")[0])  # `float x[4]` names x
    words = _IDENTIFIER.findall(declarator)
    meaningful = [w for w in words if w not in _TYPE_WORDS]
    if len(words) >= 2 and meaningful and words[-1] not in _TYPE_WORDS \
            and not declarator.rstrip().endswith(("*", "&")):
        return words[-1]
    return f"arg{index}"


def declaration_start(plain: str, keyword_index: int) -> int:
    """Where the declaration around `keyword_index` starts: the start of its line when only
    `extern "C"` precedes it there or alone on the line above, else the keyword itself."""
    line_start = plain.rfind("\n", 0, keyword_index) + 1
    prefix = plain[line_start:keyword_index].strip()
    if prefix in ("", 'extern "C"'):
        previous_start = plain.rfind("\n", 0, max(line_start - 1, 0)) + 1
        if prefix == "" and plain[previous_start:line_start].strip() == 'extern "C"':
            return previous_start
        return line_start
    return keyword_index
