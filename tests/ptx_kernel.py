"""A PTX module of one kernel `k` for the analysis tests: its parameters (`k_param_<i>` of the
given types), registers enough for any test, `setup` (where the parameters are loaded), then
`body`, all on line 1 of `k.cu` unless the body says otherwise with its own `.loc`."""

from __future__ import annotations

from pipec.compiler import ptx


def kernel_module(setup: str, body: str, params: tuple[str, ...], extra: str = "") -> ptx.AnalysedModule:
    declared = ",\n".join(f"  .param .{kind} k_param_{i}" for i, kind in enumerate(params))
    return ptx.parse(f""".version 8.8
.target sm_90
.address_size 64
{extra}
.visible .entry k(
{declared}
)
{{
  .reg .pred %p<9>;
  .reg .b32 %r<40>;
  .reg .f32 %f<40>;
  .reg .b64 %rd<40>;
  .loc 1 1 1
{setup}
{body}
  ret;
}}
  .file 1 "k.cu"
""")
