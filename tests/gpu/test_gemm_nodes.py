"""GEMM nodes on a real GPU through cuBLASLt (nvmath-python), against PyTorch.

Plans are built by hand (tests/gemm_plans.py); PyTorch tensors are bound as the buffers, so
inputs and references stay on the GPU. References are computed in float64 from the very
inputs the node read. Forward tolerances bound each element's error relative to the sum of
the magnitudes that produced it, sum_k |op(a)_ik| |op(b)_kj| (+ |bias_j| + |beta c_ij|):
f32 1e-5 (k products accumulated in f32), TF32 2e-3 (inputs rounded to 10 mantissa bits),
f16 output 2e-3 and bf16 output 1e-2 (the output's own rounding: 2^-11 and 2^-8 relative),
f32 output from f16/bf16 inputs 1e-5 (the products are exact in f32). The backward tests
compare whole layers against torch.autograd, relative to the largest reference element: f32
1e-4, f16 1e-2, bf16 3e-2 (their activations are stored in the element type between layers).
GELU (cuBLASLt's is the tanh form) adds `GELU_SLACK`, 1e-3: the epilogue may evaluate tanh
with the GPU's fast approximation (relative error about 2^-11), which f32 would otherwise see.
"""

from __future__ import annotations

import numpy as np
import pytest

from gemm_plans import buffer, gemm, gemm_plan, matrix

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

from pipec.runtime.driver import open_device, release_device  # noqa: E402
from pipec.runtime.cublaslt import GemmError, GemmSettings  # noqa: E402
from pipec.runtime.library import LibraryRecordingError, record_call  # noqa: E402
from pipec.runtime.pipeline import Pipeline  # noqa: E402

TORCH = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "u8": torch.uint8}
NAMES = {v: k for k, v in TORCH.items()}
FORWARD_TOLERANCE = {("f32", "f32", "f32"): 1e-5, ("f32", "f32", "tf32"): 2e-3, ("f16", "f16", "f32"): 2e-3,
                     ("bf16", "bf16", "f32"): 1e-2, ("f16", "f32", "f32"): 1e-5, ("bf16", "f32", "f32"): 1e-5}
BACKWARD_TOLERANCE = {"f32": 1e-4, "f16": 1e-2, "bf16": 3e-2}
GELU_SLACK = 1e-3
TYPES = list(FORWARD_TOLERANCE)  # (inputs, output, compute)


@pytest.fixture(autouse=True)
def exact_torch():
    """PyTorch's own matmuls in full f32 (its references are float64 anyway)."""
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = previous


def random(shape, dtype: str, seed: int, scale: float = 1.0):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    values = (torch.rand(shape, generator=generator, device="cuda", dtype=torch.float32) * 2 - 1) * scale
    return values.to(TORCH[dtype])


def load(tensors: dict, nodes, outputs=(), edges=None, **settings) -> Pipeline:
    """A pipeline over `tensors` (bound as its buffers) running `nodes` in a chain."""
    buffers = [buffer(name, NAMES[t.dtype], tuple(t.shape), first="write" if name in outputs else "read")
               for name, t in tensors.items()]
    torch.cuda.synchronize()
    return Pipeline(gemm_plan(buffers, nodes, edges), [], open_device(0), bind=tensors,
                    gemm=GemmSettings(**settings))


def run(pipeline: Pipeline) -> None:
    pipeline.step()
    pipeline.synchronize()


def within(actual, expected, scale, tolerance: float, what: str) -> None:
    error = (actual.double() - expected).abs()
    worst = int(torch.argmax(error - tolerance * scale))
    assert bool((error <= tolerance * scale).all()), (
        f"{what}: element {worst} is {actual.reshape(-1)[worst].item()}, expected "
        f"{expected.reshape(-1)[worst].item()} (error {error.reshape(-1)[worst].item():.3g}, "
        f"allowed {tolerance * scale.reshape(-1)[worst].item():.3g})")


def op(x, transposed: bool):
    return x.transpose(-1, -2) if transposed else x


