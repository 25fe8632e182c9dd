"""Where the memory accesses of one PTX function go: memory other blocks can write (global, and a
generic address of unknown origin), or memory of the block and the thread (shared, local, a
barrier's reduction), resolved to a cell as finely as the addresses allow.

An address's origins are found by data flow over the registers (flow-insensitive, so a pointer
a loop moves keeps them): a symbol (`mov.u32 %r1, smem;`, `[smem+4]`; NVRTC names every
`__shared__` variable and the local frame `__local_depot`), a parameter of a device function
(memory the caller passes), or a kernel's parameter (global memory), each at a constant offset
while it stays constant; `cvta` says which space a generic address is in, and a value loaded
from memory may point anywhere. `add`, `sub` and `mad` keep a symbol's or a parameter's origin
and drop the others (a symbol plus a loaded index still points into the symbol); `selp` and
the bitwise operations keep them all. An access points where all its origins agree (two
different symbols: some shared memory; shared and global: anywhere).

A cell is ("shared", symbol, word) (None for what is not known: ("shared", None, None) is any
shared memory; an access at a known offset covers the 4-byte words its width reaches, so a
`.v4` store and a byte load of one of its words meet), ("local", word) of the function's own frame, ("param", i) for the memory a
device function's parameter i points to (the caller's local or shared memory, or global),
("any",) for an address of unknown origin, and ("barrier", function, key) for a barrier
reduction (`bar.red`, `__syncthreads_or`), whose result combines what every thread of the block
passes at it. Loads of global memory are polls: `ordered` (volatile, relaxed, acquire, `.cv`:
re-read each time by definition) or `plain`; a generic load of unknown origin is a poll and a
read of ("any",). Read-only loads (`ld.global.nc`, `ldu`, `.const`) are neither.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import reduce

from .ir import Function, Instruction, destinations, registers

Cell = tuple  # ("shared", symbol, offset) | ("local", offset) | ("param", i) | ("any",) | ("barrier", f, key)
ANY: Cell = ("any",)
_ORDERED = {"volatile", "relaxed", "acquire", "cv"}
_ADDRESS = re.compile(r"^\[\s*([%\w$.]+)\s*(?:([+-])\s*(0[xX][0-9a-fA-F]+|\d+))?\s*[],]")
_SYMBOL = re.compile(r"^[A-Za-z_$][\w$]*$")
_ZERO = re.compile(r"^(0[xX]0+|0+|0[fFdD][08]0*)$")  # 0, 0x0, 0f00000000 and -0.0 as 0f80000000
_ADVANCING = ("add", "sub", "inc", "dec")
_ARITHMETIC = ("add", "sub", "mad", "selp", "and", "or", "xor")  # keep an address's origins


@dataclass(frozen=True)
class Base:
    """Where an address points: what all its origins have in common."""

    space: str | None  # shared | local | global | const, None where a generic address keeps it open
    root: str | int | None  # a symbol, a device function's parameter index, None: unknown
    offset: int | None

    def join(self, other: Base) -> Base:
        same_root = self.root == other.root
        return Base(self.space if self.space == other.space else None, self.root if same_root else None,
                    self.offset if same_root and self.offset == other.offset else None)


Origins = dict  # (space, root) -> offset (None: not constant); {(None, None): None} is anything
UNKNOWN: Origins = {(None, None): None}


def _rooted(key: tuple) -> bool:
    """Whether an origin is a variable or a parameter, not a space alone or anything."""
    return key[1] is not None


def _shifted(origins: Origins, by: int | None) -> Origins:
    return {key: None if by is None or offset is None else offset + by for key, offset in origins.items()}


@dataclass(frozen=True)
class Access:
    """What one instruction does to memory."""

    reads: tuple[Cell, ...]  # block or thread memory its result depends on
    writes: tuple[Cell, ...]  # block or thread memory it writes
    poll: str | None  # ordered | plain: it reads memory other blocks can write
    address: tuple[str, ...]  # registers of the address
    data: tuple[str, ...]  # registers of what it writes (or passes, for a barrier)
    modifies: bool = False  # what it writes depends on what was there (an atomic, a reduction)
    advances: bool = False  # an atomic add or increment: it moves the memory it polls itself


def _space(parts: list[str]) -> str | None:
    """The first state space among an opcode's parts."""
    for part in parts:
        for space in ("shared", "local", "global", "param", "const"):
            if part == space or part.startswith(space + "::"):
                return space
    return None


