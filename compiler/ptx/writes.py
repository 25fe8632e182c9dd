"""Pointer provenance: what a launch reads and writes through each kernel parameter, through
the pointers it loads from a parameter's memory (a table of pointers), and through pointers of
unknown origin; and grid barriers.

A register's origins are the parameters its value derives from: `ld.param` of a 64-bit
parameter (a narrower one holds no address), then `cvta`, `mov`, `add`/`sub`/`mad` address
arithmetic and anything else that computes from registers (flow-insensitive, so a loop's
pointer increments are covered). A 64-bit value loaded from memory that a parameter points to
has the origin `Via(parameter)`: a pointer read from a table the parameter holds, which the
resolver follows to the buffers a declared table names (`addresses(...)`, docs/language.md,
compiler/indirect.py). A 64-bit value loaded from anywhere else (a `__device__` variable, a
pointer staged in shared or local memory) or through such a pointer (double indirection) has
the origin `loaded`: an access through it could land anywhere. In a sum, a term scaled by a
multiplication, a shift or a widening conversion is an index, no pointer, and a parameter plus
an index loaded from memory still points into that parameter: address arithmetic keeps the
base. (A pointer loaded from memory plus an unscaled 64-bit integer parameter is therefore
taken for that parameter: the case this cannot tell apart.)

Writes are `st` (not to shared, local or param space), `atom`, `red`, `multimem.st/red`,
`st.async`, and the bulk copies `cp.async.bulk*`/`cp.reduce.async.bulk*` whose destination is
global; a bulk tensor store writes wherever its tensor map points: `loaded`. A `const T*` cast
to `T*` is the same store in PTX. Reads are `ld`, `ldu`, `atom`, `multimem.ld_reduce` and copies
from global memory (`read_address`); a texture or surface fetch, or a bulk tensor load, reads
wherever its handle points: `loaded`. Prefetches read nothing a kernel sees.

Calls pass origins into the callee's summary (what it reads and writes through each of its
parameters, directly or through the pointers it loads from them), computed for the whole module
until nothing changes, so recursion and call cycles converge. An indirect call does what any
function whose address the module takes does; a call to a body not in the module makes every
parameter not proven written `unknown` (and is PC317, which stops the build, so it adds no
unknown read). An access in a callee is located through the call that reaches it.

The cooperative-groups grid barrier reads the driver's grid workspace from `%envreg1`/`%envreg2`
and arrives on it with an atomic: an atomic through that origin is a grid-wide sync.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum

from .ir import (Finding, Function, Instruction, Location, PtxModule, destinations, reached_through, registers,
                  sources)
from .calls import KNOWN_EXTERNALS, address_taken, call_target

LOADED = "loaded"
GRID_WORKSPACE = "grid-workspace"
READ, WRITE = "r", "w"
_SLOT = re.compile(r"\[\s*([\w$]+)")
_WIDE = re.compile(r"\.[bsu]64\b")
_LOCAL_SPACES = ("shared", "local", "param", "const")
_NARROW = ("u8", "s8", "u16", "s16", "u32", "s32")  # a `cvt` from these widens an index


@dataclass(frozen=True)
class Via:
    """The origin of a pointer loaded from the memory parameter `param` points to."""

    param: int


def is_loaded(origin: object) -> bool:
    """Whether an origin is a value loaded from memory (through a parameter or not)."""
    return origin == LOADED or isinstance(origin, Via)


class Written(str, Enum):
    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"


@dataclass
class Summary:
    """What a function reads and writes, by mode (READ, WRITE), each at its first instruction:
    through its own parameters (`direct`), through the pointers it loads from a parameter's
    memory (`through`), and through pointers of unknown origin (`unknown`, by mode)."""

    direct: dict[str, dict[int, Location | None]] = field(default_factory=lambda: {READ: {}, WRITE: {}})
    through: dict[str, dict[int, Location | None]] = field(default_factory=lambda: {READ: {}, WRITE: {}})
    unknown: dict[str, Location | None] = field(default_factory=dict)

    @property
    def written(self) -> dict[int, Location | None]:
        return self.direct[WRITE]

    def key(self) -> tuple:
        return tuple(tuple(sorted(table[mode])) for table in (self.direct, self.through) for mode in (READ, WRITE)) \
            + (tuple(sorted(self.unknown)),)

    def record(self, origins: set, mode: str, location: Location | None) -> None:
        for origin in origins:
            if isinstance(origin, int):
                self.direct[mode].setdefault(origin, location)
            elif isinstance(origin, Via):
                self.through[mode].setdefault(origin.param, location)
            elif origin == LOADED:
                self.unknown.setdefault(mode, location)


def _write_address(instruction: Instruction) -> str | None:
    """The address operand of an instruction that writes memory others can read, `?` for a
    write whose destination is not an operand (a bulk tensor store), None for no such write."""
    parts = instruction.opcode.split(".")
    head, operands = parts[0], instruction.operands
    if not operands:
        return None
    if "prefetch" in parts:
        return None
    if head == "tensormap" and "global" in parts:  # rewrites a tensor map held in global memory
        return operands[0]
    if instruction.opcode.startswith(("cp.async.bulk.", "cp.reduce.async.bulk.")):
        spaces = [p for p in parts if p == "global" or p.startswith("shared")]
        if not spaces or spaces[0] != "global":
            return None
        return "?" if "tensor" in parts else operands[0]
    if any(p.startswith(("shared", "local", "param")) for p in parts[1:]):
        return None
    if head == "st" or instruction.opcode.startswith(("red.", "multimem.st", "multimem.red")):
        return operands[0]
    if head == "atom":
        return operands[1] if len(operands) > 1 else None
    return None


def read_address(instruction: Instruction) -> str | None:
    """The address operand of a read of global (or generic) memory, `?` for a read whose
    address is no operand pipec follows (a texture or surface fetch, a bulk tensor copy), None
    for no such read. A prefetch counts: it may fill a cache (pdl.py needs that)."""
    parts = instruction.opcode.split(".")
    head, operands = parts[0], instruction.operands
    if not operands or "tensormap" in parts:
        return None
    if head in ("tex", "tld4", "suld"):
        return "?"
    if head == "cp":  # the destination's space comes first, the source's second
        spaces = [p for p in parts if p == "global" or p.startswith("shared")]
        reads_global = spaces[1:2] == ["global"] or ("prefetch" in parts and "global" in parts)
        if not reads_global:
            return None
        return "?" if "tensor" in parts else operands[1 if len(spaces) > 1 else 0]
    if any(p.startswith(_LOCAL_SPACES) for p in parts[1:]):
        return None
    if head in ("prefetch", "prefetchu"):
        return operands[0]
    if head in ("ld", "ldu", "atom") or instruction.opcode.startswith("multimem.ld_reduce"):
        return operands[1] if len(operands) > 1 else None
    return None


def _data_read_address(instruction: Instruction) -> str | None:
    """read_address without prefetches: a read whose data the kernel sees."""
    parts = instruction.opcode.split(".")
    return None if parts[0] in ("prefetch", "prefetchu") or "prefetch" in parts else read_address(instruction)


class _Provenance:
    """The origins of every register of one function, and of every call's arguments."""

    def __init__(self, function: Function) -> None:
        self.function = function
        self.origins: dict[str, set] = {}
        self.arguments: dict[int, list[set]] = {}  # call position -> origins of each argument
        self._param = re.compile(re.escape(function.name) + r"_param_(\d+)")
        self.scaled = _scaled_registers(function)
        while self._pass():
            pass

    def of(self, operand: str) -> set:
        found = set()
        for register in registers(self.function, operand):
            found |= self.origins.get(register, set())
            if register in ("%envreg1", "%envreg2"):
                found.add(GRID_WORKSPACE)
        return found

    def _pass(self) -> bool:
        changed = False
        slots: dict[str, set] = {}  # `.param` slots filled for the next call, and its result
        for instruction in self.function.instructions:
            head = instruction.opcode.split(".")[0]
            if instruction.opcode.startswith("st.param") and len(instruction.operands) > 1:
                if slot := _SLOT.match(instruction.operands[0]):
                    slots.setdefault(slot.group(1), set()).update(self.of(instruction.operands[1]))
                continue
            if head == "call":  # its result derives from its arguments
                names = next((o for o in instruction.operands[1:] if o.startswith("(")), "()")
                arguments = [slots.get(n.strip(), set()) for n in names.strip("()").split(",") if n.strip()]
                self.arguments[instruction.position] = arguments
                slots = {"retval": set().union(*arguments, set())}
                continue
            value = self._value(instruction, head, slots)
            for register in destinations(self.function, instruction):
                before = self.origins.setdefault(register, set())
                if not value <= before:
                    before |= value
                    changed = True
        return changed

    def _value(self, instruction: Instruction, head: str, slots: dict[str, set]) -> set:
        if instruction.opcode.startswith("ld.param"):  # only a 64-bit value can be a pointer
            slot = _SLOT.match(instruction.operands[1]) if len(instruction.operands) > 1 else None
            name = slot.group(1) if slot and _WIDE.search(instruction.opcode) else ""
            if m := self._param.fullmatch(name):
                return {int(m.group(1))}
            return set(slots.get("retval", set())) if name.startswith("retval") else set()
        if head in ("ld", "atom", "ldu"):
            if not _WIDE.search(instruction.opcode):
                return set()
            if any(p.startswith(_LOCAL_SPACES) for p in instruction.opcode.split(".")[1:]):
                return {LOADED}  # staged in shared or local memory: pipec does not follow it there
            return dereferenced(self.of(instruction.operands[1]) if len(instruction.operands) > 1 else set())
        if head in ("add", "sub", "mad") and len(instruction.operands) > 2:
            return self._address(instruction.operands[3:] if head == "mad" else instruction.operands[1:])
        return set().union(*(self.of(s) for s in sources(self.function, instruction)), set())

    def _address(self, terms) -> set:
        """The origins of a sum: an index (a term scaled by a multiplication or a shift, as
        `mad` scales all but its last) is no pointer, and a parameter plus a loaded index still
        points into the parameter."""
        value = set().union(*(self.of(t) for t in terms if not any(r in self.scaled for r in
                                                                    registers(self.function, t))), set())
        if any(isinstance(o, int) for o in value):
            value = {o for o in value if not is_loaded(o)}
        return value


