"""Programmatic dependent launch in PTX: where a kernel waits for its predecessor
(`griddepcontrol.wait`), what it touches before that, and where it lets its dependents start
(`griddepcontrol.launch_dependents`).

A kernel that a programmatic edge launches early may run any code before its wait, but its
predecessor's writes are visible only after it, and the predecessor may still be reading what
the kernel overwrites. So the question for each function is which global accesses can execute
on some path from its entry that has not passed a wait. The paths are the control-flow graph of
cfg.py (loops and early returns included); a guarded wait (`@p griddepcontrol.wait`) may not
execute, so it ends no path. A call continues the path into the callee: the callee's own early
accesses (its parameters mapped to the caller's through the call's arguments, as writes.py
does) are early when the call is, and a callee that waits on every path ends the path at the
call. A call the analysis cannot follow (indirect, a body not in the module, recursion) is an
access of unknown origin and no wait.

An access's origin is the set of kernel parameters its address derives from (writes.py's
provenance); a pointer loaded from memory is of unknown origin (it may point anywhere, and
where a declared table points is the resolver's, not this analysis's); an
address that derives from no parameter (shared or local memory through a generic pointer, a
`__device__` variable) is no buffer of the plan and is left out. Each early access is kept once
per origin and kind, at its first instruction: the first line that touches a parameter before
the wait is what a diagnostic shows.
"""

from __future__ import annotations

from typing import Literal

from dataclasses import dataclass
from enum import Enum

from .calls import KNOWN_EXTERNALS, call_target
from .cfg import _OUT, _successors
from .ir import Function, Instruction, Location, PtxModule, reached_through
from .writes import GRID_WORKSPACE, _Provenance, _write_address, is_loaded, read_address

WAIT = "griddepcontrol.wait"
TRIGGER = "griddepcontrol.launch_dependents"


class Waits(str, Enum):
    EVERY_PATH = "every-path"  # every path from entry to exit executes a wait
    SOME_PATHS = "some-paths"
    NEVER = "never"


@dataclass(frozen=True)
class EarlyAccess:
    """A global access that can execute before the function's wait."""

    params: tuple[int, ...] | None  # the parameters its address derives from; None: unknown origin
    mode: str  # r | w | rw
    instruction: str
    location: Location | None


@dataclass(frozen=True)
class LaunchControl:
    waits: Waits
    early: tuple[EarlyAccess, ...]  # in terms of this function's own parameters
    trigger: Location | None  # the first `griddepcontrol.launch_dependents` it can execute


def _accesses(instruction: Instruction) -> list[tuple[str, str]]:
    """(address operand, mode) of every global access the instruction makes."""
    found = []
    if (address := read_address(instruction)) is not None:
        found.append((address, "rw" if instruction.opcode.startswith("atom") else "r"))
    if (address := _write_address(instruction)) is not None and not instruction.opcode.startswith("atom"):
        found.append((address, "w"))
    return found


def _origin(provenance: _Provenance, address: str) -> tuple[int, ...] | None | Literal[False]:
    """The parameters an address derives from, None for unknown origin, False for no buffer."""
    if address == "?":
        return None
    origins = provenance.of(address) - {GRID_WORKSPACE}
    if any(is_loaded(o) for o in origins):
        return None
    params = tuple(sorted(o for o in origins if isinstance(o, int)))
    return params or False


