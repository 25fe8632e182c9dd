"""Buffer declarations in the declaration pass: `buffer NAME: TYPE[SHAPE] = INIT`, with the
element type (or a constant naming one), the shape, labels and the initial value checked
(PC107), a `load("file.npy")` against the file's header, a table's `addresses(...)` against the
buffers declared before it; and a buffer or a slice of one as a pointer (`buffer_pointer`)."""

from __future__ import annotations

import math

import numpy as np

from ...dsl import Span, ast
from ...dsl.source import open_regular, real_path
from ...wording import counted
from ..codes import PC107, PC206
from ..consteval import Value, literal, representable
from ..diagnostics import Edit, Fix
from ..kernel_analysis import SCALAR_CODES
from ..model import ADDRESS, BUFFER_DTYPES, DTYPES, Buffer, Init, InitKind, PointerArg, Qualifier
from .context import Context, Env
from .files import ProjectFiles
from .scope import Abort, BufferSymbol, ConstSymbol, InvalidSymbol, LoadedModule
from .spelling import did_you_mean

# element types as a kernel's C spells them, for a declaration that does too (`float[N]`)
C_ELEMENT_TYPES = {**{ctype: name for ctype, _, name in SCALAR_CODES if " " not in ctype and name in BUFFER_DTYPES},
                   "half": "f16", "__half": "f16", "__nv_bfloat16": "bf16", "int32_t": "i32", "uint32_t": "u32",
                   "int64_t": "i64", "uint64_t": "u64", "uint8_t": "u8", "unsigned": "u32"}
MAX_BUFFER_BYTES = 1 << 40  # 1 TiB: more than any GPU holds (an H200 has 141 GB)
INT64_MAX = (1 << 63) - 1
# initial values by what the declaration writes: a bare word, or a call (with its arity)
_BARE: dict[str, InitKind] = {"zeros": "zeros", "uninit": "uninit"}
_CALLS: dict[str, tuple[InitKind, int]] = {"fill": ("fill", 1), "uniform": ("uniform", 2),
                                           "normal": ("normal", 2), "load": ("load", 1)}
_ADDRESSES = "addresses"


def declare_buffer(ctx: Context, files: ProjectFiles, module: LoadedModule, decl: ast.BufferDecl) -> Buffer:
    """A buffer declaration's buffer: its element type, shape, labels and initial value."""
    type_name = decl.dtype.text
    symbol = module.scope.get(type_name)
    if isinstance(symbol, ConstSymbol) and isinstance(symbol.value, str):
        type_name = symbol.value  # `const DT = "bf16"`: a type chosen by a constant (`-D`)
        if symbol.live is not None:
            ctx.live.read(symbol.live, "a buffer's element type", decl.dtype.span)
    dtype = ADDRESS if type_name == ADDRESS.name else DTYPES.get(type_name)
    if dtype is None or type_name not in (*BUFFER_DTYPES, ADDRESS.name):
        named = f" (`{type_name}`)" if type_name != decl.dtype.text else ""
        c_type = C_ELEMENT_TYPES.get(type_name)
        hint = (f"`{type_name}` is the C spelling; buffers are declared `{c_type}`" if c_type
                else "element types: " + ", ".join(BUFFER_DTYPES) + "; `ptr` for a table of addresses")
        fixes = ((Fix(f"Change to `{c_type}`", (Edit(decl.dtype.span, c_type),)),) if c_type and not named
                 else did_you_mean(decl.dtype.text, [*BUFFER_DTYPES, ADDRESS.name], "element types", decl.dtype.span).fixes)
        ctx.sink.add(PC107, f"unknown element type `{decl.dtype.text}`{named}", decl.dtype.span, hint, fixes=fixes)
        raise Abort
    shape = tuple(ctx.integer(module, {}, d, "a dimension", use="a buffer's dimension") for d in decl.shape)
    for dim, expr in zip(shape, decl.shape):
        if dim <= 0:
            ctx.sink.add(PC107, f"dimension {dim} is not positive", expr.span,
                         "every dimension must be at least 1")
            raise Abort
    count = int(np.prod(shape, dtype=object))
    if count > INT64_MAX:
        ctx.sink.add(PC107, f"the shape holds {count} elements, more than a 64-bit count "
                     "can hold", decl.span, "a buffer's element count must fit in int64")
        raise Abort
    if count * dtype.size > MAX_BUFFER_BYTES:
        ctx.sink.add(PC107, f"`{decl.name.text}` takes {count * dtype.size} bytes, more than "
                     f"the {MAX_BUFFER_BYTES} (1 TiB) any device holds", decl.span,
                     "split the data, or keep it on the host and stream it in")
        raise Abort
    labels = tuple(label.text for label in decl.labels)
    if len(labels) > count:
        ctx.sink.add(PC107, f"{counted(len(labels), 'label')} for {counted(count, 'element')}",
                     decl.labels[count].span, "give at most one label per element")
        raise Abort
    if labels and not decl.mapped:
        ctx.sink.add(PC107, "labels name the elements piperun reads back, so they need a "
                     "`mapped` buffer", decl.labels[0].span, "add `mapped` or drop the labels")
        raise Abort
    if dtype is ADDRESS and decl.replicated:
        ctx.sink.add(PC107, "a table of addresses holds this process's own addresses, which differ "
                     "between ranks", decl.span, "drop `replicated`")
        raise Abort
    init = _init(ctx, files, module, decl, dtype, shape)
    if (dtype is ADDRESS) != (init.kind == "addresses"):
        ctx.sink.add(PC107, "a `ptr` buffer holds the addresses of buffers, and only it does",
                     decl.init.span if decl.init is not None and dtype is not ADDRESS else decl.span,
                     "declare a table of addresses as `buffer NAME: ptr[N] = addresses(a, b[0:64], ...)`")
        raise Abort
    return Buffer(decl.name.text, dtype, shape, decl.mapped, labels, init, decl.span, decl.replicated)


