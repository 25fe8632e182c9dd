"""`option NAME = VALUE` declarations of the main file (PC108 for an unknown name or value)."""

from __future__ import annotations

from ...dsl import ast
from ..codes import PC108
from ..consteval import literal
from ..model import Options
from .context import Context
from .scope import Abort, LoadedModule
from .spelling import did_you_mean

MAX_GEMM_WORKSPACE = 1 << 30  # per GEMM node; cuBLASLt's heuristics ask for tens of MiB at most
OPTION_NAMES = ("lanes", "copy", "share_modules", "gemm_workspace", "pdl")


def program_options(ctx: Context, module: LoadedModule) -> Options:
    """The main file's `option` declarations; `--lanes` overrides its `lanes`."""
    values: dict = {}
    share_span = None
    for decl in module.tree.decls:
        if not isinstance(decl, ast.OptionDecl):
            continue
        name = decl.name.text
        try:
            value = ctx.const(module, decl.value, use=f"option `{name}`")
        except Abort:
            continue
        if name == "lanes" and isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 1024:
            values["lanes"] = value
        elif name == "copy" and value in ("memcpy", "kernel"):
            values["copy"] = value
        elif name == "pdl" and value in ("auto", "off"):
            values["pdl"] = value
        elif name == "share_modules" and isinstance(value, bool):
            values["share_modules"] = value
            share_span = decl.span
        elif (name == "gemm_workspace" and isinstance(value, int) and not isinstance(value, bool)
              and 0 < value <= MAX_GEMM_WORKSPACE and value % 256 == 0):
            values["gemm_workspace"] = value
        elif name in OPTION_NAMES:
            expected = {"lanes": "an integer from 1 to 1024", "copy": '"memcpy" or "kernel"',
                        "share_modules": "true or false", "pdl": '"auto" or "off"',
                        "gemm_workspace": "a positive multiple of 256 bytes up to 1 GiB"}[name]
            ctx.sink.add(PC108, f"option `{name}` cannot be `{literal(value)}`", decl.value.span,
                         f"`{name}` takes {expected}")
        else:
            similar = did_you_mean(name, list(OPTION_NAMES), "options", decl.name.span)
            ctx.sink.add(PC108, f"unknown option `{name}`", decl.name.span, similar.hint, fixes=similar.fixes)
    if ctx.options.lanes is not None:
        values["lanes"] = ctx.options.lanes
    return Options(**values, share_modules_span=share_span)
