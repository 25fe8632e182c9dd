"""NumPy reference of the C51 head (docs/c51.md, kernels/c51.cu), in float64: the support,
expected Q, the categorical projection of the double-DQN target and the softmax
cross-entropy with its gradient w.r.t. the logits.

The projection is written the textbook way (Bellemare et al. 2017, Algorithm 1): each
target atom's mass is split between the two support atoms around its shifted position,
scattered with `np.add.at`. The kernel computes the same map as a gather (the hat-function
form); tests/test_c51_reference.py checks the two against each other and against hand-worked
cases."""

from __future__ import annotations

import numpy as np


def support(atoms: int, vmin: float, vmax: float) -> np.ndarray:
    return vmin + np.arange(atoms) * ((vmax - vmin) / (atoms - 1))


def softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def action_logits(rows: np.ndarray, actions: int, atoms: int) -> np.ndarray:
    """[n, ld] logits rows (action a's atoms at a*atoms ..; padding after) -> [n, actions, atoms]."""
    return np.asarray(rows, np.float64)[:, : actions * atoms].reshape(-1, actions, atoms)


def expected_q(rows: np.ndarray, atoms: int, vmin: float, vmax: float, actions: int = 2) -> np.ndarray:
    return softmax(action_logits(rows, actions, atoms)) @ support(atoms, vmin, vmax)


def project(p: np.ndarray, ret: np.ndarray, disc: np.ndarray, vmin: float, vmax: float) -> np.ndarray:
    """Distribution p [n, atoms] of the target network shifted to R + disc * z, projected onto
    the support: m [n, atoms]."""
    n, atoms = p.shape
    dz = (vmax - vmin) / (atoms - 1)
    tz = np.clip(ret[:, None] + disc[:, None] * support(atoms, vmin, vmax)[None, :], vmin, vmax)
    b = (tz - vmin) / dz
    lower = np.floor(b).astype(np.int64)
    upper = np.ceil(b).astype(np.int64)
    m = np.zeros((n, atoms))
    rows = np.repeat(np.arange(n)[:, None], atoms, axis=1)
    # b on an atom (lower == upper) puts all of the mass there
    np.add.at(m, (rows, lower), p * np.where(lower == upper, 1.0, upper - b))
    np.add.at(m, (rows, upper), p * np.where(lower == upper, 0.0, b - lower))
    return m


def projection_case(atoms: int, n: int = 64, seed: int = 5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inputs the twins' projection tests share: target distributions p [n, atoms], returns
    beyond both ends of the support, and discounts 0 (terminal), 0.99^5 and 1."""
    rng = np.random.default_rng(seed)
    p = softmax(rng.normal(0, 2, (n, atoms)))
    ret = np.round(rng.uniform(-10, 110, n), 1)
    disc = rng.choice([0.0, 0.99 ** 5, 1.0], n)
    return p, ret, disc


def target_distribution(online_next, target_next, ret, disc, atoms, vmin, vmax, actions=2):
    """Double DQN: the online network picks a* on next obs by expected Q (ties to action 0),
    the target network's distribution of a* is projected."""
    a_star = np.argmax(expected_q(online_next, atoms, vmin, vmax, actions), axis=1)
    p = softmax(action_logits(target_next, actions, atoms))[np.arange(len(a_star)), a_star]
    return project(p, np.asarray(ret, np.float64), np.asarray(disc, np.float64), vmin, vmax)


def loss_grad(online_obs, online_next, target_next, act, ret, disc, w, atoms, vmin, vmax, actions=2):
    """What c51_loss_grad writes: (dlogits [n, ld], ce [n], lossi [n]) for the loss
    mean_i w_i * CE_i, CE_i = -sum_k m_ik log softmax(online(obs_i)(act_i))_k."""
    online_obs = np.asarray(online_obs, np.float64)
    n, ld = online_obs.shape
    m = target_distribution(online_next, target_next, ret, disc, atoms, vmin, vmax, actions)
    chosen = action_logits(online_obs, actions, atoms)[np.arange(n), act]
    shifted = chosen - chosen.max(axis=1, keepdims=True)
    log_q = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    ce = -(m * log_q).sum(axis=1)
    w = np.asarray(w, np.float64)
    dlogits = np.zeros((n, ld))
    for i in range(n):
        a = act[i]
        dlogits[i, a * atoms : (a + 1) * atoms] = w[i] / n * (np.exp(log_q[i]) - m[i])
    return dlogits, ce, w * ce
