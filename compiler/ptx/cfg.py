"""The control flow of one PTX function: each instruction's successors, its loops and their ways out.

A loop is a backward branch whose target can run again up to it: its body is every instruction
on a path from the target (the header) to the branch (the latch) that does not pass the header
again. A backward branch to code that never comes back to it (NVRTC lays an early `return` out
before the code that jumps to it) is no loop. Each backward branch is a loop of its own, so a
`continue` that jumps back without the progress the rest of the body makes is examined apart.

The body lies in the strongly connected component of the control-flow graph that holds its
header and latch, so it is found by walking back from the latch inside that component: the
cost is the body's size, not the function's, and a function of many loops stays linear in
practice (nested loops cost their depth).
"""

from __future__ import annotations

from dataclasses import dataclass

from .graph import components
from .ir import Function, Instruction

_OUT = -1  # a successor outside the function: a return, or a branch it cannot resolve


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


def loops(function: Function) -> list[Loop]:
    """Every loop, one per backward branch that its target reaches again."""
    successors = [[s for s in _successors(function, i) if s != _OUT] for i in function.instructions]
    predecessors: list[list[int]] = [[] for _ in successors]
    for position, following in enumerate(successors):
        for target in following:
            predecessors[target].append(position)
    component = [0] * len(successors)
    for number, members in enumerate(components(range(len(successors)), successors.__getitem__)):
        for position in members:
            component[position] = number
    found = []
    for branch in function.instructions:
        header = branch.target
        if not branch.opcode.startswith("bra") or header is None or header > branch.position:
            continue
        if component[header] == component[branch.position]:
            found.append(Loop(header, branch.position, _behind(branch.position, header, predecessors, component)))
    return found


def _behind(latch: int, header: int, predecessors: list[list[int]], component: list[int]) -> frozenset[int]:
    """The positions that reach the latch without passing the header, inside their component."""
    seen, stack = {latch, header}, [latch] if latch != header else []
    while stack:
        for earlier in predecessors[stack.pop()]:
            if earlier not in seen and component[earlier] == component[latch]:
                seen.add(earlier)
                stack.append(earlier)
    return frozenset(seen)


def exits(function: Function, loop: Loop) -> tuple[list[str], bool]:
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
