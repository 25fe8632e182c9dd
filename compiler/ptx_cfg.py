"""Spin waits, found by data flow over the loops of one PTX function.

A loop is a backward branch: its body runs from the branch's label to the branch. It is a spin
wait when the condition of one of its exits depends, through the registers the body computes,
on a value the body loads from memory another block or the host may write:

- a volatile, relaxed or acquire load (`ld.volatile`, `ld.relaxed.gpu`, `ld.acquire.sys`,
  `ld.global.cv`) of global or generic memory: such a load is re-read every iteration by
  definition, with or without `nanosleep` and whatever else the body stores; or the result of a
  call to a function that makes one (a polling helper that is not inlined);
- a plain load of an address the body never changes, when no register the body carries from
  one iteration to the next (a counter) takes part in the exit: the compiler only re-reads it
  because a store in the body may alias it, and only that memory can end the loop;
- likewise an atomic's old value (a lock taken with `atomicCAS(lock, 0, 1)`, a flag read with
  `atomicAdd(flag, 0)`); a compare-and-swap retry loop compares with the value of the previous
  iteration, a carried register, and is an atomic (PC305) but no wait.

A loop whose exits depend only on a counter is bounded, however much volatile memory it reads.
A loop with no exit at all never ends once entered, which is a spin too. Shared and local
memory belong to one block, so waits on them are not spins between blocks.
"""

from __future__ import annotations

from .ptx import Finding, Function, Instruction, PtxModule, destinations, registers, sources
from .ptx_calls import call_target

_LOCAL_SPACES = ("shared", "local", "param", "const")
_ORDERED = {"volatile", "relaxed", "acquire", "cv"}


def _load_kind(instruction: Instruction) -> str | None:
    """`ordered`, `plain` (a plain load or an atomic's old value) or None (not a read of memory
    other blocks can write)."""
    parts = instruction.opcode.split(".")
    if parts[0] not in ("ld", "atom") or any(p.startswith(_LOCAL_SPACES) for p in parts) or "nc" in parts:
        return None
    return "ordered" if parts[0] == "ld" and _ORDERED.intersection(parts) else "plain"


def loops(function: Function) -> list[tuple[int, int]]:
    """(first, last) instruction positions of every loop, one per backward branch."""
    return [
        (i.target, i.position) for i in function.instructions
        if i.opcode.startswith("bra") and i.target is not None and i.target <= i.position
    ]


def _exit_conditions(function: Function, first: int, last: int) -> tuple[list[str], bool]:
    """The predicates that decide whether the loop is left, and whether it can be left at all."""
    body = function.instructions[first : last + 1]
    conditions: list[str] = []
    has_exit = False
    for instruction in body:
        head = instruction.opcode.split(".")[0]
        leaves = head in ("ret", "exit", "trap") or (
            head in ("bra", "brx") and (instruction.target is None or not first <= instruction.target <= last)
        )
        if instruction.position == last and instruction.guard:
            leaves = True  # a conditional back edge falls through out of the loop
        if not leaves:
            continue
        has_exit = True
        if instruction.guard:
            conditions.append(instruction.guard)
        else:  # reached only when earlier branches jump past it: those decide
            conditions += [
                b.guard for b in body
                if b.position < instruction.position and b.guard and b.target is not None
                and b.target > instruction.position
            ]
    return conditions, has_exit


def spin_waits(function: Function, module: PtxModule) -> list[Finding]:
    findings = []
    for first, last in loops(function):
        conditions, has_exit = _exit_conditions(function, first, last)
        if not has_exit:
            findings.append(function.instructions[last].finding("spin-wait"))  # the branch back
            continue
        poll = _polled_load(function, first, last, conditions, module)
        if poll is not None:
            findings.append(poll.finding("spin-wait"))
    return findings


def _reads_ordered(module: PtxModule, name: str, visiting: frozenset[str] = frozenset()) -> bool:
    """Whether a function, or one it calls directly, makes an ordered read: a call whose result
    ends a loop is then the poll (`while (poll(flag) == 0)` with `poll` not inlined)."""
    function = module.functions.get(name)
    if function is None or name in visiting:
        return False
    return any(
        _load_kind(i) == "ordered"
        or ((callee := call_target(i)) is not None and _reads_ordered(module, callee, visiting | {name}))
        for i in function.instructions
    )


def _definitions(function: Function, first: int, last: int) -> dict[str, list[Instruction]]:
    defined: dict[str, list[Instruction]] = {}
    for instruction in function.instructions[first : last + 1]:
        for register in destinations(function, instruction):
            defined.setdefault(register, []).append(instruction)
    return defined


def _feeding(function: Function, defined, start: list[str], through_reads: bool = False):
    """The body's instructions whose results flow into `start`, and the registers on the way;
    a read's operands (its address, an atomic's operands) only `through_reads`."""
    seen: set[str] = set()
    feeding: dict[int, Instruction] = {}
    stack = list(start)
    while stack:
        register = stack.pop()
        if register in seen:
            continue
        seen.add(register)
        for instruction in defined.get(register, []):
            feeding[instruction.position] = instruction
            if through_reads or _load_kind(instruction) is None:
                stack.extend(sources(function, instruction))
            if (call := _call_returning(function, instruction)) is not None:
                feeding[call.position] = call
    return sorted(feeding.values(), key=lambda i: i.position), seen


def _call_returning(function: Function, instruction: Instruction) -> Instruction | None:
    """The call whose result `ld.param [retval0]` reads."""
    if not (instruction.opcode.startswith("ld.param") and "[retval" in " ".join(instruction.operands)):
        return None
    earlier = function.instructions[: instruction.position]
    return next((i for i in reversed(earlier) if i.opcode.startswith("call")), None)


def _polled_load(function: Function, first: int, last: int, conditions: list[str],
                 module: PtxModule) -> Instruction | None:
    defined = _definitions(function, first, last)
    feeding, walked = _feeding(function, defined, conditions)
    loads = [(i, _load_kind(i)) for i in feeding if _load_kind(i)]
    for load, kind in loads:
        if kind == "ordered":
            return load
    for call in feeding:
        if (callee := call_target(call)) is not None and _reads_ordered(module, callee):
            return call
    carried = any(_carried(function, defined, register) for register in walked if register in defined)
    for load, _ in loads:
        address = [r for o in load.operands if o.startswith("[") for r in registers(function, o)]
        if not carried and not any(r in defined for r in address):
            return load
    return None


def _carried(function: Function, defined, register: str) -> bool:
    """Whether the register's value in one iteration depends on its value in the previous one."""
    inputs = [s for d in defined[register] for s in sources(function, d)]
    _, reached = _feeding(function, defined, inputs, through_reads=True)
    return register in reached