def _init(ctx: Context, files: ProjectFiles, module: LoadedModule, decl: ast.BufferDecl, dtype,
          shape) -> Init:
    """The initial value: zeros (also without one), uninit, fill, uniform, normal or load."""
    expr = decl.init
    if expr is None:
        return Init("zeros")
    hint = ("initial values: zeros, uninit, fill(v), uniform(lo, hi, seed=s), normal(mean, std, seed=s), "
            "load(\"file.npy\"); addresses(a, b, ...) for a `ptr` table")
    if isinstance(expr, ast.Name) and expr.ident.text in _BARE:
        return Init(_BARE[expr.ident.text])
    if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name)):
        fixes = did_you_mean(expr.ident.text, _BARE, "initial values", expr.span).fixes \
            if isinstance(expr, ast.Name) else ()
        ctx.sink.add(PC107, f"`{expr.span.text}` is not an initial value", expr.span, hint, fixes=fixes)
        raise Abort
    if expr.func.ident.text == _ADDRESSES:
        return _addresses(ctx, module, expr, int(np.prod(shape, dtype=object)))
    if expr.func.ident.text not in _CALLS:
        ctx.sink.add(PC107, f"unknown initial value `{expr.func.ident.text}`", expr.func.span, hint,
                     fixes=did_you_mean(expr.func.ident.text, [*_CALLS, _ADDRESSES], "initial values",
                                        expr.func.span).fixes)
        raise Abort
    kind, arity = _CALLS[expr.func.ident.text]
    if len(expr.args) != arity:
        ctx.sink.add(PC107, f"`{kind}` takes {counted(arity, 'argument')}", expr.span, hint)
        raise Abort
    args = tuple(ctx.const(module, a, use="a buffer's initial value") for a in expr.args)
    seed = _seed(ctx, module, expr, kind, hint)
    if kind == "load":
        return _load_init(ctx, files, module, expr, args[0], dtype, shape)
    for value, arg in zip(args, expr.args):
        if isinstance(value, (bool, str)):
            ctx.sink.add(PC107, f"`{kind}` needs numbers, found `{literal(value)}`", arg.span, hint)
            raise Abort
    if kind == "fill":
        problem = representable(args[0], dtype)
        if problem:
            ctx.sink.add(PC107, f"fill value {problem}", expr.args[0].span,
                         f"choose a value that fits `{dtype.name}`")
            raise Abort
    else:
        _check_random(ctx, kind, args, expr, dtype)
    return Init(kind, args, seed)


def _seed(ctx: Context, module: LoadedModule, expr: ast.Call, kind: str, hint: str) -> int:
    """The `seed=` of `uniform` and `normal` (0 without one), an unsigned 64-bit integer."""
    seed = 0
    for keyword in expr.keywords:
        if keyword.name.text != "seed" or kind in ("fill", "load"):
            ctx.sink.add(PC107, f"`{kind}` takes no argument `{keyword.name.text}`",
                         keyword.span, hint)
            raise Abort
        seed = ctx.integer(module, {}, keyword.value, "a seed", use="a buffer's seed")
        if not 0 <= seed < 1 << 64:
            ctx.sink.add(PC107, f"seed {seed} is outside 0 to 2**64 - 1", keyword.value.span,
                         "seeds are unsigned 64-bit integers")
            raise Abort
    return seed


def _check_random(ctx: Context, kind: str, args: tuple, expr: ast.Call, dtype) -> None:
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
        ctx.sink.add(PC107, problem[0], problem[1], f"the buffer is `{dtype.name}`; "
                     "uniform(lo, hi) needs lo < hi, normal(mean, std) needs std >= 0")
        raise Abort