def _scaled_registers(function: Function) -> set[str]:
    """Registers every definition of which scales a value (`mul`, `shl`, a widening `cvt`):
    indexes and offsets, which address arithmetic adds to a pointer but no pointer is."""
    scaling: dict[str, bool] = {}
    for instruction in function.instructions:
        parts = instruction.opcode.split(".")
        scales = parts[0] in ("mul", "shl") or (parts[0] == "cvt" and parts[-1] in _NARROW)
        for register in destinations(function, instruction):
            scaling[register] = scaling.get(register, True) and scales
    return {register for register, scales in scaling.items() if scales}


def dereferenced(origins: set) -> set:
    """The origins of a pointer loaded from an address of these origins: read from a table a
    parameter points to, or of unknown origin (from anywhere else, or loaded twice)."""
    params = {o for o in origins if isinstance(o, int)}
    if params and not any(is_loaded(o) for o in origins):
        return {Via(p) for p in params}
    return {LOADED}


def grid_barriers(function: Function) -> tuple[list[Finding], set[tuple[str, Location | None]]]:
    """The grid-sync findings, and the (instruction, location) of every access to the grid
    workspace: the barrier's own atomic and polling loop are that one finding, not three."""
    provenance = _Provenance(function)
    workspace = {
        (i.text, i.location) for i in function.instructions
        if i.opcode.split(".")[0] in ("atom", "red", "ld") and len(i.operands) > 1
        and GRID_WORKSPACE in provenance.of(i.operands[0 if i.opcode.startswith("red") else 1])
    }
    barriers = [
        i.finding("grid-sync") for i in function.instructions
        if i.opcode.split(".")[0] in ("atom", "red") and (i.text, i.location) in workspace
    ]
    return barriers, workspace