class _Analysis:
    """Each function's LaunchControl, computed once, callees first; a call back into a function
    still being analysed (recursion) cannot be followed."""

    def __init__(self, module: PtxModule) -> None:
        self.module = module
        self.done: dict[str, LaunchControl] = {}
        self.active: set[str] = set()

    def of(self, name: str) -> LaunchControl | None:
        function = self.module.functions.get(name)
        if function is None or not function.has_body or name in self.active:
            return None
        if name not in self.done:
            self.active.add(name)
            self.done[name] = self._analyse(function)
            self.active.discard(name)
        return self.done[name]

    def _analyse(self, function: Function) -> LaunchControl:
        provenance = _Provenance(function)
        early: dict[tuple, EarlyAccess] = {}
        reached, exits, waits_somewhere, trigger = self._walk(function)
        for position in sorted(reached):
            instruction = function.instructions[position]
            for access in self._early_at(function, instruction, provenance):
                early.setdefault((access.params, access.mode), access)
        if exits:
            waits = Waits.SOME_PATHS if waits_somewhere else Waits.NEVER
        else:
            waits = Waits.EVERY_PATH
        return LaunchControl(waits, tuple(early.values()), trigger)

    def _walk(self, function: Function) -> tuple[set[int], bool, bool, Location | None]:
        """Positions reachable from the entry without passing a wait; whether an exit is;
        whether the function (or a callee) waits anywhere; its first trigger."""
        instructions = function.instructions
        waits_somewhere, trigger = False, None
        for instruction in instructions:
            control = self._callee(instruction)
            if instruction.opcode == WAIT or (control and control.waits is not Waits.NEVER):
                waits_somewhere = True
            if trigger is None:
                if instruction.opcode == TRIGGER:
                    trigger = instruction.location
                elif control and control.trigger is not None:
                    trigger = reached_through(control.trigger, instruction.location)
        if not instructions:
            return set(), True, waits_somewhere, trigger
        reached, stack, exits = {0}, [0], False
        while stack:
            instruction = instructions[stack.pop()]
            if not instruction.guard and self._ends_path(instruction):
                continue
            for following in _successors(function, instruction):
                if following == _OUT:
                    exits = True
                elif following not in reached:
                    reached.add(following)
                    stack.append(following)
        return reached, exits, waits_somewhere, trigger

    def _callee(self, instruction: Instruction) -> LaunchControl | None:
        target = call_target(instruction)
        return self.of(target) if target is not None and not target.startswith("%") else None

    def _ends_path(self, instruction: Instruction) -> bool:
        if instruction.opcode == WAIT:
            return True
        control = self._callee(instruction)
        return control is not None and control.waits is Waits.EVERY_PATH

    def _early_at(self, function: Function, instruction: Instruction, provenance: _Provenance) -> list[EarlyAccess]:
        """The accesses an instruction on a path before the wait makes: its own, or a callee's
        early ones seen through the call."""
        if instruction.opcode == WAIT:
            return []
        target = call_target(instruction)
        if target is None:
            found = []
            for address, mode in _accesses(instruction):
                origin = _origin(provenance, address)
                if origin is not False:
                    found.append(EarlyAccess(origin, mode, instruction.text, instruction.location))
            return found
        if target in KNOWN_EXTERNALS:
            return []
        control = self._callee(instruction)
        if control is None:  # indirect, without a body here, or recursive
            return [EarlyAccess(None, "rw", instruction.text, instruction.location)]
        arguments = provenance.arguments.get(instruction.position, [])
        return [EarlyAccess(self._through(access.params, arguments), access.mode, access.instruction,
                            reached_through(access.location, instruction.location))
                for access in control.early]

    @staticmethod
    def _through(params: tuple[int, ...] | None, arguments: list[set]) -> tuple[int, ...] | None:
        """A callee's parameters as the caller's: the origins of the arguments passed for them."""
        if params is None:
            return None
        origins = set().union(*(arguments[p] for p in params if p < len(arguments)), set())
        if any(is_loaded(o) for o in origins) or any(p >= len(arguments) for p in params):
            return None
        return tuple(sorted(o for o in origins if isinstance(o, int))) or None


def launch_control(module: PtxModule, entry: str) -> LaunchControl:
    """Where a kernel waits, what it touches before, and where it triggers, through its calls."""
    control = _Analysis(module).of(entry)
    assert control is not None, f"`{entry}` is an entry with a body"
    return control