@pytest.mark.parametrize("types", TYPES, ids=lambda t: "-".join(t))
@pytest.mark.parametrize("trans_a, trans_b", [(False, False), (True, False), (False, True), (True, True)])
def test_every_type_and_transpose_against_torch(types, trans_a, trans_b):
    inputs, output, compute = types
    m, n, k = 64, 48, 40
    a = random((k, m) if trans_a else (m, k), inputs, 1)
    b = random((n, k) if trans_b else (k, n), inputs, 2)
    c = random((m, n), output, 3)
    c0 = c.double().clone()
    node = gemm(0, "gemm:c", a=matrix("a", *a.shape, inputs), b=matrix("b", *b.shape, inputs),
                c=matrix("c", m, n, output), trans_a=trans_a, trans_b=trans_b, alpha=0.5, beta=0.25, compute=compute)
    with load({"a": a, "b": b, "c": c}, [node]) as pipeline:
        run(pipeline)
        A, B = op(a.double(), trans_a), op(b.double(), trans_b)
        expected = 0.5 * A @ B + 0.25 * c0
        scale = 0.5 * A.abs() @ B.abs() + 0.25 * c0.abs()
        within(c, expected, scale, FORWARD_TOLERANCE[types], f"{types} trans_a={trans_a} trans_b={trans_b}")


def test_a_strided_batch_with_a_shared_matrix():
    batch, m, n, k = 3, 32, 40, 24
    a, b, c = random((batch, m, k), "f32", 4), random((k, n), "f32", 5), torch.empty(batch, m, n, device="cuda")
    node = gemm(0, "gemm:c", batch=batch, a=matrix("a", m, k, batch_stride=m * k), b=matrix("b", k, n),
                c=matrix("c", m, n, batch_stride=m * n))
    with load({"a": a, "b": b, "c": c}, [node], outputs={"c"}) as pipeline:
        run(pipeline)
        A, B = a.double(), b.double()
        within(c, A @ B, A.abs() @ B.abs(), 1e-5, "batch")


def gelu(z):
    return torch.nn.functional.gelu(z, approximate="tanh")  # cuBLASLt's GELU is the tanh form


ACTIVATIONS = {"none": lambda z: z, "relu": torch.relu, "gelu": gelu}


@pytest.mark.parametrize("inputs, output", [("f32", "f32"), ("f16", "f16"), ("bf16", "bf16"), ("bf16", "f32")],
                         ids=lambda t: t)
@pytest.mark.parametrize("epilogue, with_aux", [
    ("none", False), ("bias", False), ("relu", False), ("relu", True), ("gelu", False), ("gelu", True),
    ("relu_bias", False), ("relu_bias", True), ("gelu_bias", False), ("gelu_bias", True)])