def _summarise(provenance: _Provenance, summaries: dict[str, Summary], taken: set[str]) -> Summary:
    summary = Summary()
    for instruction in provenance.function.instructions:
        location = instruction.location
        if (address := _data_read_address(instruction)) is not None:
            summary.record({LOADED} if address == "?" else provenance.of(address), READ, location)
        if (address := _write_address(instruction)) is not None:
            summary.record({LOADED} if address == "?" else provenance.of(address), WRITE, location)
        target = call_target(instruction)
        if target is None:
            continue
        callees = sorted(taken) if target.startswith("%") else [target]
        known = [summaries[c] for c in callees if c in summaries]
        for index, origins in enumerate(provenance.arguments[instruction.position]):
            if not known and origins and target not in KNOWN_EXTERNALS:
                summary.record({LOADED}, WRITE, location)  # a body not in the module
            for callee in known:
                for mode in (READ, WRITE):
                    if index in callee.direct[mode]:
                        summary.record(origins, mode, reached_through(callee.direct[mode][index], location))
                    if index in callee.through[mode]:
                        summary.record(dereferenced(origins), mode,
                                       reached_through(callee.through[mode][index], location))
        for callee in known:
            for mode, where in callee.unknown.items():
                summary.record({LOADED}, mode, reached_through(where, location))
    return summary


def module_accesses(module: PtxModule) -> dict[str, Summary]:
    """Every function's summary, iterated until no summary changes (recursion converges)."""
    taken = address_taken(module)
    provenances = {name: _Provenance(f) for name, f in module.functions.items() if f.has_body}
    summaries = {name: Summary() for name in provenances}
    # Each round computes every summary from the previous round's, and a summary only grows
    # with its callees' (a parameter, a mode, never one taken away), so the rounds end: a
    # recursion that rotates its arguments learns one parameter per round.
    while True:
        updated = {name: _summarise(provenances[name], summaries, taken) for name in summaries}
        stable = all(updated[n].key() == summaries[n].key() for n in summaries)
        summaries = updated
        if stable:
            break
    return summaries


def parameter_writes(summary: Summary, params: int) -> dict[int, tuple[Written, Location | None]]:
    """Per kernel parameter: whether a launch can write through it, and where. A store through
    a pointer loaded from a parameter's memory writes no parameter here: whether it is known
    depends on what the launch binds there (compiler/indirect.py)."""
    result = {}
    for index in range(params):
        if index in summary.written:
            result[index] = (Written.YES, summary.written[index])
        elif WRITE in summary.unknown:
            result[index] = (Written.UNKNOWN, summary.unknown[WRITE])
        else:
            result[index] = (Written.NO, None)
    return result
