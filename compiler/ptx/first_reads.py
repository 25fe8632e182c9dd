"""Reads before writes: per pointer parameter, whether some path of a launch loads memory the
parameter points to before the same thread has stored to those bytes. An `out` binding on such
a parameter hides a read of what the buffer held before (PC404), and a buffer declared `uninit`
that such a launch touches first is read uninitialised (PC401).

The question is asked per thread, along the control-flow graph of cfg.py (branches, loops,
early returns): a forward must-analysis whose facts are the bytes this thread has stored on
every path so far, each as (address register, byte offset, width) of an unguarded store. A load
from a parameter's memory (writes.py's provenance) is no read before write when the facts of
its address register cover its bytes. A fact lasts until its register is given another value,
so a store in one iteration of a loop covers nothing in the next.

What it cannot tell apart it counts as a read before a write (conservative):

- elements written by other threads (`out[tid] = v; __syncthreads(); out[tid ^ 1]`), or by a
  loop whose index differs from the one that reads them (`for k: out[k] = ...; for k: ... out[k]`),
  or at an address held in another register of the same value;
- a reduction (`atom`, `red`, `cp.reduce.async.bulk`): it reads what the memory held;
- a callee's loads of its parameters that its own stores do not cover, seen at the call; a
  callee's stores cover nothing in the caller (only a callee's own later loads), and a call the
  analysis cannot follow (indirect, or a body outside the module) reads every pointer it is
  passed. The summaries of every function are iterated until none changes (recursion).

Loads through pointers loaded from memory are no parameter's here (writes.py follows them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .calls import KNOWN_EXTERNALS, address_taken, call_target
from .cfg import _OUT, _successors
from .ir import Function, Instruction, Location, PtxModule, destinations, reached_through
from .writes import _data_read_address, _Provenance, _write_address

_ADDRESS = re.compile(r"^\[\s*(%?[\w$]+)\s*(?:\+\s*(-?\d+))?\s*\]$")
_TYPE = re.compile(r"^(?:[bsuf]|bf|e\dm\d|tf)(\d+)(?:x(\d+))?$")
_REDUCTIONS = ("red.", "multimem.red", "cp.reduce.async.bulk")


@dataclass(frozen=True)
class _Stored:
    """Bytes [offset, offset + width) from the value of `register`, stored by this thread."""

    register: str
    offset: int
    width: int


def access_width(opcode: str) -> int | None:
    """The bytes an `ld`/`st`/`atom`/`red` moves: its element type times its vector length
    (`ld.global.v4.f32`: 16), None when the opcode does not say."""
    parts = opcode.split(".")
    lanes = 1
    for part in parts[1:]:
        if part in ("v2", "v4", "v8"):
            lanes = int(part[1:])
    for part in reversed(parts[1:]):
        if m := _TYPE.match(part):
            return lanes * int(m.group(1)) * int(m.group(2) or 1) // 8
    return None


def _stored(address: str, width: int | None) -> _Stored | None:
    m = _ADDRESS.match(address)
    if m is None or width is None:
        return None
    return _Stored(m.group(1), int(m.group(2) or 0), width)


def _covered(facts: frozenset[_Stored], access: _Stored | None) -> bool:
    """Whether the stored bytes of one register cover every byte the access reads."""
    if access is None:
        return False
    spans = sorted((f.offset, f.offset + f.width) for f in facts if f.register == access.register)
    reached = access.offset
    for start, stop in spans:
        if start > reached:
            break
        reached = max(reached, stop)
    return reached >= access.offset + access.width


class _FirstReads:
    """One function's reads before writes, given its callees' (by parameter index)."""

    def __init__(self, function: Function, provenance: _Provenance, callees: dict[str, dict[int, Location | None]],
                 taken: list[str]) -> None:
        self.function, self.provenance, self.callees, self.taken = function, provenance, callees, taken
        self.found: dict[int, Location | None] = {}

    def run(self) -> dict[int, Location | None]:
        instructions = self.function.instructions
        if not instructions:
            return self.found
        facts: dict[int, frozenset[_Stored]] = {0: frozenset()}  # absent: not reached yet (every fact)
        pending = [0]
        while pending:
            position = pending.pop()
            instruction = instructions[position]
            after = self._transfer(instruction, facts[position])
            for following in _successors(self.function, instruction):
                if following == _OUT:
                    continue
                joined = after if following not in facts else facts[following] & after
                if following not in facts or joined != facts[following]:
                    facts[following] = joined
                    pending.append(following)
        return self.found

    def _transfer(self, instruction: Instruction, facts: frozenset[_Stored]) -> frozenset[_Stored]:
        width = access_width(instruction.opcode)
        read = _data_read_address(instruction)
        if read is None and instruction.opcode.startswith(_REDUCTIONS):
            read = _write_address(instruction)
        if read is not None and read != "?" and not _covered(facts, _stored(read, width)):
            self._record(self.provenance.of(read), instruction.location)
        written = _write_address(instruction)
        if written is not None and not instruction.guard and (fact := _stored(written, width)) is not None:
            facts = facts | {fact}  # a guarded store may not happen
        self._call(instruction)
        killed = set(destinations(self.function, instruction))
        return frozenset(f for f in facts if f.register not in killed) if killed else facts

    def _call(self, instruction: Instruction) -> None:
        target = call_target(instruction)
        if target is None or target in KNOWN_EXTERNALS:
            return
        names = self.taken if target.startswith("%") else [target]
        known = [self.callees[name] for name in names if name in self.callees]
        for index, origins in enumerate(self.provenance.arguments.get(instruction.position, [])):
            for callee in known:
                if index in callee:
                    self._record(origins, reached_through(callee[index], instruction.location))
            if not known:  # a body the analysis cannot see may read whatever it is passed
                self._record(origins, instruction.location)

    def _record(self, origins: set, location: Location | None) -> None:
        for origin in origins:
            if isinstance(origin, int):  # a pointer loaded from memory is no parameter here
                self.found.setdefault(origin, location)


def module_first_reads(module: PtxModule) -> dict[str, dict[int, Location | None]]:
    """Per function with a body: per parameter, the first read before a write on some path,
    iterated over the call graph until nothing changes."""
    taken = sorted(address_taken(module))
    provenances = {name: _Provenance(f) for name, f in module.functions.items() if f.has_body}
    summaries: dict[str, dict[int, Location | None]] = {name: {} for name in provenances}
    while True:  # a summary only gains parameters, so the rounds end
        updated = {name: _FirstReads(module.functions[name], provenances[name], summaries, taken).run()
                   for name in provenances}
        if all(updated[name].keys() == summaries[name].keys() for name in provenances):
            return updated
        summaries = updated
