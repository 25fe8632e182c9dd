"""Plans holding GEMM nodes, built by hand (the runtime's tests need no `.pipe` syntax for them):
buffers, and one step graph of GEMM nodes, each with its own workspace buffer."""

from __future__ import annotations

import dataclasses

from pipec.plan.dtypes import DTYPES
from pipec.plan.schema import (
    AccessSpec, BufferSpec, ChildGraphNodeSpec, GemmNodeSpec, GraphSpec, InitSpec, Location, MatrixSpec, Plan,
)

WORKSPACE_BYTES = 4 << 20


def matrix(buffer: str, rows: int, cols: int, dtype: str = "f32", *, ld: int | None = None,
           batch_stride: int = 0, byte_offset: int = 0) -> MatrixSpec:
    return MatrixSpec(buffer, byte_offset, dtype, rows, cols, cols if ld is None else ld, batch_stride)


def _access(spec: MatrixSpec, batch: int, mode: str) -> AccessSpec:
    """The elements of the buffer `spec` spans (for a ReLU mask, bytes of eight elements)."""
    extent = (batch - 1) * spec.batch_stride + (spec.rows - 1) * spec.ld + spec.cols
    if spec.dtype == "u8":
        return AccessSpec(spec.buffer, spec.byte_offset, spec.byte_offset + (extent + 7) // 8, mode)
    start = spec.byte_offset // DTYPES[spec.dtype].size
    return AccessSpec(spec.buffer, start, start + extent, mode)


def gemm(node_id: int, name: str, *, a: MatrixSpec, b: MatrixSpec, c: MatrixSpec, trans_a: bool = False,
         trans_b: bool = False, batch: int = 1, alpha: float = 1.0, beta: float = 0.0, compute: str = "f32",
         epilogue: str = "none", bias: MatrixSpec | None = None, aux: MatrixSpec | None = None,
         bias_grad: MatrixSpec | None = None, line: int = 1) -> GemmNodeSpec:
    m, k = (a.cols, a.rows) if trans_a else (a.rows, a.cols)
    n = b.rows if trans_b else b.cols
    backward = epilogue in ("drelu", "dgelu")
    accesses = [_access(a, batch, "r"), _access(b, batch, "r"), _access(c, batch, "rw" if beta else "w")]
    accesses += [_access(v, batch, mode) for v, mode in ((bias, "r"), (aux, "r" if backward else "w"),
                                                          (bias_grad, "w")) if v is not None]
    workspace = f"{name}.workspace"
    accesses.append(AccessSpec(workspace, 0, WORKSPACE_BYTES, "w"))
    return GemmNodeSpec(node_id, name, Location("gemm.pipe", line, 5), tuple(accesses), m, n, k, batch, a, b, c,
                        trans_a, trans_b, alpha, beta, compute, epilogue, bias, aux, bias_grad, workspace,
                        WORKSPACE_BYTES)


def buffer(name: str, dtype: str, shape: tuple[int, ...], init: InitSpec | None = None,
           first: str | None = "read") -> BufferSpec:
    count = 1
    for size in shape:
        count *= size
    return BufferSpec(name, dtype, shape, "device", init or InitSpec("uniform", (-1.0, 1.0), 7, None), (),
                      count * DTYPES[dtype].size, Location("gemm.pipe", 1, 1), first)


def gemm_plan(buffers: list[BufferSpec], nodes: list[GemmNodeSpec], edges: tuple | None = None,
              children: bool = False) -> Plan:
    """One step graph of `nodes` (in a chain unless `edges` says otherwise), with `buffers` and
    each node's workspace. With `children`, each node sits alone in a child graph of the step
    (scope `step/<node name>`), and the step chains those."""
    workspaces = [buffer(n.workspace, "u8", (n.workspace_bytes,), InitSpec("uninit", (), None, None), "write")
                  for n in nodes]
    chain = tuple((i, i + 1) for i in range(len(nodes) - 1))
    edges = chain if edges is None else edges
    if not children:
        graphs = (GraphSpec(0, "step", "step", tuple(nodes), edges, ()),)
    else:
        holders = tuple(ChildGraphNodeSpec(i, n.name, n.location, n.accesses, i + 1) for i, n in enumerate(nodes))
        graphs = (GraphSpec(0, "step", "step", holders, edges, ()),) + tuple(
            GraphSpec(i + 1, n.name, f"step/{n.name}", (dataclasses.replace(n, id=0),), (), ())
            for i, n in enumerate(nodes))
    return Plan("gemm.pipe", "0" * 64, "test", "sm_90", "nvrtc", 1, tuple(buffers + workspaces), (), graphs, 0, None)
