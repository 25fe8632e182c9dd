"""Where the memory accesses of one PTX function go: memory other blocks can write (global, and a
generic address of unknown origin), or memory of the block and the thread (shared, local, a
barrier's reduction), resolved to a cell as finely as the addresses allow.

An address's base is found by data flow over the registers (flow-insensitive, so a pointer a
loop moves keeps its base): a symbol (`mov.u32 %r1, smem;`, `[smem+4]`; NVRTC names every
`__shared__` variable and the local frame `__local_depot`), a parameter of a device function
(memory the caller passes), or a kernel's parameter (global memory); `cvta` says which space a
generic address is in, address arithmetic keeps the most specific base (a symbol plus a loaded
index still points into the symbol) and a constant offset while it stays constant, and a value
loaded from memory points anywhere. Two bases that differ join to what they have in common.

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

from .ir import Function, Instruction, destinations, registers, sources

Cell = tuple  # ("shared", symbol, offset) | ("local", offset) | ("param", i) | ("any",) | ("barrier", f, key)
ANY: Cell = ("any",)
_ORDERED = {"volatile", "relaxed", "acquire", "cv"}
_ADDRESS = re.compile(r"^\[\s*([%\w$.]+)\s*(?:([+-])\s*(0[xX][0-9a-fA-F]+|\d+))?\s*[],]")
_SYMBOL = re.compile(r"^[A-Za-z_$][\w$]*$")
_ZERO = re.compile(r"^(0[xX]0+|0+|0[fFdD][08]0*)$")  # 0, 0x0, 0f00000000 and -0.0 as 0f80000000
_ADVANCING = ("add", "sub", "inc", "dec")
_ARITHMETIC = ("mov", "cvt", "add", "sub", "mad", "selp", "and", "or", "xor")  # keep an address's base


@dataclass(frozen=True)
class Base:
    space: str | None  # shared | local | global | const, None where a generic address keeps it open
    root: str | int | None  # a symbol, a device function's parameter index, None: unknown
    offset: int | None

    def rank(self) -> int:
        """How specific: a symbol, a parameter, a space alone, nothing."""
        return 3 if isinstance(self.root, str) else 2 if isinstance(self.root, int) else 1 if self.space else 0

    def join(self, other: Base | None) -> Base:
        if other is None:
            return self
        same_root = self.root == other.root
        return Base(self.space if self.space == other.space else None, self.root if same_root else None,
                    self.offset if same_root and self.offset == other.offset else None)

    def moved(self, by: int | None) -> Base:
        return Base(self.space, self.root, None if by is None or self.offset is None else self.offset + by)


UNKNOWN = Base(None, None, None)


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
    for part in parts[1:]:
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
    """The base of every register of one function that may hold an address."""

    def __init__(self, function: Function) -> None:
        self.function = function
        self.of: dict[str, Base] = {}
        self._own_param = re.compile(re.escape(function.name) + r"_param_(\d+)")
        users: dict[str, list[Instruction]] = {}
        for instruction in function.instructions:
            for register in sources(function, instruction):
                users.setdefault(register, []).append(instruction)
        pending = list(function.instructions)
        while pending:
            instruction = pending.pop()
            base = self._computed(instruction)
            if base is None:
                continue
            for register in destinations(function, instruction):
                joined = base.join(self.of.get(register))
                if self.of.get(register) != joined:
                    self.of[register] = joined
                    pending.extend(users.get(register, []))

    def operand(self, operand: str) -> Base | None:
        """The base of an address operand: `[%rd1+8]`, `[smem+4]`, `[%rd1, {%r1, %r2}]`."""
        m = _ADDRESS.match(operand.strip())
        if not m:
            return None
        name, sign, amount = m.groups()
        offset = (int(amount, 0) * (-1 if sign == "-" else 1)) if amount else 0
        base = self._value(name)
        return base.moved(offset) if base else None

    def _value(self, operand: str) -> Base | None:
        """A register's base, or a variable's own address."""
        if operand.startswith("%") or operand in self.function.registers:
            return self.of.get(operand)
        return Base(None, operand, 0) if _SYMBOL.match(operand) else None

    def _computed(self, instruction: Instruction) -> Base | None:
        parts = instruction.opcode.split(".")
        head, operands = parts[0], instruction.operands
        if head == "ld" and "param" in parts and len(operands) > 1:
            if m := self._own_param.search(operands[1]):
                return Base("global", None, None) if self.function.is_entry else Base(None, int(m.group(1)), 0)
            return UNKNOWN if "retval" in operands[1] else None  # a call's result, or a constant
        if head in ("ld", "ldu", "atom", "suld") or instruction.opcode.startswith("multimem.ld_reduce"):
            return UNKNOWN  # a value from memory may be any pointer
        if head == "cvta" and len(operands) > 1:
            source = self._value(operands[1]) or UNKNOWN
            return Base(_space(parts), source.root, source.offset)
        if head not in _ARITHMETIC or len(operands) < 2:
            return None  # an index, a predicate: no address
        if head == "mov":
            return self._value(operands[1])
        named = operands[3:4] if head == "mad" else operands[1:]  # `mad`: a * b is the index
        found = [self.of[r] for o in named for r in registers(self.function, o) if r in self.of]
        if not found:
            return None
        best = max(candidate.rank() for candidate in found)
        top = [candidate for candidate in found if candidate.rank() == best]
        base = top[0]
        for other in top[1:]:
            base = base.join(other)
        return base.moved(self._step(head, operands, len(found)))

    @staticmethod
    def _step(head: str, operands: tuple[str, ...], based: int) -> int | None:
        """How far `cvt` and `add`/`sub` of a constant move an address; None: unknown."""
        if head == "cvt":
            return 0
        if head in ("add", "sub") and based == 1 and len(operands) == 3:
            amount = _number(operands[2])
            if amount is None and head == "add":
                amount = _number(operands[1])
            if amount is not None:
                return -amount if head == "sub" else amount
        return None


def access(function: Function, instruction: Instruction, bases: Bases) -> Access | None:
    """The memory an instruction reads or writes, None when it touches none that matters here
    (registers only, a kernel's parameters, read-only memory, a call's argument list)."""
    parts = instruction.opcode.split(".")
    head, operands = parts[0], instruction.operands
    if head in ("bar", "barrier"):
        if "red" not in parts or len(operands) < 2:
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
        spaces = [s for p in parts[1:] if (s := _space(["", p]))]
        if not spaces or spaces[0] != "shared":
            return None  # a copy out to global memory
        width = _number(operands[2]) if len(operands) > 2 and "bulk" not in parts else None
        cells, _ = place("shared", bases.operand(operands[0]), width)
        source = spaces[1] if len(spaces) > 1 else "global"
        read = place("shared", bases.operand(operands[1]), width)[0] if source == "shared" else ()
        return Access(read, cells, "plain" if source == "global" else None, _registers(function, operands[:1]),
                      _registers(function, operands[1:]), parts[1] == "reduce")
    return None


_TYPE = re.compile(r"(?:[bsuf]|bf)(8|16|32|64|128)(?:x(\d+))?")
_VECTOR = re.compile(r"v(\d+)")


def _width(parts: list[str]) -> int | None:
    """The bytes an access covers from its address: element type times vector length
    (`ldmatrix`/`stmatrix`: a 16-byte row per thread), None when it cannot tell."""
    if parts[0] in ("ldmatrix", "stmatrix"):
        return 16
    count, element = 1, None
    for part in parts[1:]:
        if m := _VECTOR.fullmatch(part):
            count = int(m.group(1))
        elif m := _TYPE.fullmatch(part):
            element = int(m.group(1)) // 8 * int(m.group(2) or 1)
    return None if element is None else count * element


def place(space: str | None, base: Base | None, width: int | None) -> tuple[tuple[Cell, ...], bool]:
    """The cells an address names in a space (none: global or constant memory), and whether
    other blocks can write what is there (global memory, or a generic address that may be)."""
    base = base or UNKNOWN
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
