"""GPU tests of kernels/c51.cu against the NumPy reference (tests/c51_reference.py) and the
device generator's reference, with the helpers of test_kernels.py (CuPy NVRTC launches,
poisoned outputs, fresh random inputs whose seed is printed).

Tolerances: the kernels compute in float32 (expf, logf), the reference in float64; logits of
magnitude <= 8 over 51 atoms give relative errors near 1e-6, so 1e-5 is asserted."""

from __future__ import annotations

import math
import secrets
import sys
from pathlib import Path

import numpy as np
import pytest

from test_kernels import (
    F32, F64, I32, STREAM_ACT, STREAM_INIT, U32, EnvBuffers, K, assert_steps_like_env_step, cdiv, dev, nanf,
    philox, poisoni, rel_err, u01f,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import c51_reference as ref  # noqa: E402 - tests/, after the path

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")

ATOMS, VMIN, VMAX = 51, 0.0, 100.0


@pytest.fixture
def rng():
    seed = secrets.randbits(32)
    print(f"numpy seed {seed}")
    return np.random.default_rng(seed)


def outs_pad(actions, atoms):
    return -(-actions * atoms // 4) * 4


@pytest.mark.parametrize("H", [256, 512])
def test_c51_init_params(rng, H):
    outs, pad = 2 * ATOMS, outs_pad(2, ATOMS)
    P = H * H + 6 * H + pad * (H + 1)
    seed = int(rng.integers(0, 2**32))
    params = nanf(P)
    K("c51", "c51_init_params")((cdiv(P, 256),), (256,), (params, I32(H), I32(outs), I32(pad), U32(seed)))
    got = params.get()
    fan = np.where(np.arange(P) < 5 * H, 4.0, float(H))
    bound = (1.0 / np.sqrt(fan)).astype(np.float32)
    want = bound * (np.float32(2) * u01f(philox(np.arange(P), 0, 0, 0, seed, STREAM_INIT)[:, 0]) - np.float32(1))
    off_w3 = 6 * H + H * H
    w3 = want[off_w3 : off_w3 + pad * H].reshape(pad, H)
    w3[outs:] = 0
    want[off_w3 + pad * H + outs :] = 0
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)
    assert (got[off_w3 + outs * H : off_w3 + pad * H] == 0).all() and (got[-(pad - outs):] == 0).all()


def test_c51_observe(rng):
    n = 300
    state = rng.normal(0, 1, (n, 4))
    obs = nanf(n, 4)
    K("c51", "c51_observe")((cdiv(n * 4, 256),), (256,), (dev(state), obs, I32(n)))
    np.testing.assert_array_equal(obs.get(), state.astype(np.float32))


def _c51_act_env(logits, env, step, warps, seed, eps_sched, max_steps=500):
    """Launches c51_act_env on `env` (`step` the counter before the tick); its actions."""
    n, ld = logits.shape
    start, end, decay = eps_sched
    act = poisoni(n)
    K("c51", "c51_act_env")(
        (cdiv(n, warps),), (32, warps),
        (dev(logits), *env.updated(), dev([step], np.int32), act, *env.outputs(), I32(n), I32(ATOMS), I32(ld),
         U32(seed), F32(VMIN), F32(VMAX), F64(start), F64(end), I32(decay), I32(max_steps)))
    return act.get()


@pytest.mark.parametrize("n,warps", [(128, 4), (7, 4), (1000, 8)])
def test_c51_act_env_actions(rng, n, warps):
    ld = outs_pad(2, ATOMS)
    logits = rng.normal(0, 2, (n, ld)).astype(np.float32)
    q = ref.expected_q(logits, ATOMS, VMIN, VMAX)
    greedy = (q[:, 1] > q[:, 0]).astype(np.int32)
    sure = np.abs(q[:, 1] - q[:, 0]) > 1e-3
    seed = int(rng.integers(0, 2**32))
    step = int(rng.integers(1, 10**6))
    r = philox(step, np.arange(n), 0, 0, seed, STREAM_ACT)
    rand_a = (r[:, 1] >> 31).astype(np.int32)
    state = rng.uniform(-0.05, 0.05, (n, 4))

    def run(rows, start, end, decay):
        env = EnvBuffers(state, np.zeros(n), np.zeros(n))
        return _c51_act_env(rows, env, step - 1, warps, seed, (start, end, decay))  # step - 1: pre-tick

    for start, end, decay in ((0.0, 0.0, 7), (1.0, 1.0, 7), (1.0, 0.02, 2 * step)):
        eps = max(end, start - (start - end) * step / decay)
        a = run(logits, start, end, decay)
        explore = u01f(r[:, 0]) < np.float32(eps)
        np.testing.assert_array_equal(a[explore], rand_a[explore])
        np.testing.assert_array_equal(a[~explore & sure], greedy[~explore & sure])
        assert np.all((a == 0) | (a == 1))
    tied = logits.copy()
    tied[:, ATOMS : 2 * ATOMS] = tied[:, :ATOMS]
    assert np.all(run(tied, 0.0, 0.0, 7) == 0)


@pytest.mark.parametrize("n,warps", [(128, 4), (7, 4), (1000, 8)])
def test_c51_act_env_steps_like_the_env_step_alone(rng, n, warps):
    """c51_act_env's env outputs are the env step's alone (t_cartpole_step, test_kernels.py), bit
    for bit; the acting GEMMs' logits stand in as fixed rows (c51_observe makes obs here)."""
    logits = rng.normal(0, 2, (n, outs_pad(2, ATOMS))).astype(np.float32)
    seed = int(rng.integers(0, 2**32))

    def act_env(env, step, max_steps):
        obs = nanf(n, 4)
        K("c51", "c51_observe")((cdiv(n * 4, 256),), (256,), (env.state, obs, I32(n)))
        return obs.get(), _c51_act_env(logits, env, step, warps, seed, (0.5, 0.5, 7), max_steps)

    assert_steps_like_env_step(rng, n, act_env, seed)


def _loss_inputs(rng, B, ld):
    online = rng.normal(0, 2, (2 * B, ld)).astype(np.float32)  # obs rows, then next-obs rows
    target_next = rng.normal(0, 2, (B, ld)).astype(np.float32)
    act = rng.integers(0, 2, B).astype(np.int32)
    ret = rng.uniform(-5, 110, B).astype(np.float32)
    ret[: B // 4] = np.round(ret[: B // 4])  # positions on atoms
    disc = np.where(rng.random(B) < 0.2, 0.0, 0.99 ** 5).astype(np.float32)
    w = rng.uniform(0.1, 1, B).astype(np.float32)
    return online, target_next, act, ret, disc, w


def _run_loss(B, ld, warps, inputs, learn_on=1):
    online, target_next, act, ret, disc, w = inputs
    d_online = dev(online)
    dlogits, td, lossi = nanf(B, ld), nanf(B), nanf(B)
    K("c51", "c51_loss_grad")(
        (cdiv(B, warps),), (32, warps),
        (dev([learn_on], np.int32), d_online[:B], d_online[B:], dev(target_next), dev(act), dev(ret),
         dev(disc), dev(w), dlogits, td, lossi, I32(B), I32(ATOMS), I32(ld), F32(VMIN), F32(VMAX)))
    return dlogits.get(), td.get(), lossi.get()


@pytest.mark.parametrize("B,warps", [(256, 4), (100, 8), (33, 32)])
def test_c51_loss_grad_matches_reference(rng, B, warps):
    ld = outs_pad(2, ATOMS)
    inputs = _loss_inputs(rng, B, ld)
    online, target_next, act, ret, disc, w = inputs
    dlogits, td, lossi = _run_loss(B, ld, warps, inputs)
    q = ref.expected_q(online[B:], ATOMS, VMIN, VMAX)
    sure = np.abs(q[:, 1] - q[:, 0]) > 1e-3  # a* decided the same way in float32
    want_d, want_ce, want_l = ref.loss_grad(online[:B], online[B:], target_next, act, ret, disc, w,
                                            ATOMS, VMIN, VMAX)
    assert sure.mean() > 0.9
    assert rel_err(dlogits[sure], want_d[sure]) < 1e-5
    assert rel_err(td[sure], want_ce[sure]) < 1e-5
    assert rel_err(lossi[sure], want_l[sure]) < 1e-5
    # zero off the taken action's atoms, padding included
    for i in range(B):
        off = np.ones(ld, bool)
        off[act[i] * ATOMS : (act[i] + 1) * ATOMS] = False
        assert (dlogits[i, off] == 0).all()


def test_c51_loss_grad_is_deterministic_and_learning_off_writes_nothing(rng):
    B, ld = 256, outs_pad(2, ATOMS)
    inputs = _loss_inputs(rng, B, ld)
    first = _run_loss(B, ld, 4, inputs)
    second = _run_loss(B, ld, 4, inputs)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    for out in _run_loss(B, ld, 4, inputs, learn_on=0):
        assert np.isnan(out).all()


def _sumsq_owners(P, blocks, threads, offset):
    """The block that sums each element of a slice starting `offset` floats past a 16-byte
    boundary: the head up to the next boundary and the tail after the last float4 go to
    block 0, float4 k of the body to block (k // threads) % blocks."""
    head = min((4 - offset % 4) % 4, P)
    j = np.arange(P)
    body = (j >= head) & (j < head + (P - head) // 4 * 4)
    return np.where(body, ((j - head) // 4 // threads) % blocks, 0)


H4096_BULK = 4096 * 4096 + 4096 + 104 * 4097  # c51_step at HIDDEN 4096: grad[OFF_W2 : NPARAMS]


# (P, blocks, threads, offset in floats from a 16-byte boundary): rl-sized and c51_step's two
# regions at HIDDEN 256 and 4096 with the pipeline's grids (NORM_BULK_BLOCKS, NORM_LAST_BLOCKS
# of 512 threads); several unrolled rounds with a remainder; unaligned slices: a head of 3, 2
# and 1 floats, a slice shorter than its head, one without a body.
@pytest.mark.parametrize("P,blocks,threads,offset", [
    (256 * 256 + 6 * 256 + 104 * 257, 256, 256, 0),
    (256 * 256 + 256 + 104 * 257, 12, 512, 0), (5 * 256, 1, 512, 0),
    (H4096_BULK, 264, 512, 0), (5 * 4096, 3, 512, 0),
    (10_003, 3, 96, 1), (1003, 3, 96, 2), (5, 4, 32, 3), (2, 1, 32, 1), (3, 2, 64, 2)])
def test_c51_grad_sumsq(rng, P, blocks, threads, offset):
    grad = rng.normal(0, 1, P).astype(np.float32)
    whole = dev(np.concatenate([np.full(offset, np.nan, np.float32), grad]))  # NaN before the slice
    part = nanf(blocks)
    fn = K("c51", "c51_grad_sumsq")
    fn((blocks,), (threads,), (dev([1], np.int32), whole[offset:], part, I32(P)))
    got = part.get()
    want = np.bincount(_sumsq_owners(P, blocks, threads, offset), grad.astype(np.float64) ** 2, blocks)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert math.isclose(got.sum(), float(np.sum(grad.astype(np.float64) ** 2)), rel_tol=1e-5)
    again = nanf(blocks)
    fn((blocks,), (threads,), (dev([1], np.int32), whole[offset:], again, I32(P)))
    np.testing.assert_array_equal(again.get().view(np.uint32), got.view(np.uint32))
    off = nanf(blocks)
    fn((blocks,), (threads,), (dev([0], np.int32), whole[offset:], off, I32(P)))
    assert np.isnan(off.get()).all()