def _load_init(ctx: Context, files: ProjectFiles, module: LoadedModule, expr: ast.Call, value: Value,
               dtype, shape) -> Init:
    if not isinstance(value, str):
        ctx.sink.add(PC107, "`load` takes a path string", expr.args[0].span,
                     "write `load(\"file.npy\")`, relative to the .pipe file")
        raise Abort
    path = real_path(module.path.parent / value)
    if not files.allowed(path):
        files.refuse(value, expr.args[0].span)
        raise Abort
    try:
        with open_regular(path) as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                header = np.lib.format.read_array_header_1_0(f)
            else:  # 2.0 and 3.0 share the header layout
                header = np.lib.format.read_array_header_2_0(f)
            data_start = f.tell()
        file_shape, _, file_dtype = header
        data_bytes = path.stat().st_size - data_start
    except (OSError, ValueError) as error:
        reason = getattr(error, "strerror", None) or error
        ctx.sink.add(PC107, f"cannot read `{value}` as a .npy file: {reason}", expr.args[0].span,
                     "the path is relative to the .pipe file")
        raise Abort from None
    expected = np.dtype(dtype.numpy)
    if tuple(file_shape) != shape or np.dtype(file_dtype) != expected:
        ctx.sink.add(PC107, f"`{value}` holds {np.dtype(file_dtype)}{list(file_shape)}, the "
                     f"buffer is {dtype.name}{list(shape)}", expr.args[0].span,
                     "save the array with the buffer's shape and element type")
        raise Abort
    if data_bytes < int(np.prod(shape, dtype=object)) * expected.itemsize:
        ctx.sink.add(PC107, f"`{value}` is truncated: it holds {counted(data_bytes, 'byte')} of data, "
                     f"its header promises {int(np.prod(shape, dtype=object)) * expected.itemsize}",
                     expr.args[0].span, "save the array again")
        raise Abort
    return Init("load", (), None, path)


def _addresses(ctx: Context, module: LoadedModule, expr: ast.Call, count: int) -> Init:
    """`addresses(a, b[0:64], ...)`: one buffer (or slice) per element, each declared before
    the table; no table in a table (what a kernel loads through it would be loaded twice)."""
    hint = "name one buffer or slice per element: `addresses(w1, w2, b[0:64])`"
    if expr.keywords:
        ctx.sink.add(PC107, f"`addresses` takes no argument `{expr.keywords[0].name.text}`", expr.keywords[0].span, hint)
        raise Abort
    entries = []
    for arg in expr.args:
        base = arg.base if isinstance(arg, ast.Slice) else arg
        if not isinstance(base, ast.Name):
            ctx.sink.add(PC107, f"`{arg.span.text}` is not a buffer or a slice of one", arg.span, hint)
            raise Abort
        ctx.symbol(module, base.ident, BufferSymbol)  # an undefined name, or a constant, is reported here
        entry = buffer_pointer(ctx, module, {}, arg, None, arg.span)
        assert entry is not None  # a buffer, which ctx.symbol checked
        if entry.buffer.is_table:
            ctx.sink.add(PC107, f"`{entry.buffer.name}` is a table of addresses itself", arg.span,
                         "name the buffers it points to: pipec follows one table, not a table of tables")
            raise Abort
        entries.append(entry)
    if len(entries) != count:
        ctx.sink.add(PC107, f"the table holds {counted(count, 'address')}, `addresses` names "
                     f"{len(entries)}", expr.span, hint)
        raise Abort
    return Init("addresses", entries=tuple(entries))


def buffer_pointer(ctx: Context, module: LoadedModule, env: Env, expr: ast.Expr, qualifier: Qualifier | None,
                   span: Span) -> PointerArg | None:
    """A buffer or a slice of one, as a pointer; None for anything else (a slice outside its
    buffer is PC206)."""
    base = expr.base if isinstance(expr, ast.Slice) else expr
    if not isinstance(base, ast.Name) or base.ident.text in env:
        return None
    symbol = module.scope.get(base.ident.text)
    if isinstance(symbol, InvalidSymbol):
        raise Abort
    if not isinstance(symbol, BufferSymbol):
        return None
    buffer = symbol.buffer
    start, stop = 0, buffer.count
    if isinstance(expr, ast.Slice):
        if expr.start is not None:
            start = ctx.integer(module, env, expr.start, "a slice bound", "value")
        if expr.stop is not None:
            stop = ctx.integer(module, env, expr.stop, "a slice bound", "value")
        if not 0 <= start <= stop <= buffer.count or start == stop:
            ctx.sink.add(PC206, f"slice [{start}:{stop}] of `{buffer.name}` lies outside its "
                         f"{counted(buffer.count, 'element')}" if start != stop or start > buffer.count
                         else f"slice [{start}:{stop}] of `{buffer.name}` is empty",
                         expr.span, f"element indices run from 0 to {buffer.count}; slices are half-open")
            raise Abort
    return PointerArg(buffer, start, stop, isinstance(expr, ast.Slice), qualifier, span)
