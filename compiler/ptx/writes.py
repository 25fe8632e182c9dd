"""Pointer provenance: which kernel parameters a launch can write through, and grid barriers.

A register's origins are the parameters its value derives from: `ld.param` of a parameter,
then `cvta`, `mov`, `add`/`sub`/`mad` address arithmetic and anything else that computes from
registers (flow-insensitive, so a loop's pointer increments are covered). A 64-bit value loaded from
memory has the origin `loaded`: a store through it could land anywhere, so every parameter not
proven written becomes `unknown` (double indirection is not followed, and said so). A parameter
plus a loaded index still points into that parameter: address arithmetic keeps the base.

Writes are `st` (not to shared, local or param space), `atom`, `red`, `multimem.st/red`,
`st.async`, and the bulk copies `cp.async.bulk*`/`cp.reduce.async.bulk*` whose destination is
global; a bulk tensor store writes wherever its tensor map points: `unknown`. A `const T*` cast
to `T*` is the same store in PTX. Calls pass origins into the callee's summary (what it writes
through each of its parameters), computed for the whole module until nothing changes, so
recursion and call cycles converge. An indirect call writes what any function whose address
the module takes writes; a call to a body not in the module makes every parameter not proven
written `unknown`. A write in a callee is located through the call that reaches it.

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
_SLOT = re.compile(r"\[\s*([\w$]+)")
_WIDE = re.compile(r"\.[bsu]64\b")


class Written(str, Enum):
    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"


@dataclass
class Summary:
    """What a function writes through its own parameters."""

    written: dict[int, Location | None] = field(default_factory=dict)  # first write per parameter
    unknown: Location | None = None  # first write through a pointer of unknown origin
    has_unknown: bool = False

    def key(self) -> tuple:
        return (tuple(sorted(self.written)), self.has_unknown)


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


class _Provenance:
    """The origins of every register of one function, and of every call's arguments."""

    def __init__(self, function: Function) -> None:
        self.function = function
        self.origins: dict[str, set] = {}
        self.arguments: dict[int, list[set]] = {}  # call position -> origins of each argument
        self._param = re.compile(re.escape(function.name) + r"_param_(\d+)")
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
        if instruction.opcode.startswith("ld.param"):
            slot = _SLOT.match(instruction.operands[1]) if len(instruction.operands) > 1 else None
            name = slot.group(1) if slot else ""
            if m := self._param.fullmatch(name):
                return {int(m.group(1))}
            return set(slots.get("retval", set())) if name.startswith("retval") else set()
        if head in ("ld", "atom", "ldu"):  # only a 64-bit value can be a pointer
            return {LOADED} if _WIDE.search(instruction.opcode) else set()
        value = set().union(*(self.of(s) for s in sources(self.function, instruction)), set())
        if head in ("add", "sub", "mad") and any(isinstance(o, int) for o in value):
            value.discard(LOADED)  # a parameter plus a loaded index still points into the parameter
        return value


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

    def record(origins: set, location: Location | None) -> None:
        for origin in origins:
            if isinstance(origin, int):
                summary.written.setdefault(origin, location)
            elif origin == LOADED and not summary.has_unknown:
                summary.has_unknown, summary.unknown = True, location

    for instruction in provenance.function.instructions:
        if (address := _write_address(instruction)) is not None:
            record({LOADED} if address == "?" else provenance.of(address), instruction.location)
        target = call_target(instruction)
        if target is None:
            continue
        callees = sorted(taken) if target.startswith("%") else [target]
        known = [summaries[c] for c in callees if c in summaries]
        for index, origins in enumerate(provenance.arguments[instruction.position]):
            if not known and origins and target not in KNOWN_EXTERNALS:
                record({LOADED}, instruction.location)  # a body not in the module
            for callee in known:
                if index in callee.written:
                    record(origins, reached_through(callee.written[index], instruction.location))
        for callee in known:
            if callee.has_unknown:
                record({LOADED}, reached_through(callee.unknown, instruction.location))
    return summary


def module_writes(module: PtxModule) -> dict[str, Summary]:
    """Every function's summary, iterated until no summary changes (recursion converges)."""
    taken = address_taken(module)
    provenances = {name: _Provenance(f) for name, f in module.functions.items() if f.has_body}
    summaries = {name: Summary() for name in provenances}
    # A key grows by at least one parameter (or the unknown flag) per round until it settles,
    # so every function's parameters plus one bound the rounds; a recursion that rotates its
    # arguments learns one parameter per round, which a bound by the function count cut short.
    rounds = sum(module.functions[name].params + 1 for name in summaries) + 1
    for _ in range(rounds):
        updated = {name: _summarise(provenances[name], summaries, taken) for name in summaries}
        stable = all(updated[n].key() == summaries[n].key() for n in summaries)
        summaries = updated
        if stable:
            break
    return summaries


def parameter_writes(summary: Summary, params: int) -> dict[int, tuple[Written, Location | None]]:
    """Per kernel parameter: whether a launch can write through it, and where."""
    result = {}
    for index in range(params):
        if index in summary.written:
            result[index] = (Written.YES, summary.written[index])
        elif summary.has_unknown:
            result[index] = (Written.UNKNOWN, summary.unknown)
        else:
            result[index] = (Written.NO, None)
    return result
