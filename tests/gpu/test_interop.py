"""Arrays, streams and live updates shared with other frameworks, on a real GPU: DLPack with
PyTorch and JAX, binding their arrays, ordering against PyTorch's stream, `update()` (and a
refused one), views after `close()`, and the docs' Python examples."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX next to PyTorch and pipec

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "runtime"
LIVE, BF16 = FIXTURES / "live.pipe", FIXTURES / "bf16.pipe"
RL_STEP = ROOT / "pipelines" / "rl_step.pipe"


@pytest.fixture
def live():
    import pipec

    with pipec.load(LIVE) as pipeline:
        yield pipeline


class StreamProtocol:
    """Any stream object with `__cuda_stream__`, here around a PyTorch stream."""

    def __init__(self, stream) -> None:
        self.stream = stream

    def __cuda_stream__(self):
        return (0, self.stream.cuda_stream)


# --- DLPack ------------------------------------------------------------------------------------

def test_torch_from_dlpack_shares_the_buffer(live):
    torch = pytest.importorskip("torch")
    live.step(1)
    x = torch.from_dlpack(live.buffers["x"])
    assert x.device.type == "cuda" and x.dtype == torch.float32 and x.shape == (1000,)
    assert x.data_ptr() == live.buffer("x").device_ptr
    assert np.array_equal(x.cpu().numpy(), live.read("x"))
    x.fill_(3.0)  # on PyTorch's stream; the pipeline orders its next step after it
    live.step(1, stream=torch.cuda.current_stream().cuda_stream)
    torch.cuda.current_stream().synchronize()
    assert (live.read("scaled_x") == np.float32(8.0)).all()


def test_torch_takes_the_cuda_array_interface_too(live):
    torch = pytest.importorskip("torch")
    x = torch.as_tensor(live.buffers["x"], device="cuda")
    assert x.data_ptr() == live.buffer("x").device_ptr


def test_bf16_reaches_torch_as_bfloat16():
    torch = pytest.importorskip("torch")
    import pipec

    with pipec.load(BF16) as pipeline:
        pipeline.step(1)
        h = torch.from_dlpack(pipeline.buffers["h"])
        assert h.dtype == torch.bfloat16 and h.shape == (2, 8)
        assert h.float().cpu().tolist() == [[1.5] * 8, [2.5] * 8]
        assert str(pipeline.read("h").dtype) == "bfloat16"


def test_jax_from_dlpack_reads_the_buffer(live):
    jax_dlpack = pytest.importorskip("jax.dlpack")
    live.step(1)
    live.synchronize()
    x = jax_dlpack.from_dlpack(live.buffers["x"])
    assert x.shape == (1000,) and str(x.dtype) == "float32"
    assert np.array_equal(np.asarray(x), live.read("x"))


def test_torch_and_jax_arrays_can_be_bound():
    torch = pytest.importorskip("torch")
    import pipec

    x = torch.linspace(-1, 1, 1000, device="cuda")
    before = x.cpu().numpy()  # torch's linspace, not numpy's; the step then changes x
    with pipec.load(LIVE, bind={"x": x}) as pipeline:
        assert pipeline.buffer("x").device_ptr == x.data_ptr()
        pipeline.step(1)
        pipeline.synchronize()
        expected = (before + np.float32(1)) * np.float32(2)
        np.testing.assert_allclose(pipeline.read("scaled_x"), expected, rtol=1e-6)
    h = torch.zeros((2, 8), dtype=torch.bfloat16, device="cuda")  # DLPack: no bf16 array interface
    with pipec.load(BF16, bind={"h": h}) as pipeline:
        pipeline.step(1)
        pipeline.synchronize()
        assert h.float().cpu().tolist() == [[0.0] * 8, [2.5] * 8]
    jnp = pytest.importorskip("jax.numpy")

    y = jnp.zeros(1000, jnp.float32)
    with pipec.load(LIVE, bind={"scaled_x": y}) as pipeline:
        pipeline.step(1)
        pipeline.synchronize()
        assert np.isfinite(pipeline.read("scaled_x")).all()


# --- streams -----------------------------------------------------------------------------------

@pytest.mark.parametrize("wrap", [lambda s: s.cuda_stream, StreamProtocol], ids=["raw handle", "protocol"])
@pytest.mark.parametrize("run", ["step", "run_eager"])
def test_a_torch_loop_interleaved_with_the_pipeline_needs_no_synchronize(live, wrap, run):
    torch = pytest.importorskip("torch")
    x = torch.from_dlpack(live.buffers["x"])
    scaled = torch.from_dlpack(live.buffers["scaled_x"])
    stream = torch.cuda.Stream()
    seen = []
    with torch.cuda.stream(stream):
        for k in range(50):
            torch.cuda._sleep(200_000)  # a slow PyTorch kernel first: an unordered step would overtake it
            x.fill_(float(k))
            getattr(live, run)(1, stream=wrap(stream))
            seen.append(scaled.clone())
    stream.synchronize()
    assert [float(s[0]) for s in seen] == [2.0 * (k + 1) for k in range(50)]


# --- live updates ------------------------------------------------------------------------------

def test_an_update_reaches_the_next_replays_and_eager(live):
    live.step(1)
    x = live.read("x")
    assert live.update(FACTOR=3.0, BLOCK=256) == ["step/scaled", "step/bump/add_one"]
    live.step(1)
    assert np.array_equal(live.read("scaled_x"), (x + np.float32(1)) * np.float32(3.0))
    assert live.verify(2).ok, "eager and graph disagree after the update"


def test_a_refused_update_changes_nothing(live):
    from pipec.runtime.update import UpdateRefused

    live.step(1)
    with pytest.raises(UpdateRefused, match="N changes the buffer `x`"):
        live.update(N=500)
    x = live.read("x")
    live.step(1)
    assert np.array_equal(live.read("scaled_x"), (x + np.float32(1)) * np.float32(2.0))


def test_rl_step_updates_gamma_in_place_and_stays_verified():
    import pipec
    from pipec.runtime.update import UpdateRefused

    with pipec.load(RL_STEP) as pipeline:
        pipeline.step(200)
        executable = pipeline.graph.exec
        assert pipeline.update(GAMMA=0.95, TAU=0.02) == ["step/act/mlp_act_push",
                                                         "step/optimize[0]/adamw_step"]
        assert pipeline.graph.exec is executable
        pipeline.step(200)
        assert pipeline.verify(2).ok
        with pytest.raises(UpdateRefused, match="BATCH changes the buffer"):
            pipeline.update(BATCH=128)


def test_piperun_set_applies_updates_during_a_run():
    result = subprocess.run([sys.executable, "-m", "pipec.runtime.cli", str(RL_STEP), "--steps", "1000",
                             "--log-every", "500", "--json", "--set", "GAMMA=0.95@500"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(e["event"], e["step"]) for e in events[:3]] == [("log", 500), ("set", 500), ("log", 1000)]
    assert events[1]["nodes"] == ["step/act/mlp_act_push"]


# --- close -------------------------------------------------------------------------------------

def test_a_view_taken_before_close_cannot_reach_freed_memory():
    torch = pytest.importorskip("torch")
    import pipec

    pipeline = pipec.load(LIVE)
    view = pipeline.buffers["x"]
    pipeline.close()
    with pytest.raises(pipec.ClosedError, match="closed"):
        torch.from_dlpack(view)
    with pytest.raises(pipec.ClosedError):
        view.numpy()


# --- the docs ----------------------------------------------------------------------------------

API_EXAMPLES = re.findall(r"^```python\n(.*?)^```", (ROOT / "docs" / "python-api.md").read_text(),
                          flags=re.S | re.M)


@pytest.mark.parametrize("index", range(len(API_EXAMPLES)))
def test_the_python_api_examples_run(index, monkeypatch, tmp_path):
    pytest.importorskip("torch")
    blocks = API_EXAMPLES
    monkeypatch.chdir(ROOT)
    if bundle := re.search(r'load_bundle\("(\w+)\.bundle"\)', blocks[index]):  # what its comment says `pipec build` writes
        from pipec.compiler.cli import main as pipec_main

        name = bundle.group(1)
        assert pipec_main(["build", f"pipelines/{name}.pipe", "-o", str(tmp_path / f"{name}.bundle")]) == 0
        monkeypatch.chdir(tmp_path)
    exec(compile(blocks[index], f"docs/python-api.md block {index + 1}", "exec"), {})