def _zero(text: str) -> bool:
    return bool(_ZERO.match(text.strip()))


def _number(text: str) -> int | None:
    try:
        return int(text, 0)
    except ValueError:
        return None


class Bases:
    """The origins of every register of one function that may hold an address: passes in
    program order until nothing changes (a pointer a loop moves comes round once more)."""

    def __init__(self, function: Function) -> None:
        self.function = function
        self.of: dict[str, Origins] = {}
        self._own_param = re.compile(re.escape(function.name) + r"_param_(\d+)")
        changed = True
        while changed:
            changed = False
            for instruction in function.instructions:
                origins = self._computed(instruction)
                if origins:
                    for register in destinations(function, instruction):
                        changed |= _merge(self.of.setdefault(register, {}), origins)

    def base(self, *registers: str) -> Base | None:
        """Where the registers point, together."""
        merged: Origins = {}
        for register in registers:
            _merge(merged, self.of.get(register, {}))
        return _resolved(merged)

    def operand(self, operand: str) -> Base | None:
        """Where an address operand points: `[%rd1+8]`, `[smem+4]`, `[%rd1, {%r1, %r2}]`."""
        m = _ADDRESS.match(operand.strip())
        if not m:
            return None
        name, sign, amount = m.groups()
        offset = int(sign + amount, 0) if amount else 0
        return _resolved(_shifted(self._origins(name), offset))

    def _origins(self, operand: str) -> Origins:
        """A register's origins, or a variable's own address."""
        if operand.startswith("%") or operand in self.function.registers:
            return self.of.get(operand, {})
        return {(None, operand): 0} if _SYMBOL.match(operand) else {}

    def _computed(self, instruction: Instruction) -> Origins | None:
        parts = instruction.opcode.split(".")
        head, operands = parts[0], instruction.operands
        if len(operands) < 2:
            return None
        if head == "ld" and "param" in parts:
            if m := self._own_param.search(operands[1]):
                return {("global", None): None} if self.function.is_entry else {(None, int(m.group(1))): 0}
            return UNKNOWN if "retval" in operands[1] else None  # a call's result, or a constant
        if head in ("ld", "ldu", "atom", "suld") or instruction.opcode.startswith("multimem.ld_reduce"):
            return UNKNOWN  # a value from memory may be any pointer
        if head == "cvta":
            return {(_space(parts), root): offset for (_, root), offset in self._origins(operands[1]).items()}
        if head in ("mov", "cvt"):
            return self._origins(operands[1])
        if head not in _ARITHMETIC:
            return None  # an index, a predicate: no address
        named = operands[3:] if head == "mad" else operands[1:]  # `mad`: a * b is the index
        found = [origins for o in named if (origins := self._origins(o))]
        merged: Origins = {}
        for origins in found:
            _merge(merged, origins)
        if head in ("add", "sub", "mad") and any(_rooted(key) for key in merged):
            merged = {key: offset for key, offset in merged.items() if _rooted(key)}  # pointer plus index
        return _shifted(merged, self._step(head, operands, len(found)))

    @staticmethod
    def _step(head: str, operands: tuple[str, ...], based: int) -> int | None:
        """How far an instruction moves an address: `selp` not at all, `add`/`sub` by a
        constant; None: by an unknown amount."""
        if head == "selp":
            return 0
        if head in ("add", "sub") and based == 1 and len(operands) == 3:
            amount = _number(operands[2])
            if amount is None and head == "add":
                amount = _number(operands[1])
            if amount is not None:
                return -amount if head == "sub" else amount
        return None


def _merge(into: Origins, origins: Origins) -> bool:
    """Add origins, an origin met at two offsets becoming one at an unknown offset; whether
    anything changed."""
    changed = False
    for key, offset in origins.items():
        if key not in into:
            into[key] = offset
            changed = True
        elif into[key] is not None and into[key] != offset:
            into[key] = None
            changed = True
    return changed


def _resolved(origins: Origins) -> Base | None:
    bases = [Base(space, root, offset) for (space, root), offset in origins.items()]
    return reduce(Base.join, bases) if bases else None


