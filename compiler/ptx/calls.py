"""The call graph of a PTX module: what a launch of a kernel can reach.

Every function a kernel calls directly, transitively (`__noinline__` helpers, functions of
included headers, recursion: each function is visited once), contributes its findings. What
cannot be followed is a finding of its own, `unfollowed-call`, naming what it could not follow:

- an indirect call (`call (r), %rd5, (...), prototype;`, a function pointer) is reported unless
  every function whose address the module takes is itself clean; the report names the ones that
  are not, with what they do (no function's address taken: the target comes from elsewhere);
- a call to a function declared here without a body (separate compilation, device-side launch),
  except the device runtime's own `vprintf`, `malloc`, `free` and `__assertfail`.

A finding in a called function is located through the calls that reach it: its line's chain
continues with the call site in the caller, up to the kernel's own body.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import replace

from .ir import Finding, Function, Instruction, Location, PtxModule, reached_through

KNOWN_EXTERNALS = frozenset({"vprintf", "malloc", "free", "__assertfail"})
_NAME = re.compile(r"[A-Za-z_$][\w$]*")
CallPath = tuple[Location | None, ...]  # the call sites leading from the entry, innermost first


def call_target(instruction: Instruction) -> str | None:
    """The callee operand of a `call`: a function name, or a register for an indirect call."""
    if not instruction.opcode.startswith("call"):
        return None
    return next((o for o in instruction.operands if not o.startswith("(")), None)


def address_taken(module: PtxModule) -> set[str]:
    """Functions whose address the module takes: named in an operand other than a call's target,
    or in a `.global` initialiser (a table of function pointers)."""
    taken = module.initializer_names & module.functions.keys()
    for function in module.functions.values():
        for instruction in function.instructions:
            operands = list(instruction.operands)
            if (target := call_target(instruction)) is not None:
                operands.remove(target)
            taken.update(n for o in operands for n in _NAME.findall(o) if n in module.functions)
    return taken


def _walk(module: PtxModule, entry: str) -> tuple[list[tuple[Function, CallPath]],
                                                   list[tuple[Instruction, CallPath]],
                                                   list[tuple[Instruction, CallPath]]]:
    """Functions reachable through direct calls, and the indirect and external calls among them,
    each with the call sites that lead to it from the entry (breadth first: the shortest way)."""
    seen = {entry}
    reached, indirect, external = [], [], []
    queue: deque[tuple[Function, CallPath]] = deque([(module.functions[entry], ())])
    while queue:
        function, calls = queue.popleft()
        reached.append((function, calls))
        for instruction in function.instructions:
            target = call_target(instruction)
            if target is None:
                continue
            if target.startswith("%"):
                indirect.append((instruction, calls))
            elif target in module.functions and module.functions[target].has_body:
                if target not in seen:
                    seen.add(target)
                    queue.append((module.functions[target], (instruction.location, *calls)))
            elif target not in KNOWN_EXTERNALS:
                external.append((instruction, calls))
    return reached, indirect, external


def _seen_from_entry(finding: Finding, calls: CallPath) -> Finding:
    """A finding of a called function, its location chained through the calls that reach it."""
    location = finding.location
    for call in calls:
        location = reached_through(location, call)
    return replace(finding, location=location)


def reachable_findings(module: PtxModule, entry: str) -> list[Finding]:
    reached, indirect, external = _walk(module, entry)
    findings = [_seen_from_entry(f, calls) for function, calls in reached for f in function.findings]
    findings += [_seen_from_entry(c.finding("unfollowed-call", f"call to `{call_target(c)}`, whose body "
                                            "is not in this module"), calls) for c, calls in external]
    if indirect:
        taken = sorted(address_taken(module))
        unsafe = {name: rules for name in taken if (rules := _rules(module, name))}
        if unsafe or not taken:
            reaches = ", ".join(f"`{name}` ({', '.join(sorted(rules))})" for name, rules in unsafe.items())
            what = f"it may reach {reaches}" if unsafe else "the module takes no function's address"
            findings += [_seen_from_entry(c.finding("unfollowed-call", f"indirect call through "
                                                    f"`{call_target(c)}`: {what}"), calls)
                         for c, calls in indirect]
    return findings


def _rules(module: PtxModule, name: str) -> set[str]:
    """What a function does that a rule forbids, through everything it calls; an indirect or an
    external call inside it counts as `unfollowed-call` (following it again could cycle)."""
    reached, indirect, external = _walk(module, name)
    rules = {f.rule for function, _ in reached for f in function.findings}
    bodiless = not module.functions[name].has_body and name not in KNOWN_EXTERNALS  # `.extern .func`
    return rules | ({"unfollowed-call"} if indirect or external or bodiless else set())
