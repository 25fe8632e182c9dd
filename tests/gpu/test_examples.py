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
