"""Driving the C runtime (native/) on CPU and the Python runtime on tests/fake_cuda.py over the
same bundle, and describing what each handed its driver in one normal form.

`build_native` configures and builds native/ with CMake; `run_native` runs
native/tests/run_fake.c over a bundle through native/tests/fake_cuda.c, whose log holds the
instantiated graph, the conditional handles, every kernel that ran and every cuBLASLt matmul.
`describe_python` and `describe_native` turn both sides into the same description: graphs as
trees of nodes (kind, dependencies by index, the producers of programmatic edges into the node by
index, work), device addresses as `buffer+offset`,
conditional handles by creation order, the graphs that hold them by their path in the tree.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
NATIVE = ROOT / "native"


def native_tools_missing() -> str | None:
    """Why the native build cannot run here, or None."""
    missing = [tool for tool in ("cmake", "cc") if shutil.which(tool) is None]
    return f"{' and '.join(missing)} not found: the C runtime cannot be built" if missing else None


def build_native(build: Path, sanitize: bool = False) -> Path:
    """Configure and build native/ into `build`; returns the folder holding its outputs."""
    configure = ["cmake", "-S", str(NATIVE), "-B", str(build), f"-DPIPEC_SANITIZE={'ON' if sanitize else 'OFF'}"]
    for command in (configure, ["cmake", "--build", str(build), "-j", str(os.cpu_count() or 2)]):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise AssertionError(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")
    return build


@dataclass
class NativeRun:
    result: dict  # what run_fake.c wrote
    log: list[dict]  # the fake driver's and fake cuBLASLt's events, in order
    stderr: str  # run_fake.c's messages: the runtime's one-line errors


def fake_environment(build: Path, work: Path, param_sizes: dict) -> dict[str, str]:
    """The variables that point the C runtime at the fake driver and fake cuBLASLt, logging into `work`."""
    work.mkdir(parents=True, exist_ok=True)
    sizes, log = work / "param_sizes.json", work / "fake_cuda.log"
    sizes.write_text(json.dumps(param_sizes))
    log.unlink(missing_ok=True)
    return {**os.environ, "PIPEC_DRIVER_LIBRARY": str(build / "libfake_cuda.so"),
            "PIPEC_CUBLASLT_LIBRARY": str(build / "libfake_cublaslt.so"),
            "PIPEC_NCCL_LIBRARY": str(build / "libfake_nccl.so"), "FAKE_CUDA_LOG": str(log),
            "FAKE_CUDA_PARAM_SIZES": str(sizes)}


def run_native(build: Path, bundle: Path, work: Path, param_sizes: dict, *options: str) -> NativeRun:
    env = fake_environment(build, work, param_sizes)
    log, out = Path(env["FAKE_CUDA_LOG"]), work / "run.json"
    done = subprocess.run([str(build / "run_fake"), str(bundle), str(out), *options], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, f"run_fake failed ({done.returncode}): {done.stderr}"
    events = [json.loads(line) for line in log.read_text().splitlines()]
    return NativeRun(json.loads(out.read_text()), events, done.stderr)


class Normal:
    """Addresses and handles in a side's own numbers, and how to say them in common terms."""

    def __init__(self, buffers: dict[str, tuple[int, int]], handles: list[int]) -> None:
        self.buffers = buffers  # name -> (address, bytes)
        self.handles = {value: i for i, value in enumerate(handles)}

    def pointer(self, value: int) -> str | int:
        for name, (start, size) in self.buffers.items():
            if start <= value < start + max(size, 1):
                return f"{name}+{value - start}"
        return value

    def argument(self, raw: bytes) -> str:
        if len(raw) == 8:
            value = struct.unpack("<Q", raw)[0]
            if value in self.handles:
                return f"handle {self.handles[value]}"
            pointer = self.pointer(value)
            if isinstance(pointer, str):
                return pointer
        return raw.hex()


def _kernel(normal: Normal, function: str, grid, block, shared: int, args) -> dict:
    return {"function": function, "grid": list(grid), "block": list(block), "shared": shared,
            "args": None if args is None else [normal.argument(a) for a in args]}


def describe_python(fake, root, normal: Normal, paths: dict | None = None, path: str = "root") -> list[dict]:
    """A tests/fake_cuda.py graph as the common description; `paths` collects each graph's path."""
    if paths is not None:
        paths[id(root)] = path
    index = {node.handle: i for i, node in enumerate(root.nodes)}
    nodes = []
    for i, node in enumerate(root.nodes):
        entry = {"kind": node.kind, "deps": [index[d] for d in node.deps],
                 "programmatic": [index[d] for d in node.programmatic]}
        work = node.work
        if node.kind == "kernel":
            entry.update(_kernel(normal, work.function, work.grid, work.block, work.shared_bytes, work.args))
        elif node.kind == "memset":
            entry.update(dst=normal.pointer(work.dst), element_size=work.element_size, value=work.value,
                         count=work.count)
        elif node.kind == "memcpy":
            entry.update(dst=normal.pointer(work.dst), src=normal.pointer(work.src), nbytes=work.nbytes)
        elif node.kind == "graph":
            entry["child"] = describe_python(fake, node.child, normal, paths, f"{path}/{i}")
        elif node.kind == "conditional":
            entry.update(type=int(work.type), handle=normal.handles[work.handle.number],
                         bodies=[describe_python(fake, body, normal, paths, f"{path}/{i}/{b}")
                                 for b, body in enumerate(work.bodies)])
        nodes.append(entry)
    return nodes


