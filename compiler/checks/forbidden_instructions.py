"""PC305 atomics, PC306 inter-block spin waits, PC307 fences used as barriers: found in the PTX
of every function a kernel the step launches can reach, unless a `waive` declaration exempts
the kernel. PC319 grid-wide syncs (a kernel node never gets a cooperative launch) and PC317
calls the analysis cannot follow are not waivable. Also PC003, a waiver that exempts nothing."""

from __future__ import annotations

from ..diagnostics import Label
from ..model import LaunchNode
from .context import CheckContext

RULE_CODES = {"atomics": "PC305", "spin-wait": "PC306", "fence-barrier": "PC307", "grid-sync": "PC319",
              "unfollowed-call": "PC317"}
WAIVABLE = ("atomics", "spin-wait", "fence-barrier")
MESSAGES = {
    "atomics": ("performs an atomic operation", "atomics make replays non-deterministic and turn "
                "a stale pointer into a dead context; reduce in two stages (per-block partials, then "
                "one block) or allocate slots with a prefix sum"),
    "spin-wait": ("spins on memory that other blocks write", "blocks of one launch have no ordering "
                  "guarantee; split the kernel into nodes and let a graph edge order them"),
    "fence-barrier": ("uses a device-wide fence, which does not order the blocks of one launch",
                      "a fence orders one thread's memory operations, it does not wait for other "
                      "blocks; split the kernel at that point into two nodes"),
    "grid-sync": ("waits for the whole grid (`grid.sync()`), which needs a cooperative launch",
                  "a graph's kernel node is never launched cooperatively, so the barrier is invalid "
                  "and can hang; split the kernel at the sync into two nodes"),
    "unfollowed-call": ("makes a call the analysis cannot follow",
                        "pipec cannot prove what it runs is graph-safe; call the function directly "
                        "or keep every function whose address is taken free of forbidden instructions"),
}


def forbidden_instructions(ctx: CheckContext) -> None:
    if ctx.program.step is None:
        return
    first_use: dict[str, LaunchNode] = {}
    for node in ctx.launches(ctx.program.step):
        first_use.setdefault(node.kernel.name, node)
    waived = {(w.rule, w.kernel.name): w for w in ctx.program.waivers}
    used_waivers = set()
    for name, node in first_use.items():
        for finding in node.kernel.findings:
            key = (finding.rule, name)
            if key in waived:
                used_waivers.add(key)
                continue
            what, hint = MESSAGES[finding.rule]
            labels = [Label(node.span, "launched in the step here"), *finding.trail]
            if finding.rule in WAIVABLE:
                exemption = f"waive {finding.rule.replace('-', '_')} for {name}: \"reason\""
                hint = f"{hint}; or exempt it: `{exemption}`"
            detail = (f": {finding.instruction}" if finding.rule == "unfollowed-call"  # a description
                      else f" (`{finding.instruction}`)")
            ctx.sink.add(RULE_CODES[finding.rule], f"kernel `{name}` {what}{detail}", finding.span, hint,
                         labels=tuple(labels))
    for key, waiver in waived.items():
        if key not in used_waivers and not ctx.program.dropped_statements:
            what = (f"the step's `{waiver.kernel.name}` has no {waiver.rule} finding"
                    if waiver.kernel.name in first_use
                    else f"the step never launches `{waiver.kernel.name}`")
            ctx.sink.add("PC003", f"nothing to waive: {what}", waiver.span, "remove the waiver")
