"""The waiver pass: `waive RULE for KERNEL: "reason"` exempts one kernel from a PTX rule.

A waiver names a kernel's identity, not a bare function name: two kernels called `k` in two
sources are two kernels. `for "file.cu":k` names the source (a path found like an import's);
a bare `for k` names the kernel the file imports as `k`, or else the one kernel of that name
anywhere in the program, and is an error when there are several.
"""

from __future__ import annotations

import os

from ...dsl import ast
from ..codes import PC103, PC108, PC305, PC306, PC307
from ..model import Kernel, WaivableRule, Waiver
from .context import Context
from .files import ProjectFiles
from .scope import InvalidSymbol, KernelSymbol, LoadedModule
from .spelling import did_you_mean

WAIVABLE_RULES: dict[str, WaivableRule] = {
    "atomics": "atomics", "atomic_operation": "atomics", PC305.code: "atomics",
    "spin_wait": "spin-wait", "inter_block_spin_wait": "spin-wait", PC306.code: "spin-wait",
    "fence_barrier": "fence-barrier", "fence_as_barrier": "fence-barrier", PC307.code: "fence-barrier",
}


def program_waivers(ctx: Context, files: ProjectFiles, kernels: list[Kernel],
                    module: LoadedModule) -> list[Waiver]:
    """The main file's waivers, each naming kernels among `kernels`, those imported."""
    waivers = []
    for decl in module.tree.decls:
        if not isinstance(decl, ast.WaiveDecl):
            continue
        rule = WAIVABLE_RULES.get(decl.rule.text)
        if rule is None:
            ctx.sink.add(PC108, f"`{decl.rule.text}` cannot be waived", decl.rule.span,
                         "waivable rules: atomics, spin_wait, fence_barrier")
            continue
        waived = _waived_kernels(ctx, files, kernels, module, decl)
        if waived and not decl.reason.value.strip():
            ctx.sink.add(PC108, "a waiver needs a reason", decl.reason.span,
                         "say why this kernel is safe despite the rule")
        elif waived:
            waivers += [Waiver(rule, kernel, decl.reason.value, decl.span) for kernel in waived]
    return waivers


def _waived_kernels(ctx: Context, files: ProjectFiles, kernels: list[Kernel], module: LoadedModule,
                    decl: ast.WaiveDecl) -> list[Kernel]:
    """The kernels the waiver names (one, or one per compilation of a source), or none
    after a report."""
    name = decl.kernel.text
    if decl.file is not None:
        target, refused = files.find(module.path.parent, decl.file.value)
        if target is None and refused:
            files.refuse(decl.file.value, decl.file.span)
            return []
        found = [k for k in kernels if k.name == name and k.source.path == target]
        if not found:
            ctx.sink.add(PC103, f"no kernel `{name}` is imported from `{decl.file.value}`",
                         decl.kernel.span, "name a kernel source the pipeline imports, "
                         "with its path as in the import")
        return found
    symbol = module.scope.get(name)
    if isinstance(symbol, InvalidSymbol):
        return []  # its import failed, and was reported
    if isinstance(symbol, KernelSymbol):
        return [symbol.kernel]
    found = [k for k in kernels if k.name == name]
    if len(found) > 1:
        sources = ", ".join(f'`"{os.path.relpath(k.source.path, module.path.parent)}":{name}`'
                            for k in found)
        ctx.sink.add(PC108, f"`{name}` names {len(found)} kernels of different sources",
                     decl.kernel.span, f"name the one to waive: {sources}")
        return []
    if not found:
        similar = did_you_mean(name, module.names_of(KernelSymbol), "kernels", decl.kernel.span)
        ctx.sink.add(PC103, f"`{name}` is not an imported kernel", decl.kernel.span, similar.hint,
                     fixes=similar.fixes)
    return found
