"""The teaching examples run through pipec's runtime, and their results match NumPy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

EXAMPLES = Path(__file__).resolve().parents[2] / "pipelines" / "examples"


def test_simple_cuda_graphs_sum_matches_numpy():
    import pipec

    with pipec.load(EXAMPLES / "simple_cuda_graphs.pipe") as pipeline:
        data = pipeline.read("input").astype(np.float64)
        pipeline.step(3)  # every replay clears and recomputes: the result must not accumulate
        pipeline.synchronize()
        expected = data.sum()
        np.testing.assert_allclose(pipeline.read("result")[0], expected, rtol=1e-9)
        assert pipeline.read("result_copy")[0] == pipeline.read("result")[0]
        assert pipeline.readback()["sum"] == pipeline.read("result")[0]
        assert pipeline.verify(2).ok


def test_tutorial_accumulates_and_reports():
    import pipec

    with pipec.load(EXAMPLES / "tutorial.pipe") as pipeline:
        x = pipeline.read("x")
        pipeline.step(4)
        pipeline.synchronize()
        per_step = (np.float32(0.5) * x).astype(np.float64).sum()
        readback = pipeline.readback()
        assert readback["step"] == 4.0
        np.testing.assert_allclose(readback["total"], 4 * per_step, rtol=1e-4, atol=1e-2)
        assert pipeline.verify(3).ok


def test_gemm_mlp_forward_and_backward_match_numpy():
    import pipec

    with pipec.load(EXAMPLES / "gemm_mlp.pipe") as pipeline:
        def read(name, *shape):
            return pipeline.read(name).astype(np.float64).reshape(shape)

        x, w1, w2, dy = read("x", 64, 32), read("w1", 128, 32), read("w2", 16, 128), read("dy", 64, 16)
        b1, b2 = read("b1", 128), read("b2", 16)
        pipeline.step(1)
        pipeline.synchronize()
        pre = x @ w1.T + b1
        h = np.maximum(pre, 0.0)
        dh = (dy @ w2) * (pre > 0)
        expected = {"h": h, "y": h @ w2.T + b2, "dw2": dy.T @ h, "db2": dy.sum(axis=0),
                    "dh": dh, "db1": dh.sum(axis=0), "dw1": dh.T @ x}
        for name, value in expected.items():  # f32 in, f32 accumulation
            np.testing.assert_allclose(read(name, *value.shape), value, rtol=1e-4, atol=1e-4, err_msg=name)
        assert pipeline.verify(2).ok
