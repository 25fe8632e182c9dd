"""What a node costs: pipec's explicit graphs against eager launches, CuPy stream capture and
PyTorch CUDA graphs, for chains of tiny dependent kernels and for fans under one root, and
how the plan's lane bound changes a wide fan.

    python bench/launch_overhead.py [--sizes 10 100 1000 5000] [--out DIR]

Figures are medians over repeats after warm-up; GPU time from CUDA events; host time from
perf_counter around one launch call with the GPU idle."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from common import KERNELS, TINY, chain_pipe, cuda_events_ms, environment, fan_pipe, host_us, median, save_json, table, write_pipe

REPEATS = 30


def measure_pipec(path: Path, nodes: int) -> dict:
    import pipec
    from pipec.runtime.graph import BuiltGraph

    with pipec.load(path) as p:
        call, cu = p.driver.call, p.driver.cu
        # Build + instantiate + upload again, timed, now that modules are compiled and cached.
        builds = []
        for _ in range(3):
            t = time.perf_counter()
            graph = BuiltGraph(p.plan, p.plan.step, p._buffers, p.modules, p.device, p.stream)
            builds.append((time.perf_counter() - t) * 1000)
            graph.close()
        p.step(10)
        replays = max(1, min(200, 20000 // nodes))
        gpu = cuda_events_ms(call, p.stream, lambda: p.step(replays), REPEATS)
        launch_host = host_us(lambda: p.step(1), 200, settle=p.synchronize)
        raw_launch = host_us(lambda: cu.cuGraphLaunch(p.graph.exec, p.stream), 200, settle=p.synchronize)
        eager_gpu = cuda_events_ms(call, p.stream, lambda: p.run_eager(1), 5)
        eager_host = host_us(lambda: p.run_eager(1), 5, settle=p.synchronize)
        call("cuStreamSynchronize", p.stream)
        return {
            "nodes": nodes,
            "replay_us_per_node": median(gpu) * 1000 / replays / nodes,
            "replay_us_per_step": median(gpu) * 1000 / replays,
            "launch_host_us": median(launch_host),
            "python_work_us": max(0.0, median(launch_host) - median(raw_launch)),
            "build_instantiate_ms": median(builds),
            "eager_us_per_node": median(eager_gpu) * 1000 / nodes,
            "eager_host_us_per_node": median(eager_host) / nodes,
            "graph_nodes": p.graph.node_count,
            "programmatic_edges": p.graph.programmatic_edges,
        }


def measure_cupy(nodes: int) -> dict | None:
    try:
        import cupy
    except ImportError:
        return None
    module = cupy.RawModule(code=TINY.read_text(), options=("--std=c++17", f"-I{KERNELS}"))
    tiny = module.get_function("tiny")
    counter = cupy.zeros(1, cupy.uint32)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        tiny((1,), (32,), (counter,))
        stream.synchronize()
        t = time.perf_counter()
        stream.begin_capture()
        for _ in range(nodes):
            tiny((1,), (32,), (counter,))
        graph = stream.end_capture()
        graph.upload(stream)
        stream.synchronize()
        build = (time.perf_counter() - t) * 1000
    replays = max(1, min(200, 20000 // nodes))
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    gpu = []
    for _ in range(REPEATS):
        start.record(stream)
        for _ in range(replays):
            graph.launch(stream)
        end.record(stream)
        end.synchronize()
        gpu.append(cupy.cuda.get_elapsed_time(start, end))
    host = host_us(lambda: graph.launch(stream), 200, settle=stream.synchronize)
    return {"nodes": nodes, "replay_us_per_node": median(gpu) * 1000 / replays / nodes,
            "launch_host_us": median(host), "build_instantiate_ms": build}


def measure_torch(nodes: int) -> dict | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    x = torch.zeros(1, dtype=torch.int32, device="cuda")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(3):
            x.add_(1)
    torch.cuda.synchronize()
    t = time.perf_counter()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(nodes):
            x.add_(1)
    torch.cuda.synchronize()
    build = (time.perf_counter() - t) * 1000
    replays = max(1, min(200, 20000 // nodes))
    gpu = []
    for _ in range(REPEATS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        end.synchronize()
        gpu.append(start.elapsed_time(end))
    host = host_us(graph.replay, 200, settle=torch.cuda.synchronize)
    return {"nodes": nodes, "replay_us_per_node": median(gpu) * 1000 / replays / nodes,
            "launch_host_us": median(host), "build_instantiate_ms": build}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000, 5000])
    parser.add_argument("--lanes", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 1024])
    parser.add_argument("--out", type=Path, default=Path("out"))
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="pipec-bench-"))
    results: dict = {"environment": environment(), "chain": [], "fan": [], "lanes": [],
                     "chain_pdl": [], "chain_pdl_off": [], "cupy_capture_chain": [], "torch_graph_chain": []}
    def record(key: str, entry: dict | None) -> None:
        if entry is not None:
            results[key].append(entry)
            print(key, entry, flush=True)  # partial results survive a time limit
            save_json(args.out / "launch_overhead.json", results)

    for n in args.sizes:
        record("chain", measure_pipec(write_pipe(folder, f"chain{n}", chain_pipe(n)), n))
        record("fan", measure_pipec(write_pipe(folder, f"fan{n}", fan_pipe(n)), n + 1))
        for pdl in ("auto", "off"):  # the same waiting kernel, with and without programmatic edges
            record(f"chain_pdl{'_off' * (pdl == 'off')}",
                   measure_pipec(write_pipe(folder, f"chain{n}_pdl_{pdl}", chain_pipe(n, pdl=pdl)), n))
        record("cupy_capture_chain", measure_cupy(n))
        record("torch_graph_chain", measure_torch(n))
    for lanes in args.lanes:
        entry = measure_pipec(write_pipe(folder, f"fan1000_l{lanes}", fan_pipe(1000, lanes)), 1001)
        record("lanes", {"lanes": lanes, **entry})

    rows = []
    for kind, key in (("pipec graph, chain", "chain"),
                      ("pipec graph, chain of tiny_pdl, programmatic edges", "chain_pdl"),
                      ("pipec graph, chain of tiny_pdl, pdl off", "chain_pdl_off"),
                      ("pipec graph, fan (8 lanes)", "fan"),
                      ("CuPy capture, chain", "cupy_capture_chain"), ("PyTorch CUDAGraph, chain", "torch_graph_chain")):
        for r in results[key]:
            rows.append([kind, r["nodes"], r["replay_us_per_node"], r["launch_host_us"], r["build_instantiate_ms"]])
    for r in results["chain"]:
        rows.append(["eager cuda-python, chain", r["nodes"], r["eager_us_per_node"], r["eager_host_us_per_node"], "-"])
    print(table(["what", "nodes", "GPU us/node", "host us/launch", "build+inst ms"], rows))
    print()
    print(table(["lanes (fan of 1000)", "GPU us/node", "host us/launch", "build+inst ms"],
                [[r["lanes"], r["replay_us_per_node"], r["launch_host_us"], r["build_instantiate_ms"]]
                 for r in results["lanes"]]))
    print()
    print(table(["chain nodes", "piperun Python work us/step", "launch host us"],
                [[r["nodes"], r["python_work_us"], r["launch_host_us"]] for r in results["chain"]]))


if __name__ == "__main__":
    main()
