"""The trainer-shaped pipeline (pipelines/examples/wide_trainer.pipe) on a GPU: its first step's
forward pass and loss against NumPy, graph replay against eager launches bit for bit, and that
it learns its regression."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

PIPE = Path(__file__).resolve().parents[2] / "pipelines" / "examples" / "wide_trainer.pipe"
SMALL = {"LAYERS": 3, "COMPUTE": '"f32"'}


def test_the_first_step_matches_numpy():
    import pipec

    with pipec.load(PIPE, defines=SMALL) as p:
        consts = {"LAYERS": 3, "BATCH": 256, "WIDTH": 256, "OUT": 16}
        L, B, D, O = consts["LAYERS"], consts["BATCH"], consts["WIDTH"], consts["OUT"]
        w = p.read("w").astype(np.float64).reshape(L, D, D)
        b = p.read("b").astype(np.float64).reshape(L, D)
        w_head, b_head = p.read("w_head").astype(np.float64).reshape(O, D), p.read("b_head").astype(np.float64)
        p.step(1)
        p.synchronize()
        x = p.read("a").reshape(L + 1, B, D)[0].astype(np.float64)
        assert np.all((x >= -1) & (x < 1)) and abs(x.mean()) < 0.01
        w_star = np.cos(np.arange(O)[:, None] * 7.0 + np.arange(D)[None, :])
        np.testing.assert_allclose(p.read("y_true").reshape(B, O), np.sin(x @ w_star.T / np.sqrt(D)), atol=2e-4)
        a = x
        for i in range(L):
            a = a + np.maximum(a @ w[i].T + b[i], 0.0)
        y = a @ w_head.T + b_head
        np.testing.assert_allclose(p.read("y").reshape(B, O), y, rtol=1e-4, atol=1e-4)
        loss = np.mean((y - np.sin(x @ w_star.T / np.sqrt(D))) ** 2)
        readback = p.readback()
        assert readback["step"] == 0.0
        np.testing.assert_allclose(readback["loss"], loss, rtol=1e-3)


def test_graph_replay_equals_eager_launches_bit_for_bit():
    import pipec

    with pipec.load(PIPE, defines=SMALL) as p:
        report = p.verify(5)
        assert report.ok, report


def test_it_learns_the_regression():
    import pipec

    with pipec.load(PIPE, defines={"LAYERS": 4}) as p:
        p.step(1)
        p.synchronize()  # the mapped diagnostics are read once the step has run
        first = p.readback()["loss"]
        p.step(499)
        p.synchronize()
        readback = p.readback()
        assert readback["step"] == 499.0 and readback["loss"] < first / 10
