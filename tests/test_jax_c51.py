"""Tests of the JAX C51 twin (bench/jax_c51.py), on the CPU: its projection, loss and
priority errors against the NumPy reference (tests/c51_reference.py), the parameter
layout's padding, and a smoke run of the step it shares with bench/jax_dqn.py."""

import sys
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="the JAX baseline needs jax (pip install jax)")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import c51_reference as ref  # noqa: E402 - tests/
import jax_c51 as jc  # noqa: E402 - after the skip, from bench/
from c51_spec import C51Config, outputs, param_count, param_slices  # noqa: E402 - from bench/
from baseline_runs import SMALL_C51, best_mean_return, small_config  # noqa: E402 - after the skip

jnp = jax.numpy


def _small(**overrides):
    return small_config(C51Config, SMALL_C51, **overrides)


def _padding(flat, cfg):
    offset, shape = param_slices(cfg)[4]
    w3 = np.asarray(flat)[offset:offset + shape[0] * shape[1]].reshape(shape)
    return np.concatenate([w3[2 * cfg.atoms:].ravel(), np.asarray(flat)[-(outputs(cfg) - 2 * cfg.atoms):]])


def test_projection_matches_reference():
    cfg = C51Config()
    p, ret, disc = ref.projection_case(cfg.atoms)
    got = jc.project(jnp.asarray(p, jnp.float32), jnp.asarray(ret, jnp.float32), jnp.asarray(disc, jnp.float32), cfg)
    np.testing.assert_allclose(np.asarray(got), ref.project(p, ret.astype(np.float32), disc.astype(np.float32),
                                                           cfg.v_min, cfg.v_max), atol=2e-6)


def test_loss_and_priorities_match_reference():
    cfg = _small()
    keys = jax.random.split(jax.random.key(0), 8)
    params = jc.init_params(cfg, keys[0])
    target = params + 0.05 * jax.random.normal(keys[1], params.shape)
    b = 24
    obs, nxt = jax.random.normal(keys[2], (b, 4)), jax.random.normal(keys[3], (b, 4))
    act = jax.random.bernoulli(keys[4], shape=(b,)).astype(jnp.int32)
    ret = jax.random.uniform(keys[5], (b,)) * 10
    disc = jnp.where(jax.random.uniform(keys[6], (b,)) < 0.25, 0.0, 0.95)
    w = jax.random.uniform(keys[7], (b,)) + 0.1
    grad, loss, ce = jc.loss_and_grad(cfg, params, target, obs, act, ret, nxt, disc, w)

    def rows(flat, x):
        return np.asarray(jc.logits(flat, x, cfg)).reshape(b, -1)

    _, want_ce, want_l = ref.loss_grad(rows(params, obs), rows(params, nxt), rows(target, nxt), np.asarray(act),
                                       np.asarray(ret), np.asarray(disc), np.asarray(w), cfg.atoms, cfg.v_min,
                                       cfg.v_max)
    np.testing.assert_allclose(np.asarray(ce), want_ce, rtol=1e-4)
    assert float(loss) == pytest.approx(want_l.mean(), rel=1e-4)
    assert grad.shape == (param_count(cfg),) and (_padding(grad, cfg) == 0).all()


def test_steps_keep_the_padding_zero_and_are_deterministic():
    cfg = _small()
    a, b = jc.Trainer(cfg, 6), jc.Trainer(cfg, 6)
    params0 = np.asarray(a.state.params)
    a.advance(12)
    b.advance(12)
    assert int(a.state.update_count) > 0 and (np.asarray(a.state.params) != params0).any()
    for flat in (params0, a.state.params, a.state.target):
        assert (_padding(flat, cfg) == 0).all()
    for name, x, y in zip(a.state._fields, a.state, b.state):
        if name != "key":
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=name)
    d = a.diagnostics()
    assert d["step"] == 12 and all(np.isfinite(v) for v in d.values())


def test_learns_cartpole():
    """docs/c51.md's bar within 2 000 steps at the default size (HIDDEN 512): the mean return
    of the last 100 episodes reaches 195 under seed 1 (CPU, 250 steps per dispatch)."""
    trainer = jc.Trainer(C51Config(), 250)
    best = best_mean_return(trainer, 250, 8)
    assert best >= 195, best


def test_bf16_mode_rounds_layers_2_and_3_and_keeps_f32_gradients():
    """--bf16 true: f32 logits and gradient, within bf16's rounding of the f32 ones
    (norm-wise 3e-2, as tests/test_torch_c51.py) but not equal to them."""
    key = jax.random.PRNGKey(2)
    x = jax.random.normal(key, (24, 4), jnp.float32)
    grads = {}
    for bf16 in (False, True):
        cfg = _small(bf16=bf16)
        params = jc.init_params(cfg, jax.random.PRNGKey(0))
        assert jc.logits(params, x, cfg).dtype == jnp.float32
        grads[bf16] = jax.grad(lambda p, cfg=cfg: jnp.sum(jax.nn.log_softmax(jc.logits(p, x, cfg), -1)[:, 0, :3]))(params)
    assert grads[True].dtype == jnp.float32
    err = float(jnp.linalg.norm(grads[True] - grads[False]) / jnp.linalg.norm(grads[False]))
    assert 0 < err < 3e-2, err