def describe_native(tree: dict, normal: Normal, paths: dict | None = None, path: str = "root") -> list[dict]:
    """fake_cuda.c's logged graph as the common description."""
    if paths is not None:
        paths[tree["id"]] = path
    nodes = []
    for i, node in enumerate(tree["nodes"]):
        entry = {"kind": node["kind"], "deps": node["deps"], "programmatic": node["programmatic"]}
        if node["kind"] == "kernel":
            entry.update(_native_kernel(normal, node))
        elif node["kind"] == "memset":
            entry.update(dst=normal.pointer(node["dst"]), element_size=node["element_size"], value=node["value"],
                         count=node["count"])
        elif node["kind"] == "memcpy":
            entry.update(dst=normal.pointer(node["dst"]), src=normal.pointer(node["src"]), nbytes=node["nbytes"])
        elif node["kind"] == "graph":
            entry["child"] = describe_native(node["child"], normal, paths, f"{path}/{i}")
        elif node["kind"] == "conditional":
            entry.update(type=node["type"], handle=normal.handles[node["handle"]],
                         bodies=[describe_native(body, normal, paths, f"{path}/{i}/{b}")
                                 for b, body in enumerate(node["bodies"])])
        nodes.append(entry)
    return nodes


def _native_kernel(normal: Normal, event: dict) -> dict:
    args = None if event["args"] is None else [bytes.fromhex(a) for a in event["args"]]
    return _kernel(normal, event["function"], event["grid"], event["block"], event["shared"], args)


def python_launches(fake, normal: Normal) -> list[dict]:
    """Every kernel run, and whether it was launched with programmatic stream serialization."""
    return [{**_kernel(normal, w.function, w.grid, w.block, w.shared_bytes, w.args),
             "serialized": any(w is s for s in fake.serialized)} for w in fake.launches]


def native_launches(log: list[dict], normal: Normal) -> list[dict]:
    return [{**_native_kernel(normal, e), "serialized": e["serialized"]} for e in log if e["event"] == "run"]


POINTER_ATTRIBUTES = ("BIAS_POINTER", "EPILOGUE_AUX_POINTER")


def _matmul(normal: Normal, desc: dict, layouts, alpha, beta, pointers, algorithm: str, workspace, workspace_bytes):
    desc = {k: normal.pointer(v) if k in POINTER_ATTRIBUTES else v for k, v in desc.items()}
    return {"desc": desc, "layouts": list(layouts), "alpha": float(np.float32(alpha)), "beta": float(np.float32(beta)),
            "pointers": [normal.pointer(p) for p in pointers], "algorithm": algorithm,
            "workspace": normal.pointer(workspace), "workspace_bytes": workspace_bytes}


def python_matmuls(library, normal: Normal) -> list[dict]:
    return [_matmul(normal, m.desc, m.layouts, m.alpha, m.beta, m.pointers, m.algorithm.hex(), m.workspace,
                    m.workspace_bytes) for m in library.matmuls]


def python_collectives(communicator, normal: Normal) -> list[dict]:
    """Every NCCL call tests/fake_nccl.py's communicator took, in order."""
    return [{"call": what, "count": count, "dtype": dtype, "detail": detail, "captured": captured, "grouped": grouped,
             "src": normal.pointer(src), "dst": normal.pointer(dst)}
            for what, count, dtype, detail, captured, grouped, src, dst in communicator.calls]


def native_collectives(log: list[dict], normal: Normal) -> list[dict]:
    """Every NCCL call native/tests/fake_nccl.c took, in order."""
    return [{**{k: v for k, v in e.items() if k != "event"}, "src": normal.pointer(e["src"]),
             "dst": normal.pointer(e["dst"])} for e in log if e["event"] == "nccl"]


def native_matmuls(log: list[dict], normal: Normal) -> list[dict]:
    from fake_cublaslt import MatmulDescAttribute, MatrixLayoutAttribute

    out = []
    for e in (e for e in log if e["event"] == "matmul"):
        desc = {MatmulDescAttribute(int(k)).name: v for k, v in e["desc"].items()}
        layouts = [{MatrixLayoutAttribute(int(k)).name: v for k, v in layout.items()} for layout in e["layouts"]]
        out.append(_matmul(normal, desc, layouts, e["alpha"], e["beta"], e["pointers"], e["algorithm"],
                           e["workspace"], e["workspace_bytes"]))
    return out
