"""Shared by the benchmark scripts: generated pipelines, timing with CUDA events, tables."""

from __future__ import annotations

import json
import platform
import shutil
import statistics
import subprocess
import time
from pathlib import Path

BENCH = Path(__file__).parent
TINY = BENCH / "tiny.cu"
KERNELS = BENCH.parent / "kernels"  # pipec's shipped headers (tiny.cu includes pdl.cuh)


def chain_pipe(n: int, lanes: int = 8, pdl: str | None = None) -> str:
    """n dependent tiny kernels: every node updates one slot. With `pdl` ("auto" or "off"), the
    kernel that waits for the node before (tiny_pdl) under that `option pdl`."""
    kernel = "tiny" if pdl is None else "tiny_pdl"
    option = "" if pdl is None else f'option pdl = "{pdl}"\n'
    body = "\n".join(f"    launch {kernel}<<<1, 32>>>(counter)" for _ in range(n))
    return (f'from "{TINY.name}" import {kernel}\noption lanes = {lanes}\n{option}buffer counter: u32[1]\n'
            f"step {{\n{body}\n}}\n")


def fan_pipe(n: int, lanes: int = 8) -> str:
    """One root node, then n independent nodes that each read the root and write their own slot."""
    body = "\n".join(f"    launch leaf<<<1, 32>>>(in root, out slots[{i}:{i + 1}])" for i in range(n))
    return (f'from "{TINY.name}" import tiny, leaf\noption lanes = {lanes}\nbuffer root: u32[1]\n'
            f"buffer slots: u32[{n}]\nstep {{\n    launch tiny<<<1, 32>>>(root)\n{body}\n}}\n")


def write_pipe(folder: Path, name: str, text: str) -> Path:
    """`folder`/`name`.pipe holding `text`, with a copy of tiny.cu beside it: the generated
    pipelines import it from their own folder (imports stay inside a file's project, PC110)."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(TINY, folder / TINY.name)
    path = folder / f"{name}.pipe"
    path.write_text(text)
    return path


def median(values) -> float:
    return statistics.median(values)


def cuda_events_ms(call, stream, fn, repeats: int) -> list[float]:
    """GPU milliseconds of `fn()` enqueued on `stream`, once per repeat; `call` is the driver's
    (a pipeline's `p.driver.call`)."""
    start, end = call("cuEventCreate", 0), call("cuEventCreate", 0)
    out = []
    try:
        for _ in range(repeats):
            call("cuEventRecord", start, stream)
            fn()
            call("cuEventRecord", end, stream)
            call("cuEventSynchronize", end)
            out.append(call("cuEventElapsedTime", start, end))
    finally:
        call("cuEventDestroy", start)
        call("cuEventDestroy", end)
    return out


def host_us(fn, repeats: int, settle=None) -> list[float]:
    """Host microseconds of one `fn()` call; `settle()` (e.g. a synchronize) runs untimed after each."""
    out = []
    for _ in range(repeats):
        t = time.perf_counter_ns()
        fn()
        out.append((time.perf_counter_ns() - t) / 1000)
        if settle is not None:
            settle()
    return out


def table(headers: list[str], rows: list[list]) -> str:
    cells = [[str(h) for h in headers]] + [[f"{c:.3f}" if isinstance(c, float) else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    line = lambda row: "| " + " | ".join(c.rjust(w) for c, w in zip(row, widths)) + " |"
    return "\n".join([line(cells[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in cells[1:]])


def environment() -> dict:
    """Date, GPU, driver and the versions of every framework measured. Versions come from the
    installed distributions' metadata, without importing JAX (which would claim most of the
    GPU's memory before the benchmarks run)."""
    from importlib import metadata

    info = {"python": platform.python_version(), "date": time.strftime("%Y-%m-%d")}
    try:
        from pipec.runtime.driver import open_device

        device = open_device()
        info["gpu"], info["arch"], info["driver_api"] = device.name, device.arch, device.driver_version
    except Exception as error:  # no GPU: the figures below will say so themselves
        info["gpu"] = f"none ({type(error).__name__})"
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=True)
        info["nvidia_smi"] = smi.stdout.strip()
    except (OSError, subprocess.SubprocessError) as error:
        info["nvidia_smi"] = f"unavailable ({type(error).__name__})"
    names = ["cuda-python", "cuda-bindings", "cupy-cuda12x", "cupy-cuda13x", "torch", "jax", "jaxlib", "numpy"]
    names += sorted(d.metadata["Name"] for d in metadata.distributions()
                    if (d.metadata["Name"] or "").lower().startswith(("jax-cuda", "jax_cuda")))
    for name in names:
        try:
            info[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            info[name] = None
    try:
        import torch

        info["torch_cuda"] = torch.version.cuda
    except ImportError:
        pass
    return info


def save_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))
