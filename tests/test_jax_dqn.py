"""Tests of the JAX baseline (bench/jax_dqn.py), on the CPU: its CartPole against
Gymnasium's, its sum tree and walk against numpy's reading of docs/dqn.md, its n-step flush
against a per-transition reference, the learner gate, determinism, and that it learns."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="the JAX baseline needs jax (pip install jax)")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import jax_dqn as jdqn  # noqa: E402 - after the skip, from bench/
from dqn_spec import Config  # noqa: E402 - after the skip, from bench/
from sum_tree_reference import sum_tree_walk  # noqa: E402 - after the skip, from bench/
from baseline_runs import NStepReference, SMALL_DQN, best_mean_return, small_config  # noqa: E402 - after the skip

jnp = jax.numpy


def _small_config(**overrides):
    return small_config(Config, SMALL_DQN, **overrides)


def test_cartpole_matches_gymnasium():
    gym = pytest.importorskip("gymnasium")

    rng = np.random.default_rng(1234)
    env = gym.make("CartPole-v1").unwrapped
    step = jax.jit(jdqn.cartpole_step)
    for episode in range(8):
        env.reset(seed=episode)
        state = jnp.asarray(env.state, jnp.float64)
        for _ in range(600):
            action = int(rng.integers(2))
            _, _, gym_terminated, _, _ = env.step(action)
            state, terminated = step(state, jnp.int32(action))
            # Both compute in float64 in the same order; sin and cos may differ in the last
            # place between numpy and XLA.
            np.testing.assert_allclose(np.asarray(state), env.state, rtol=1e-12, atol=1e-12)
            assert bool(terminated) == gym_terminated
            if gym_terminated:
                break
        else:
            pytest.fail("a random-action episode did not terminate")


def _leaves(rng, c, size):
    leaves = np.zeros(c, np.float32)
    leaves[:size] = rng.uniform(0.01, 2.0, size) ** 0.6
    leaves[rng.integers(0, size, 50)] = 0.0  # zero leaves are never sampled
    return leaves


def test_sum_tree_is_numpys_bit_for_bit():
    leaves = _leaves(np.random.default_rng(5), 1024, 800)
    _, tree = sum_tree_walk(leaves, [], np.float32)
    levels = jdqn.sum_tree_levels(jnp.asarray(leaves))
    assert len(levels) == 11
    for depth, level in enumerate(levels):
        np.testing.assert_array_equal(np.asarray(level), tree[1 << depth:2 << depth])


def test_sampling_matches_sum_tree_walk():
    rng = np.random.default_rng(7)
    c, size, b = 1024, 700, 64
    leaves = _leaves(rng, c, size)
    strata = ((np.arange(b) + rng.random(b)) / b).astype(np.float32)
    total = sum_tree_walk(leaves, [], np.float32)[1][1]
    expected, _ = sum_tree_walk(leaves, strata * total, np.float32)
    got = jdqn.sample_leaves(jdqn.sum_tree_levels(jnp.asarray(leaves)), jnp.asarray(strata),
                             jnp.int32(size - 1))
    assert np.asarray(got).tolist() == expected
    assert all(leaves[i] > 0 for i in expected)


def test_flush_matches_reference():
    """With the learner off, replay, leaves and the return ring after many steps equal what a
    per-env, per-transition reading of docs/dqn.md writes, given the same actions."""
    cfg = _small_config(envs=16, learning_starts=10**9, capacity=4096)
    e, n, g = cfg.envs, cfg.nstep, cfg.gamma
    step = jax.jit(lambda s: jdqn.train_step(cfg, s))
    s = jdqn.init_state(cfg)
    reference = NStepReference(e, n, g)
    for _ in range(160):
        state, t = np.asarray(s.env_state), np.asarray(s.env_t)
        s = step(s)
        action = np.asarray(s.window)[np.arange(e), t % n, 4].astype(int)
        nxt, terminated = jdqn.cartpole_step(jnp.asarray(state), jnp.asarray(action))
        reference.observe(state.astype(np.float32), t, action, np.asarray(nxt).astype(np.float32),
                          np.asarray(terminated))
    expected, returns = reference.expected, reference.returns
    assert int(s.size) == int(s.head) == len(expected) < cfg.capacity
    assert int(s.episodes) == len(returns) > 100
    assert float(np.asarray(s.ret_ring).sum()) == pytest.approx(sum(returns[-100:]))
    replay = np.asarray(s.replay)
    for slot, (obs, act, ret, nobs, disc) in enumerate(expected):
        row = replay[slot]
        np.testing.assert_array_equal(row[0:4], obs)
        assert int(row[4]) == act
        assert math.isclose(float(row[5]), ret, rel_tol=1e-6)
        np.testing.assert_array_equal(row[6:10], nobs)
        assert math.isclose(float(row[10]), disc, rel_tol=1e-6)
    leaves = np.asarray(s.leaves)
    assert np.all(leaves[:len(expected)] == 1.0) and np.all(leaves[len(expected):] == 0)


def test_learner_off_changes_nothing_and_on_trains():
    off = jdqn.Trainer(_small_config(learning_starts=10**9), 5)
    frozen = {f: np.asarray(getattr(off.state, f))
              for f in ("params", "target", "adam_m", "adam_v", "update_count", "max_prio",
                        "loss_ema", "last_loss", "lr")}
    off.advance(5)
    for f, value in frozen.items():
        np.testing.assert_array_equal(np.asarray(getattr(off.state, f)), value, err_msg=f)

    on = jdqn.Trainer(_small_config(learning_starts=32), 6)
    params0 = np.asarray(on.state.params)
    on.advance(12)
    d = on.diagnostics()
    assert d["step"] == 12 and d["replay_size"] > 32
    assert all(math.isfinite(v) for v in d.values())
    assert int(on.state.update_count) > 0
    assert not np.array_equal(np.asarray(on.state.params), params0)
    assert np.isfinite(np.asarray(on.state.leaves)).all()


def test_same_seed_same_run():
    a = jdqn.Trainer(_small_config(learning_starts=32), 5)
    b = jdqn.Trainer(_small_config(learning_starts=32), 10)
    a.advance(10)  # two dispatches of 5 steps against one of 10
    b.advance(10)
    for field, x, y in zip(jdqn.State._fields, a.state, b.state):
        if field != "key":
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=field)


def test_learns_cartpole():
    """docs/dqn.md's bar within 2 000 steps: the mean return of the last 100 episodes reaches
    195 under seed 0 (CPU, 100 steps per dispatch)."""
    trainer = jdqn.Trainer(Config(), 100)
    best = best_mean_return(trainer, 100, 20)
    assert best >= 195, best


@pytest.mark.gpu
def test_scan_runs_on_the_gpu():
    """What bench/rl_step.py times: K-step dispatches on the GPU backend, learner on."""
    if jax.default_backend() != "gpu":
        pytest.skip(f"JAX {jax.__version__} has no GPU backend")
    trainer = jdqn.Trainer(Config(learning_starts=512), 100)
    trainer.advance(200)
    d = trainer.diagnostics()
    assert d["step"] == 200 and int(trainer.state.update_count) > 150
    assert all(math.isfinite(v) for v in d.values())
