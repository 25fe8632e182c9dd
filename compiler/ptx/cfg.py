"""Spin waits, found by data flow over the loops of one PTX function.

A loop is a backward branch whose target can run again up to it: its body is every instruction
on a path from the target (the header) to the branch that does not pass the header again. A
backward branch to code that never comes back to it (NVRTC lays an early `return` out before
the code that jumps to it) is no loop. A loop is a spin wait when the condition of one of its
exits depends, through the registers the body computes (a load's address and a call's
arguments included), on memory another block or the host may write:

- a volatile, relaxed or acquire load (`ld.volatile`, `ld.relaxed.gpu`, `ld.acquire.sys`,
  `ld.global.cv`) of global or generic memory: such a load is re-read every iteration by
  definition, with or without `nanosleep` and whatever else the body stores; or the result of a
  call to a function that makes one (a polling helper that is not inlined);
- a plain load, an atomic's old value (a lock taken with `atomicCAS(lock, 0, 1)`, a flag read
  with `atomicAdd(flag, 0)`) or the result of a call to a function that reads memory, when no
  register the body carries from one iteration to the next (a counter, an index, a
  compare-and-swap's expected value) takes part in any exit: every iteration then reads the
  same memory in the same way (`while (data[idx[0]] == 0)`, `while (peek(flag) == 0)`), so
  only a write from elsewhere can end the loop. Stores in the body are no progress: the
  analysis cannot tell whether they alias what is read. A compare-and-swap retry loop compares
  with the value of the previous iteration, a carried register, and is an atomic (PC305) but
  no wait.

A loop whose exits depend on a counter and plain memory is bounded; one whose exits read
ordered memory is a wait even beside a counter (a timeout). A loop with no exit at all never
ends once entered, which is a spin too. Shared and local memory belong to one block, so waits
on them are not spins between blocks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .ir import Finding, Function, Instruction, PtxModule, destinations, sources
from .calls import call_target

_LOCAL_SPACES = ("shared", "local", "param", "const")
_ORDERED = {"volatile", "relaxed", "acquire", "cv"}
_OUT = -1  # a successor outside the function: a return, or a branch it cannot resolve
_NAME = re.compile(r"[A-Za-z_$][\w$]*")
_ORDERED_READ, _ANY_READ = frozenset({"ordered"}), frozenset({"ordered", "plain"})


def _load_kind(instruction: Instruction) -> str | None:
    """`ordered`, `plain` (a plain load or an atomic's old value) or None (not a read of memory
    other blocks can write)."""
    parts = instruction.opcode.split(".")
    if parts[0] not in ("ld", "atom") or any(p.startswith(_LOCAL_SPACES) for p in parts) or "nc" in parts:
        return None
    return "ordered" if parts[0] == "ld" and _ORDERED.intersection(parts) else "plain"


@dataclass(frozen=True)
class Loop:
    header: int  # the backward branch's target
    latch: int  # the backward branch
    body: frozenset[int]  # positions on a path from the header to the latch


def _successors(function: Function, instruction: Instruction) -> list[int]:
    head = instruction.opcode.split(".")[0]
    after = instruction.position + 1
    falls = [after if after < len(function.instructions) else _OUT]
    if head in ("ret", "exit", "trap", "brx") or (head == "bra" and instruction.target is None):
        jumps = [_OUT]
    elif head == "bra":
        jumps = [instruction.target]
    else:
        return falls
    return jumps + falls if instruction.guard else jumps


def _reach(start: int, edges: dict[int, list[int]], stop: int | None = None) -> set[int]:
    """Positions reachable from `start` along `edges`, not continuing past `stop`."""
    seen, stack = {start}, [start]
    while stack:
        position = stack.pop()
        if position == stop and position != start:
            continue
        for following in edges.get(position, []):
            if following != _OUT and following not in seen:
                seen.add(following)
                stack.append(following)
    return seen


def loops(function: Function) -> list[Loop]:
    """Every loop, one per backward branch that its target reaches again."""
    successors = {i.position: _successors(function, i) for i in function.instructions}
    predecessors: dict[int, list[int]] = {}
    for position, following in successors.items():
        for target in following:
            predecessors.setdefault(target, []).append(position)
    found = []
    for branch in function.instructions:
        header = branch.target
        if not branch.opcode.startswith("bra") or header is None or header > branch.position:
            continue
        ahead = _reach(header, successors)
        if branch.position in ahead:
            behind = _reach(branch.position, predecessors, stop=header)
            found.append(Loop(header, branch.position, frozenset(ahead & behind | {header})))
    return found


def _exit_conditions(function: Function, loop: Loop) -> tuple[list[str], bool]:
    """The predicates that decide whether the loop is left, and whether it can be left at all.
    Every instruction of the body leads back to the latch, so one that can leave it is guarded
    (a conditional branch out, a guarded `ret`, the latch falling through)."""
    conditions: list[str] = []
    has_exit = False
    for position in sorted(loop.body):
        instruction = function.instructions[position]
        if all(s in loop.body for s in _successors(function, instruction)):
            continue
        has_exit = True
        if instruction.guard:
            conditions.append(instruction.guard)
    return conditions, has_exit


def spin_waits(function: Function, module: PtxModule) -> list[Finding]:
    findings = []
    for loop in loops(function):
        conditions, has_exit = _exit_conditions(function, loop)
        if not has_exit:
            findings.append(function.instructions[loop.latch].finding("spin-wait"))  # the branch back
            continue
        poll = _polled_load(function, loop, conditions, module)
        if poll is not None:
            findings.append(poll.finding("spin-wait"))
    return findings


def _reads(module: PtxModule, name: str, kinds: frozenset[str], visiting: frozenset[str] = frozenset()) -> bool:
    """Whether a function, or one it calls directly, reads memory of one of these kinds: a call
    whose result ends a loop is then the poll (`while (poll(flag) == 0)` with `poll` not inlined)."""
    function = module.functions.get(name)
    if function is None or name in visiting:
        return False
    return any(
        _load_kind(i) in kinds
        or ((callee := call_target(i)) is not None and _reads(module, callee, kinds, visiting | {name}))
        for i in function.instructions
    )


def _definitions(function: Function, loop: Loop) -> dict[str, list[Instruction]]:
    defined: dict[str, list[Instruction]] = {}
    for position in sorted(loop.body):
        instruction = function.instructions[position]
        for register in destinations(function, instruction):
            defined.setdefault(register, []).append(instruction)
    return defined


def _feeding(function: Function, defined, start: list[str]):
    """The body's instructions whose results flow into `start` (through loads' addresses and
    calls' arguments), and the registers on the way."""
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
            stack.extend(_inputs(function, instruction))
            if (call := _call_returning(function, instruction)) is not None:
                feeding[call.position] = call
    return sorted(feeding.values(), key=lambda i: i.position), seen


