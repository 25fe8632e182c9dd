"""PC305 atomics, PC306 inter-block spin waits, PC307 fences used as barriers: found in the PTX
of every function a kernel the step launches can reach, unless a `waive` declaration exempts
the kernel. PC319 grid-wide syncs (a kernel node never gets a cooperative launch) and PC317
calls the analysis cannot follow are not waivable. Also PC003, a waiver that exempts nothing."""

from __future__ import annotations

import os
from typing import get_args

from ..codes import PC003, PC305, PC306, PC307, PC317, PC319, Rule
from ..diagnostics import Label
from ..fixes import removal
from ..model import FindingRule, Kernel, LaunchNode, WaivableRule
from .context import CheckContext

RULES: dict[FindingRule, Rule] = {"atomics": PC305, "spin-wait": PC306, "fence-barrier": PC307,
                                  "grid-sync": PC319, "unfollowed-call": PC317}
# the codes by finding, as the soundness corpus's sources mark the findings they expect
RULE_CODES = {finding: rule.code for finding, rule in RULES.items()}
WAIVABLE: tuple[WaivableRule, ...] = get_args(WaivableRule)
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
    # keyed by the kernel itself: two sources' kernels of one name are analysed and waived apart
    first_use: dict[Kernel, LaunchNode] = {}
    for node in ctx.launches(ctx.program.step):
        first_use.setdefault(node.kernel, node)
    shared_names = {k.name for k in first_use if sum(o.name == k.name for o in first_use) > 1}
    folder = ctx.program.path.parent

    def called(kernel: Kernel) -> str:
        """How a message names the kernel: with its source when another shares its name."""
        if kernel.name in shared_names:
            return f'"{os.path.relpath(kernel.source.path, folder)}":{kernel.name}'
        return kernel.name

    waived = {(w.rule, w.kernel): w for w in ctx.program.waivers}
    used_waivers = set()
    for kernel, node in first_use.items():
        for finding in kernel.findings:
            key = (finding.rule, kernel)
            if key in waived:
                used_waivers.add(key)
                continue
            what, hint = MESSAGES[finding.rule]
            labels = [Label(node.span, "launched in the step here"), *finding.trail]
            if finding.rule in WAIVABLE:
                exemption = f"waive {finding.rule.replace('-', '_')} for {called(kernel)}: \"reason\""
                hint = f"{hint}; or exempt it: `{exemption}`"
            detail = (f": {finding.instruction}" if finding.rule == "unfollowed-call"  # a description
                      else f" (`{finding.instruction}`)")
            ctx.sink.add(RULES[finding.rule], f"kernel `{called(kernel)}` {what}{detail}", finding.span,
                         hint, labels=tuple(labels))
    for key, waiver in waived.items():
        if key not in used_waivers and not ctx.program.dropped_statements:
            what = (f"the step's `{called(waiver.kernel)}` has no {waiver.rule} finding"
                    if waiver.kernel in first_use
                    else f"the step never launches `{called(waiver.kernel)}`")
            ctx.sink.add(PC003, f"nothing to waive: {what}", waiver.span, "remove the waiver",
                         fixes=(removal("Remove the waiver", waiver.span),))