def access(function: Function, instruction: Instruction, bases: Bases) -> Access | None:
    """The memory an instruction reads or writes, None when it touches none that matters here
    (registers only, a kernel's parameters, read-only memory, a call's argument list)."""
    parts = instruction.opcode.split(".")
    head, operands = parts[0], instruction.operands
    if head in ("bar", "barrier"):
        if "red" not in parts or len(operands) < 3:  # `d, a, c` at least
            return None
        key = instruction.position if head == "bar" or "aligned" in parts else operands[1]
        cell = ("barrier", function.name, key)
        return Access((cell,), (cell,), None, (), _registers(function, operands[1:]))
    space = _space(parts)
    if len(operands) < 2 or space == "param" or "prefetch" in parts:
        return None
    if head in ("ld", "ldu", "ldmatrix", "suld") or instruction.opcode.startswith("multimem.ld_reduce"):
        if space == "const" or "nc" in parts or head == "ldu":
            return None
        cells, remote = place(space, bases.operand(operands[1]), _width(parts))
        kind = "ordered" if head in ("ld", "multimem") and _ORDERED.intersection(parts) else "plain"
        return Access(cells, (), kind if remote else None, _registers(function, operands[1:2]), ())
    if head in ("st", "stmatrix", "red", "atom"):
        at = 1 if head == "atom" else 0
        cells, remote = place(space, bases.operand(operands[at]), _width(parts))
        modifies = head in ("red", "atom")
        advances = head == "atom" and remote and len(operands) > 2 and any(p in _ADVANCING for p in parts) \
            and not _zero(operands[2])
        return Access(cells if modifies else (), cells, "plain" if head == "atom" and remote else None,
                      _registers(function, operands[at:at + 1]), _registers(function, operands[at + 1:]),
                      modifies, advances)
    if head == "cp" and parts[1] in ("async", "reduce"):
        spaces = [s for p in parts if (s := _space([p]))]  # the destination's, then the source's
        if spaces[:1] != ["shared"]:
            return None  # a copy out to global memory
        width = _number(operands[2]) if len(operands) > 2 and "bulk" not in parts else None
        cells, _ = place("shared", bases.operand(operands[0]), width)
        copied = _registers(function, operands)  # what lands where: all of it goes into the write
        if spaces[-1] == "global":
            return Access((), cells, "plain", (), copied)
        return Access(place("shared", bases.operand(operands[1]), width)[0], cells, None, (), copied)
    return None


_TYPE = re.compile(r"(?:[bsuf]|bf)(8|16|32|64|128)(?:x(\d+))?")
_VECTOR = re.compile(r"v(\d+)")


def _width(parts: list[str]) -> int | None:
    """The bytes an access covers from its address: element type times vector length
    (`ldmatrix`/`stmatrix`: a 16-byte row per thread), None when it cannot tell."""
    if parts[0] in ("ldmatrix", "stmatrix"):
        return 16
    count, element = 1, None
    for part in parts:
        if m := _VECTOR.fullmatch(part):
            count = int(m.group(1))
        elif m := _TYPE.fullmatch(part):
            element = int(m.group(1)) // 8 * int(m.group(2) or 1)
    return None if element is None else count * element


def place(space: str | None, base: Base | None, width: int | None) -> tuple[tuple[Cell, ...], bool]:
    """The cells an address names in a space (none: global or constant memory), and whether
    other blocks can write what is there (global memory, or a generic address that may be)."""
    base = base or Base(None, None, None)
    generic = space is None
    space = space or base.space
    if space in ("global", "const"):
        return (), space == "global"
    if isinstance(base.root, int):
        return (("param", base.root),), generic and space is None
    if space in ("shared", "local") and isinstance(base.root, str):
        prefix = ("shared", base.root) if space == "shared" else ("local",)
        if base.offset is None or width is None:
            return (prefix + (None,),), False
        first, last = base.offset // 4, (base.offset + width - 1) // 4
        return tuple(prefix + (word,) for word in range(first, last + 1)), False
    if space == "shared":
        return (("shared", None, None),), False
    return (ANY,), space is None


def _registers(function: Function, operands: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(r for operand in operands for r in registers(function, operand))