def _inputs(function: Function, instruction: Instruction) -> list[str]:
    """The registers an instruction's result depends on: a call's arguments for its result."""
    call = _call_returning(function, instruction)
    return sources(function, instruction) + (_arguments(function, call) if call else [])


def _call_returning(function: Function, instruction: Instruction) -> Instruction | None:
    """The call whose result `ld.param [retval0]` reads."""
    if not (instruction.opcode.startswith("ld.param") and "[retval" in " ".join(instruction.operands)):
        return None
    earlier = function.instructions[: instruction.position]
    return next((i for i in reversed(earlier) if i.opcode.startswith("call")), None)


def _arguments(function: Function, call: Instruction) -> list[str]:
    """The registers a call passes: those `st.param` stores into its argument list since the
    call before it."""
    target = call_target(call)
    names = {n for o in call.operands[call.operands.index(target) + 1 :] for n in _NAME.findall(o)}
    passed = []
    for instruction in reversed(function.instructions[: call.position]):
        if instruction.opcode.startswith("call"):
            break
        if instruction.opcode.startswith("st.param") and set(_NAME.findall(instruction.operands[0])) & names:
            passed += sources(function, instruction)
    return passed


def _polled_load(function: Function, loop: Loop, conditions: list[str], module: PtxModule) -> Instruction | None:
    defined = _definitions(function, loop)
    feeding, walked = _feeding(function, defined, conditions)
    for instruction in feeding:
        if _load_kind(instruction) == "ordered":
            return instruction
    for call in feeding:
        if (callee := call_target(call)) is not None and _reads(module, callee, _ORDERED_READ):
            return call
    if any(_carried(function, defined, register) for register in walked if register in defined):
        return None
    return next((i for i in feeding if _load_kind(i) == "plain" or
                 ((callee := call_target(i)) is not None and _reads(module, callee, _ANY_READ))), None)


def _carried(function: Function, defined, register: str) -> bool:
    """Whether the register's value in one iteration depends on its value in the previous one."""
    inputs = [r for definition in defined[register] for r in _inputs(function, definition)]
    _, reached = _feeding(function, defined, inputs)
    return register in reached
