"""The NumPy C51 reference (tests/c51_reference.py), which the GPU tests of kernels/c51.cu
compare against, checked against hand-worked cases and independent formulations."""

from __future__ import annotations

import numpy as np
import pytest

from c51_reference import expected_q, loss_grad, project, softmax, support, target_distribution

ATOMS, VMIN, VMAX = 51, 0.0, 100.0


def _random_case(rng, n, ld=104, atoms=ATOMS):
    online_obs = rng.normal(0, 2, (n, ld))
    online_next = rng.normal(0, 2, (n, ld))
    target_next = rng.normal(0, 2, (n, ld))
    act = rng.integers(0, 2, n)
    ret = rng.uniform(-5, 110, n)  # some beyond the support on either side
    disc = np.where(rng.random(n) < 0.2, 0.0, 0.99 ** 5)
    w = rng.uniform(0.1, 1, n)
    return online_obs, online_next, target_next, act, ret, disc, w


def test_support_spans_the_range():
    z = support(5, -2.0, 2.0)
    np.testing.assert_allclose(z, [-2, -1, 0, 1, 2])


def test_projection_hand_worked():
    # 5 atoms on [0, 4] (dz = 1), all mass on z = 2
    p = np.array([[0, 0, 1.0, 0, 0]] * 4)
    ret = np.array([0.5, 1.0, 10.0, -3.0])
    disc = np.array([0.5, 0.5, 0.5, 0.0])
    m = project(p, ret, disc, 0.0, 4.0)
    np.testing.assert_allclose(m[0], [0, 0.5, 0.5, 0, 0])  # 0.5 + 0.5*2 = 1.5: halfway
    np.testing.assert_allclose(m[1], [0, 0, 1, 0, 0])      # 1 + 0.5*2 = 2: on an atom
    np.testing.assert_allclose(m[2], [0, 0, 0, 0, 1])      # clamped to vmax
    np.testing.assert_allclose(m[3], [1, 0, 0, 0, 0])      # terminal, clamped to vmin
    # two source atoms landing on one position add up: uniform p, disc 0, ret 2.25
    m = project(np.full((1, 5), 0.2), np.array([2.25]), np.array([0.0]), 0.0, 4.0)
    np.testing.assert_allclose(m[0], [0, 0, 0.75, 0.25, 0])


def test_projection_conserves_mass_and_mean(rng=np.random.default_rng(7)):
    n = 64
    p = softmax(rng.normal(0, 2, (n, ATOMS)))
    ret = rng.uniform(0, 10, n)
    disc = rng.uniform(0, 0.95, n)
    m = project(p, ret, disc, VMIN, VMAX)
    assert (m >= 0).all()
    np.testing.assert_allclose(m.sum(axis=1), 1.0, rtol=1e-12)
    # linear interpolation keeps the mean when nothing is clamped (all of R + disc*z <= 100)
    z = support(ATOMS, VMIN, VMAX)
    tz = ret[:, None] + disc[:, None] * z
    assert tz.max() <= VMAX
    np.testing.assert_allclose(m @ z, (p * tz).sum(axis=1), rtol=1e-12)


def test_projection_equals_the_hat_function_gather():
    # the kernel's formulation: m_k = sum_j p_j max(0, 1 - |b_j - k|)
    rng = np.random.default_rng(3)
    n = 128
    p = softmax(rng.normal(0, 2, (n, ATOMS)))
    ret = np.round(rng.uniform(-10, 110, n), 0)  # integers: many positions fall on atoms
    disc = rng.choice([0.0, 0.5, 0.99 ** 5, 1.0], n)
    dz = (VMAX - VMIN) / (ATOMS - 1)
    b = (np.clip(ret[:, None] + disc[:, None] * support(ATOMS, VMIN, VMAX), VMIN, VMAX) - VMIN) / dz
    hat = np.maximum(0.0, 1.0 - np.abs(b[:, :, None] - np.arange(ATOMS)[None, None, :]))
    np.testing.assert_allclose(project(p, ret, disc, VMIN, VMAX), np.einsum("nj,njk->nk", p, hat),
                               atol=1e-15)


def test_double_dqn_picks_by_the_online_network():
    atoms = 3
    online = np.array([[0, 0, 9.0, 9.0, 0, 0]])   # action 0 expects 2, action 1 expects 0
    target = np.array([[9.0, 0, 0, 0, 0, 9.0]])   # the target's own greedy action would be 1
    m = target_distribution(online, target, [0.0], [1.0], atoms, 0.0, 2.0)
    np.testing.assert_allclose(m[0], softmax(np.array([9.0, 0, 0])))
    tied = np.zeros((1, 6))                        # equal expectations: action 0
    assert expected_q(tied, atoms, 0.0, 2.0)[0, 0] == expected_q(tied, atoms, 0.0, 2.0)[0, 1]
    m = target_distribution(tied, target, [0.0], [1.0], atoms, 0.0, 2.0)
    np.testing.assert_allclose(m[0], softmax(np.array([9.0, 0, 0])))


def test_gradient_matches_finite_differences():
    rng = np.random.default_rng(11)
    n, ld = 6, 104
    case = _random_case(rng, n, ld)
    online_obs = case[0]
    dlogits, ce, lossi = loss_grad(*case, ATOMS, VMIN, VMAX)

    def loss(rows):
        return loss_grad(rows, *case[1:], ATOMS, VMIN, VMAX)[2].mean()

    h = 1e-6
    for i, c in [(0, 0), (1, 50), (2, 51), (3, 101), (4, 102), (5, 37)]:
        up, down = online_obs.copy(), online_obs.copy()
        up[i, c] += h
        down[i, c] -= h
        np.testing.assert_allclose(dlogits[i, c], (loss(up) - loss(down)) / (2 * h), atol=1e-8)
    assert (dlogits[:, 102:] == 0).all()
    np.testing.assert_allclose(lossi, case[6] * ce)
    assert (ce > 0).all()


@pytest.mark.parametrize("seed", range(3))
def test_cross_entropy_is_smallest_at_the_target(seed):
    # CE(m, q) >= H(m), with equality when the online distribution equals m
    rng = np.random.default_rng(seed)
    online_obs, online_next, target_next, act, ret, disc, w = _random_case(rng, 8)
    m = target_distribution(online_next, target_next, ret, disc, ATOMS, VMIN, VMAX)
    matched = online_obs.copy()
    for i in range(8):
        matched[i, act[i] * ATOMS : (act[i] + 1) * ATOMS] = np.log(np.maximum(m[i], 1e-300))
    _, ce, _ = loss_grad(matched, online_next, target_next, act, ret, disc, w, ATOMS, VMIN, VMAX)
    entropy = -(m * np.log(np.where(m > 0, m, 1.0))).sum(axis=1)
    np.testing.assert_allclose(ce, entropy, atol=1e-9)
    _, ce_random, _ = loss_grad(online_obs, online_next, target_next, act, ret, disc, w, ATOMS, VMIN, VMAX)
    assert (ce_random > entropy).all()
