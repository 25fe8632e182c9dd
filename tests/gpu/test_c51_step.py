"""pipelines/c51_step.pipe end to end through pipec's runtime: deterministic, graph replay
equal to eager execution bit for bit, its GEMM nodes wired as docs/c51.md says (forward
logits and the flat gradient against a NumPy float64 pass over the same batch), and it
learns CartPole for seeds 1 to 3 at the default size. The bf16 mode (-D BF16=true) is held
to the same determinism and wiring (at bf16's tolerance) and to a looser learning bar."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import c51_reference as ref  # noqa: E402 - tests/, after the path
from flagship_runs import mean_return_curve, two_runs_and_verify  # noqa: E402

pytestmark = pytest.mark.gpu

PIPE = Path(__file__).resolve().parents[2] / "pipelines" / "c51_step.pipe"
# A small configuration that reaches the learner within a few dozen steps.
SMALL = {
    "ENVS": 64, "HIDDEN": 256, "CAPACITY": 4096, "BATCH": 64, "UPDATES": 2, "LEARNING_STARTS": 200,
    "EPS_DECAY_STEPS": 50, "PER_BETA_STEPS": 100, "LR_CHECK_EVERY": 10, "LR_PATIENCE": 2,
    "MAX_EPISODE_STEPS": 40,
}
ATOMS, VMIN, VMAX, OUTS = 51, 0.0, 100.0, 104
BF16 = {"BF16": "true"}


@pytest.mark.parametrize("mode", [{}, BF16], ids=["f32", "bf16"])
def test_two_runs_agree_and_graph_matches_eager(mode):
    first = two_runs_and_verify(PIPE, {**SMALL, **mode})
    assert first["step_ctr"][0] == 60 and first["learn_on"][0] == 1 and first["adam_t"][0] > 50
    assert np.isfinite(first["params"]).all() and np.isfinite(first["target"]).all()
    assert first["ep_count"][0] > 0 and first["diag"][0] == 60


def _layers(flat, H):
    out, o = [], 0
    for shape in ((H, 4), (H,), (H, H), (H,), (OUTS, H), (OUTS,)):
        n = int(np.prod(shape))
        out.append(flat[o:o + n].astype(np.float64).reshape(shape))
        o += n
    assert o == flat.size
    return out


def _rel_err(got, want):
    return np.linalg.norm(np.asarray(got, np.float64) - want) / np.linalg.norm(want)


def _forward(flat, x, H):
    w1, b1, w2, b2, w3, b3 = _layers(flat, H)
    z1 = x @ w1.T + b1
    z2 = np.maximum(z1, 0) @ w2.T + b2
    return z1, z2, np.maximum(z2, 0) @ w3.T + b3


@pytest.mark.parametrize("compute,mode,tol", [("f32", {}, 1e-4), ("tf32", {}, 1e-2), ("f32", BF16, 5e-2)],
                         ids=["f32", "tf32", "bf16"])
def test_learner_gemms_match_numpy(compute, mode, tol):
    """One learning step with UPDATES = 1: the logits the forward GEMMs wrote, and the flat
    gradient the backward GEMMs wrote, against float64 NumPy on the parameters before the
    step and the batch it sampled. The reference loss gradient is taken at the pipeline's own
    logits, so a near-tie of a* decided differently in float32 cannot make the test flaky.
    Tolerances (norm-wise relative): f32 accumulation over K <= 256 terms; TF32's 10-bit
    inputs; bf16's 8-bit significand (relative rounding 2^-9) on the weights and activations of
    layers 2 and 3, dL/dlogits and dh2, compounded over up to three layers and through the
    cancellations of a gradient's sums: the flat gradient measured 3.3e-2 on an H200
    (2026-11-30), so 5e-2; a wiring mistake (a wrong operand or transpose) gives errors of
    order 1."""
    import pipec

    defines = {**SMALL, "UPDATES": 1, "COMPUTE": f'"{compute}"', **mode}
    H, B = defines["HIDDEN"], defines["BATCH"]
    with pipec.load(PIPE, defines=defines) as pipeline:
        while pipeline.read("learn_on")[0] == 0:
            pipeline.step(1)
        params, target = pipeline.read("params"), pipeline.read("target")
        pipeline.step(1)
        assert pipeline.read("learn_on")[0] == 1
        s = {name: pipeline.read(name) for name in ("b_x", "b_act", "b_ret", "b_disc", "b_w", "logits",
                                                     "t_logits", "grad", "td", "lossi")}
    x, xn = s["b_x"][0, 0].astype(np.float64), s["b_x"][0, 1].astype(np.float64)
    z1, z2, logits_obs = _forward(params, x, H)
    logits_next, t_next = _forward(params, xn, H)[2], _forward(target, xn, H)[2]
    got_obs, got_next, got_t = s["logits"][0, 0], s["logits"][0, 1], s["t_logits"][0]
    for got, want in ((got_obs, logits_obs), (got_next, logits_next), (got_t, t_next)):
        assert _rel_err(got, want) < tol

    act = s["b_act"][0]
    dlogits, ce, lossi = ref.loss_grad(got_obs, got_next, got_t, act, s["b_ret"][0], s["b_disc"][0],
                                       s["b_w"][0], ATOMS, VMIN, VMAX)
    np.testing.assert_allclose(s["td"][0], ce, rtol=1e-4)
    np.testing.assert_allclose(s["lossi"][0], lossi, rtol=1e-4)
    w1, b1, w2, b2, w3, b3 = _layers(params, H)
    h1, h2 = np.maximum(z1, 0), np.maximum(z2, 0)
    dh2 = (dlogits @ w3) * (z2 > 0)
    dh1 = (dh2 @ w2) * (z1 > 0)
    want = np.concatenate([(dh1.T @ x).ravel(), dh1.sum(0), (dh2.T @ h1).ravel(), dh2.sum(0),
                           (dlogits.T @ h2).ravel(), dlogits.sum(0)])
    assert _rel_err(s["grad"], want) < tol
    pad = np.concatenate([_layers(s["grad"], H)[4][2 * ATOMS:].ravel(), _layers(s["grad"], H)[5][2 * ATOMS:]])
    assert (pad == 0).all() and B == dlogits.shape[0]


@pytest.mark.parametrize("mode", [{}, BF16], ids=["f32", "bf16"])
def test_the_norm_covers_the_whole_gradient_and_adamw_writes_the_bf16_copies(mode):
    """A learning step with UPDATES = 1: the clip's norm (opt[3], before clipping) is the norm
    of the whole flat gradient, so the two c51_grad_sumsq passes cover every region of grad
    once; in bf16 mode params_bf16 and target_bf16 are the parameters AdamW just wrote,
    rounded to nearest even."""
    import pipec

    with pipec.load(PIPE, defines={**SMALL, "UPDATES": 1, **mode}) as pipeline:
        while pipeline.read("learn_on")[0] == 0:
            pipeline.step(1)
        pipeline.step(1)
        assert pipeline.read("learn_on")[0] == 1
        s = {name: pipeline.read(name) for name in ("grad", "opt", "params", "target", "params_bf16",
                                                     "target_bf16")}
    norm = np.sqrt(np.sum(s["grad"].astype(np.float64) ** 2))
    assert norm > 0 and abs(s["opt"][3] - norm) <= 1e-5 * norm
    if mode:
        for copy, master in ((s["params_bf16"], s["params"]), (s["target_bf16"], s["target"])):
            np.testing.assert_array_equal(copy.view(np.uint16), master.astype(copy.dtype).view(np.uint16))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_default_pipeline_learns_cartpole(seed):
    curve = mean_return_curve(PIPE, {"SEED": seed}, stop_at=195)
    assert max(curve) >= 195, f"seed {seed}: mean return of the last 100 episodes, every 500 steps: {curve}"


def test_the_bf16_pipeline_learns_cartpole():
    """bf16 mode, seed 1, default size: a looser bar than the f32 mode's (a mean return of the
    last 100 episodes of at least 150, not 195, within 10 000 steps), since bf16 weights move
    in steps of 2^-8 of their size; the run stops as soon as it reaches 195."""
    curve = mean_return_curve(PIPE, {"SEED": 1, **BF16}, stop_at=195)
    assert max(curve) >= 150, f"bf16: mean return of the last 100 episodes, every 500 steps: {curve}"
