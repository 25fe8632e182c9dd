"""The syntax tree of a `.pipe` file: one frozen class per grammar construct, each with its span.

Nothing here knows what a name means; that starts in `pipec.compiler.resolve`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from .source import Span


@dataclass(frozen=True)
class Ident:
    text: str
    span: Span


# --- expressions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class IntLit:
    value: int
    span: Span


@dataclass(frozen=True)
class FloatLit:
    value: float
    span: Span


@dataclass(frozen=True)
class BoolLit:
    value: bool
    span: Span


@dataclass(frozen=True)
class StrLit:
    value: str
    span: Span


@dataclass(frozen=True)
class NullLit:
    span: Span


@dataclass(frozen=True)
class StepRef:
    """The `step` index: a value that changes every step, so never a constant."""

    span: Span


@dataclass(frozen=True)
class Name:
    ident: Ident
    span: Span


@dataclass(frozen=True)
class Unary:
    op: str
    operand: Expr
    span: Span


@dataclass(frozen=True)
class Binary:
    op: str
    left: Expr
    right: Expr
    span: Span


@dataclass(frozen=True)
class Keyword:
    name: Ident
    value: Expr
    span: Span


@dataclass(frozen=True)
class Call:
    func: Expr
    args: tuple[Expr, ...]
    keywords: tuple[Keyword, ...]
    span: Span


@dataclass(frozen=True)
class Index:
    base: Expr
    index: Expr
    span: Span


@dataclass(frozen=True)
class Slice:
    base: Expr
    start: Expr | None
    stop: Expr | None
    span: Span


@dataclass(frozen=True)
class Attribute:
    base: Expr
    name: Ident
    span: Span


@dataclass(frozen=True)
class TupleLit:
    items: tuple[Expr, ...]
    span: Span


Expr = Union[
    IntLit, FloatLit, BoolLit, StrLit, NullLit, StepRef, Name, Unary, Binary, Call, Index,
    Slice, Attribute, TupleLit,
]


# --- statements inside blocks -----------------------------------------------------------------


@dataclass(frozen=True)
class Arg:
    access: str | None  # "in", "out", "inout" or None
    value: Expr
    span: Span


@dataclass(frozen=True)
class Launch:
    kernel: Ident
    grid: Expr
    block: Expr
    shared_bytes: Expr | None
    args: tuple[Arg, ...]
    span: Span


@dataclass(frozen=True)
class Fill:
    target: Expr
    value: Expr
    span: Span


@dataclass(frozen=True)
class Copy:
    src: Expr
    dst: Expr
    span: Span


@dataclass(frozen=True)
class For:
    var: Ident
    start: Expr
    stop: Expr
    body: Block
    span: Span


@dataclass(frozen=True)
class If:
    cond: Expr
    then: Block
    orelse: Block | If | None
    span: Span


@dataclass(frozen=True)
class Parallel:
    body: Block | For
    span: Span


@dataclass(frozen=True)
class GraphCall:
    name: Ident
    args: tuple[Expr, ...]
    span: Span


@dataclass(frozen=True)
class Case:
    value: Expr
    body: Block
    span: Span


@dataclass(frozen=True)
class Switch:
    """`switch FLAG { case 0 { } ... }`: a device branch on one integer buffer element."""

    flag: Expr
    cases: tuple[Case, ...]
    span: Span


@dataclass(frozen=True)
class DeviceLoop:
    """`every N { }`, `while FLAG { }` or `repeat K { }`: device-side control flow."""

    kind: str  # every | while | repeat
    operand: Expr  # the period N, the flag, or the count K
    body: Block
    span: Span


@dataclass(frozen=True)
class Gemm:
    """`gemm TARGET = EXPR with NAME = VALUE, ...`: one library matrix multiply. The
    expression and the options keep their syntax; compiler/resolve/gemm.py reads them."""

    target: Expr
    value: Expr
    options: tuple[Keyword, ...]
    span: Span


@dataclass(frozen=True)
class Collective:
    """`allreduce OP BUF, ...`, `broadcast BUF, ... from ROOT`, `allgather SRC -> DST` or
    `reducescatter OP SRC -> DST`: one NCCL collective over every rank (a group of them, one
    per view, for several views of allreduce or broadcast)."""

    kind: str  # allreduce | broadcast | allgather | reducescatter
    op: Ident | None  # the reduction (allreduce, reducescatter), as written
    views: tuple[Expr, ...]  # the buffers (allreduce, broadcast: in place, one or more) or the one source
    dst: Expr | None  # allgather, reducescatter
    root: Expr | None  # broadcast
    span: Span


Stmt = Union[Launch, Fill, Copy, For, If, Parallel, GraphCall, Switch, DeviceLoop, Gemm,
             Collective]


@dataclass(frozen=True)
class Block:
    stmts: tuple[Stmt, ...]
    span: Span


# --- top-level declarations ---------------------------------------------------------------------


@dataclass(frozen=True)
class Import:
    """`import "f"` (names is None) or `from "f" import a, b`, either with
    `with (NAME = EXPR, ...)`: values for constants the imported file declares."""

    path: StrLit
    names: tuple[Ident, ...] | None
    span: Span
    bindings: tuple[Keyword, ...] = ()


@dataclass(frozen=True)
class ConstDecl:
    name: Ident
    value: Expr
    span: Span


@dataclass(frozen=True)
class BufferDecl:
    name: Ident
    dtype: Ident
    shape: tuple[Expr, ...]
    mapped: bool
    labels: tuple[Ident, ...]
    init: Expr | None
    span: Span
    replicated: bool = False  # declared the same on every rank (docs/distributed.md)


@dataclass(frozen=True)
class GraphDecl:
    name: Ident
    params: tuple[Ident, ...]
    body: Block
    span: Span


@dataclass(frozen=True)
class StepDecl:
    body: Block
    span: Span


@dataclass(frozen=True)
class InitDecl:
    body: Block
    span: Span


@dataclass(frozen=True)
class OptionDecl:
    name: Ident
    value: Expr
    span: Span


@dataclass(frozen=True)
class WaiveDecl:
    """`waive RULE for KERNEL: "reason"`, or `for "file.cu":KERNEL` naming the kernel source."""

    rule: Ident
    kernel: Ident
    reason: StrLit
    span: Span
    file: StrLit | None = None


Decl = Union[
    Import, ConstDecl, BufferDecl, GraphDecl, StepDecl, InitDecl, OptionDecl, WaiveDecl,
]


@dataclass(frozen=True)
class Module:
    decls: tuple[Decl, ...]
    span: Span