def test_forward_epilogues_against_torch(inputs, output, epilogue, with_aux):
    """The bias and a GELU aux have the output's type (bf16 inputs, f32 output: f32)."""
    rows, inner, width = 64, 96, 128  # width 128: a ReLU mask's rows are whole multiples of 128 bits
    x, w, b = random((rows, inner), inputs, 6), random((width, inner), inputs, 7), random((width,), output, 8)
    y = torch.empty(rows, width, device="cuda", dtype=TORCH[output])
    tensors = {"x": x, "w": w, "y": y}
    options = {}
    if "bias" in epilogue:
        tensors["b"], options["bias"] = b, matrix("b", 1, width, output)
    if with_aux:
        relu = epilogue.startswith("relu")
        aux = torch.zeros(rows, width // 8, device="cuda", dtype=torch.uint8) if relu else torch.empty_like(y)
        tensors["aux"] = aux
        options["aux"] = matrix("aux", rows, width, "u8" if relu else output, ld=width)
    node = gemm(0, "gemm:y", a=matrix("x", rows, inner, inputs), b=matrix("w", width, inner, inputs),
                c=matrix("y", rows, width, output), trans_b=True, epilogue=epilogue, **options)
    with load(tensors, [node], outputs={"y", "aux"}) as pipeline:
        run(pipeline)
    X, W = x.double(), w.double()
    z = X @ W.T + (b.double() if "bias" in epilogue else 0)
    scale = X.abs() @ W.abs().T + (b.double().abs() if "bias" in epilogue else 0)
    tolerance = FORWARD_TOLERANCE[(inputs, output, "f32")]
    activation = ACTIVATIONS[epilogue.split("_")[0] if epilogue != "bias" else "none"]
    # GELU's slope is at most 1.13, so z's error bound carries over (times 1.13)
    slack = GELU_SLACK if "gelu" in epilogue else 0.0
    what = f"{inputs}->{output} {epilogue}"
    within(y, activation(z), 1.13 * scale, tolerance + slack, what)
    if with_aux and epilogue.startswith("relu"):
        bits = np.unpackbits(tensors["aux"].cpu().numpy(), axis=1, bitorder="little").astype(bool)
        clear = (z.abs() > tolerance * scale).cpu().numpy()  # where the sign of z is certain
        assert np.array_equal(bits[clear], (z > 0).cpu().numpy()[clear]), f"{what}: the ReLU mask differs"
    elif with_aux:
        within(tensors["aux"], z, scale, tolerance, f"{what}: the GELU input in aux")


def mlp_backward(dtype: str, activation: str, bias_grad: bool, **settings):
    """A 2-layer MLP's forward and backward as five GEMM nodes:
    z1 = x W1^T + b1, h1 = act(z1) (aux: mask or z1); y = h1 W2^T + b2;
    dz1 = (dy W2) * act'(z1) (+ db1 = column sums of dz1); dW2 = dy^T h1 (+ db2 = row sums of dy^T);
    dW1 = dz1^T x. Returns the pipeline and its tensors."""
    batch, inner, hidden, width = 64, 32, 128, 48
    relu = activation == "relu"
    # W1 small and b1 = +-1: every z1 is far from 0, so ReLU's derivative is the same everywhere
    x, w1 = random((batch, inner), dtype, 9), random((hidden, inner), dtype, 10, scale=0.05)
    b1 = torch.where(random((hidden,), "f32", 11) > 0, 1.0, -1.0).to(TORCH[dtype])
    w2, b2, dy = random((width, hidden), dtype, 12), random((width,), dtype, 13), random((batch, width), dtype, 14)
    t = {"x": x, "w1": w1, "b1": b1, "w2": w2, "b2": b2, "dy": dy}
    empty = lambda *shape, kind=TORCH[dtype]: torch.empty(*shape, device="cuda", dtype=kind)
    t.update(h1=empty(batch, hidden), y=empty(batch, width), dz1=empty(batch, hidden), dw2=empty(width, hidden),
             db2=empty(width), dw1=empty(hidden, inner), db1=empty(hidden),
             aux=empty(batch, hidden // 8, kind=torch.uint8) if relu else empty(batch, hidden))
    aux = matrix("aux", batch, hidden, "u8" if relu else dtype, ld=hidden)
    m = lambda name: matrix(name, *t[name].shape, dtype) if t[name].dim() == 2 else matrix(name, 1, t[name].shape[0], dtype)
    nodes = [
        gemm(0, "gemm:h1", a=m("x"), b=m("w1"), c=m("h1"), trans_b=True, epilogue=f"{activation}_bias",
             bias=m("b1"), aux=aux, line=1),
        gemm(1, "gemm:y", a=m("h1"), b=m("w2"), c=m("y"), trans_b=True, epilogue="bias", bias=m("b2"), line=2),
        gemm(2, "gemm:dz1", a=m("dy"), b=m("w2"), c=m("dz1"), epilogue=f"d{activation}", aux=aux,
             bias_grad=m("db1") if bias_grad else None, line=3),
        gemm(3, "gemm:dw2", a=m("dy"), b=m("h1"), c=m("dw2"), trans_a=True, epilogue="bgrad_a", bias_grad=m("db2"),
             line=4),
        gemm(4, "gemm:dw1", a=m("dz1"), b=m("x"), c=m("dw1"), trans_a=True, line=5),
    ]
    outputs = {"h1", "y", "dz1", "dw2", "db2", "dw1", "db1", "aux"}
    return load(t, nodes, outputs=outputs, **settings), t


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("bias_grad", [True, False], ids=["bias_grad", "no_bias_grad"])
def test_backward_epilogues_against_autograd(dtype, activation, bias_grad):
    pipeline, t = mlp_backward(dtype, activation, bias_grad)
    with pipeline:
        run(pipeline)
    leaves = {name: t[name].double().requires_grad_() for name in ("x", "w1", "b1", "w2", "b2")}
    z1 = leaves["x"] @ leaves["w1"].T + leaves["b1"]
    h1 = torch.relu(z1) if activation == "relu" else gelu(z1)
    y = h1 @ leaves["w2"].T + leaves["b2"]
    (y * t["dy"].double()).sum().backward()
    tolerance = BACKWARD_TOLERANCE[dtype] + (GELU_SLACK if activation == "gelu" else 0.0)
    expected = {"y": y.detach(), "dw2": leaves["w2"].grad, "db2": leaves["b2"].grad, "dw1": leaves["w1"].grad}
    if bias_grad:
        expected["db1"] = leaves["b1"].grad
    for name, reference in expected.items():
        torch.testing.assert_close(t[name].double(), reference, rtol=tolerance,
                                   atol=tolerance * reference.abs().max().item(), msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_graph_and_eager_agree_bit_for_bit(activation):
    pipeline, _ = mlp_backward("bf16", activation, True)
    with pipeline:
        report = pipeline.verify(3)
        assert report.ok, [m.describe() for m in report.mismatches]
        assert set(pipeline.gemms.algorithms) == {"gemm:h1", "gemm:y", "gemm:dz1", "gemm:dw2", "gemm:dw1"}


def test_tuned_algorithms_are_kept_and_reused(tmp_path):
    first, t = mlp_backward("f32", "relu", True, cache=tmp_path, tune=True)
    with first:
        run(first)
        chosen = first.gemms.algorithms
    assert len(list(tmp_path.glob("*.json"))) == 5
    second, _ = mlp_backward("f32", "relu", True, cache=tmp_path)
    with second:
        assert second.gemms.algorithms == chosen, "a later run chose again instead of reusing the kept algorithm"
        assert second.verify(2).ok


def test_a_descriptor_the_library_cannot_serve_names_the_node():
    x, w, y = random((64, 64), "f32", 15), random((128, 64), "f32", 16), torch.empty(64, 128, device="cuda")
    # x's rows 32 elements apart while they hold 64: no matrix cuBLASLt accepts (ld < rows)
    node = gemm(0, "gemm:y", a=matrix("x", 64, 64, ld=32), b=matrix("w", 128, 64), c=matrix("y", 64, 128),
                trans_b=True, line=7)
    with pytest.raises(GemmError, match=r"^gemm `gemm:y` \(gemm\.pipe:7:5\): "):
        load({"x": x, "w": w, "y": y}, [node], outputs={"y"})


def test_a_recorded_copy_to_the_host_is_refused():
    device = open_device(0)
    driver = device.driver
    source = driver.call("cuMemAlloc", 1024)
    pinned = driver.call("cuMemAllocHost", 1024)
    try:
        with pytest.raises(LibraryRecordingError, match=r"^a copy: the library call recorded 1 node of another kind \(memcpy\)"):
            record_call(device, "a copy", lambda stream: driver.call("cuMemcpyDtoHAsync", pinned, source, 1024, stream))
    finally:
        driver.call("cuMemFreeHost", pinned)
        driver.call("cuMemFree", source)
        release_device(device)


def test_child_graphs_with_one_descriptor_launch_one_library_kernel():
    """Two child graphs holding the same GEMM: both recordings launch the library's one kernel
    (the CUfunction sharing docs/plan.md describes), and replays still match eager runs."""
    x, w = random((64, 96), "bf16", 17), random((128, 96), "bf16", 18)
    ys = {f"y{i}": torch.empty(64, 128, device="cuda", dtype=torch.bfloat16) for i in range(2)}
    nodes = [gemm(i, f"gemm:y{i}", a=matrix("x", 64, 96, "bf16"), b=matrix("w", 128, 96, "bf16"),
                  c=matrix(f"y{i}", 64, 128, "bf16"), trans_b=True, line=i + 1) for i in range(2)]
    buffers = [buffer("x", "bf16", (64, 96), first="read"), buffer("w", "bf16", (128, 96), first="read")]
    buffers += [buffer(name, "bf16", (64, 128), first="write") for name in ys]
    torch.cuda.synchronize()
    with Pipeline(gemm_plan(buffers, nodes, children=True), [], open_device(0), bind={"x": x, "w": w, **ys}) as p:
        kernels = p.graph.library_kernels
        assert kernels["gemm:y0"] == kernels["gemm:y1"] and len(set(p.gemms.algorithms.values())) == 1
        report = p.verify(3)
        assert report.ok, [m.describe() for m in report.mismatches]
        run(p)
        assert torch.equal(ys["y0"], ys["y1"])


def test_the_profile_shows_each_gemm_as_one_node():
    from pipec.runtime.profile_collect import ProfilerUnavailable, load_cupti

    try:
        load_cupti()
    except ProfilerUnavailable as error:
        pytest.skip(str(error))
    pipeline, tensors = mlp_backward("bf16", "gelu", True)
    with pipeline:
        run(pipeline)
        before = {name: t.clone() for name, t in tensors.items()}
        report = pipeline.profile(replays=20)
        assert all(torch.equal(before[name], t) for name, t in tensors.items()), "the profile changed the state"
    assert sorted(n.name for n in report.nodes) == ["gemm:dw1", "gemm:dw2", "gemm:dz1", "gemm:h1", "gemm:y"]
    assert report.critical_path == ["gemm:h1", "gemm:y", "gemm:dz1", "gemm:dw2", "gemm:dw1"]
    assert 0 < report.critical_path_us <= report.replay_us * 1.0001
