"""JAX baseline of the flagship training step: double DQN with prioritized n-step replay on
vectorised CartPole-v1, exactly as docs/dqn.md specifies it, written the way GPU-resident RL
is written in JAX today (the style of PureJaxRL): the whole training state is one pytree,
one step is a pure function of it, and ``lax.scan`` runs K steps inside one ``jax.jit``
dispatch, the state's buffers donated so that XLA updates them in place.

Differences from the PyTorch twin (bench/torch_dqn.py) are those of the idiom, not of the
algorithm: randomness is ``jax.random`` keyed by (SEED, step); writes that must not happen
go to an out-of-range index that ``mode="drop"`` discards; the learner is branch-free, its
writes selected by the gate read at the tick (XLA's GPU backend runs a ``lax.cond`` by
reading its predicate back to the host, inside every step of the scan); the sum tree is
rebuilt from its leaves as a list of levels (each node the float32 sum of its two children,
as pipec's tree) and walked from the root, which XLA fuses. CartPole runs in float64 like Gymnasium, so this module turns on
``jax_enable_x64``; everything else is float32 or int32 explicitly.

    python bench/jax_dqn.py --steps 10000 --steps-per-dispatch 500
"""

from __future__ import annotations

import math
import os
import sys
import time
from typing import Callable, NamedTuple

# XLA reserves most of the GPU's memory at start-up by default; the benchmark runs pipec and
# PyTorch in the same process.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax
import jax.numpy as jnp
from dqn_spec import (ACT, DISC, FORCE_MAG, GRAVITY, LENGTH, MASSPOLE, MAX_EPISODE_STEPS, NEXT, OBS,
                      POLEMASS_LENGTH, RET, ROW, TAU_PHYS, THETA_THRESHOLD, TOTAL_MASS, X_THRESHOLD,
                      Config, config_of, diagnostics, nstep_return_matrix, param_count,
                      param_slices, parser, print_summary, train)
from jax import lax
from jax_scan import ScanTrainer

jax.config.update("jax_enable_x64", True)

F32, F64, I32 = jnp.float32, jnp.float64, jnp.int32


class State(NamedTuple):
    env_state: jax.Array  # f64[E, 4]
    env_t: jax.Array  # i32[E], steps since reset
    env_ret: jax.Array  # f32[E]
    params: jax.Array  # f32[P], docs/dqn.md's flat layout
    target: jax.Array
    adam_m: jax.Array
    adam_v: jax.Array
    update_count: jax.Array  # i32
    replay: jax.Array  # f32[C, ROW]
    leaves: jax.Array  # f32[C], priority^alpha of every slot
    head: jax.Array
    size: jax.Array
    max_prio: jax.Array
    window: jax.Array  # f32[E, N, 6]: obs[4], action, reward
    step: jax.Array
    episodes: jax.Array
    lr: jax.Array
    loss_ema: jax.Array
    best_loss: jax.Array
    bad_checks: jax.Array
    last_loss: jax.Array
    ret_ring: jax.Array  # f32[100], returns of the last 100 finished episodes
    key: jax.Array


def cartpole_step(state, action):
    """One Euler step of CartPole-v1 for float64 states [..., 4] and actions in {0, 1}, in
    Gymnasium 1.x's order of operations. Returns (next_state, terminated)."""
    x, x_dot, theta, theta_dot = (state[..., i] for i in range(4))
    force = FORCE_MAG * (2 * action - 1).astype(F64)
    costheta = jnp.cos(theta)
    sintheta = jnp.sin(theta)
    temp = (force + POLEMASS_LENGTH * (theta_dot * theta_dot) * sintheta) / TOTAL_MASS
    thetaacc = (GRAVITY * sintheta - costheta * temp) / (
        LENGTH * (4.0 / 3.0 - MASSPOLE * (costheta * costheta) / TOTAL_MASS))
    xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS
    nxt = jnp.stack((x + TAU_PHYS * x_dot, x_dot + TAU_PHYS * xacc,
                     theta + TAU_PHYS * theta_dot, theta_dot + TAU_PHYS * thetaacc), -1)
    terminated = (jnp.abs(nxt[..., 0]) > X_THRESHOLD) | (jnp.abs(nxt[..., 2]) > THETA_THRESHOLD)
    return nxt, terminated


def q_values(flat, x, hidden: int):
    """The Q network 4 -> H -> H -> 2 (ReLU) of the flat parameter vector."""
    w1, b1, w2, b2, w3, b3 = (lax.dynamic_slice_in_dim(flat, o, math.prod(s)).reshape(s)
                              for o, s in param_slices(hidden))
    x = jax.nn.relu(x @ w1.T + b1)
    x = jax.nn.relu(x @ w2.T + b2)
    return x @ w3.T + b3


def greedy(q):
    """argmax over two actions with ties going to action 0."""
    return (q[:, 1] > q[:, 0]).astype(I32)


def sum_tree_levels(leaves):
    """The sum tree over the leaves, root level first: level d holds nodes [2^d, 2^(d+1))
    of docs/dqn.md's heap, each the float32 sum of its two children."""
    levels = [leaves]
    while levels[-1].shape[0] > 1:
        levels.append(levels[-1].reshape(-1, 2).sum(1))
    return levels[::-1]


def sample_leaves(levels, strata, last_slot):
    """Walk from the root for u = stratum * total (left when u < left sum, else subtract it
    and go right), one walk per stratum; the leaf is clamped to ``last_slot`` (size - 1)
    against float rounding."""
    u = strata * levels[0][0]
    node = jnp.zeros(strata.shape, I32)  # index within the level
    for level in levels[1:]:
        left = level[2 * node]
        right = u >= left
        u = jnp.where(right, u - left, u)
        node = 2 * node + right.astype(I32)
    return jnp.minimum(node, last_slot)


def _init_params(cfg: Config, key):
    """nn.Linear's default init, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) per layer."""
    h = cfg.hidden
    fan_in = (4, 4, h, h, h, h)  # of the layer each of W1, b1, W2, b2, W3, b3 belongs to
    bound = jnp.concatenate([jnp.full(math.prod(shape), 1 / math.sqrt(fan), F32)
                             for (_, shape), fan in zip(param_slices(h), fan_in)])
    return jax.random.uniform(key, (param_count(h),), F32, -1.0, 1.0) * bound


def _greedy_action(cfg: Config, params, obs):
    return greedy(q_values(params, obs, cfg.hidden))


def _loss_and_grad(cfg: Config, params, target, obs, act, ret, nxt, disc, weight):
    """Double-DQN target and the IS-weighted Huber loss (docs/dqn.md 6.3): the gradient,
    the loss, and each sample's priority error |TD error|."""
    best = greedy(q_values(params, nxt, cfg.hidden))
    q_next = jnp.take_along_axis(q_values(target, nxt, cfg.hidden), best[:, None], 1)[:, 0]
    y = ret + disc * q_next

    def loss_fn(flat):
        q = jnp.take_along_axis(q_values(flat, obs, cfg.hidden), act[:, None], 1)[:, 0]
        delta = q - y
        huber = jnp.where(jnp.abs(delta) < 1.0, 0.5 * delta * delta, jnp.abs(delta) - 0.5)
        return (weight * huber).mean(), delta

    (loss, delta), grad = jax.value_and_grad(loss_fn, has_aux=True)(params)
    return grad, loss, jnp.abs(delta)


class Network(NamedTuple):
    """What another network (bench/jax_c51.py) replaces in the step."""

    init_params: Callable  # (cfg, key) -> f32[P]
    greedy_action: Callable  # (cfg, params, obs) -> i32[n]
    loss_and_grad: Callable  # (cfg, params, target, obs, act, ret, nxt, disc, w) -> (grad, loss, error)


DQN = Network(_init_params, _greedy_action, _loss_and_grad)


def init_state(cfg: Config, net: Network = DQN) -> State:
    cfg.validate()
    e, n, c = cfg.envs, cfg.nstep, cfg.capacity
    key, k_env, k_init = jax.random.split(jax.random.key(cfg.seed), 3)
    params = net.init_params(cfg, k_init)
    # Every field its own buffer: the jitted scan donates them all.
    p = params.shape[0]
    i0, f0 = (lambda: jnp.zeros((), I32)), (lambda: jnp.zeros((), F32))
    return State(
        env_state=jax.random.uniform(k_env, (e, 4), F64, -0.05, 0.05),
        env_t=jnp.zeros(e, I32), env_ret=jnp.zeros(e, F32),
        params=params, target=params.copy(), adam_m=jnp.zeros(p, F32), adam_v=jnp.zeros(p, F32),
        update_count=i0(), replay=jnp.zeros((c, ROW), F32), leaves=jnp.zeros(c, F32),
        head=i0(), size=i0(), max_prio=jnp.ones((), F32), window=jnp.zeros((e, n, 6), F32),
        step=i0(), episodes=i0(), lr=jnp.array(cfg.lr, F32), loss_ema=f0(),
        best_loss=jnp.array(jnp.inf, F32), bad_checks=i0(), last_loss=f0(),
        ret_ring=jnp.zeros(100, F32), key=key)


def _learn(cfg: Config, s: State, strata, beta, last_slot, learning, net: Network) -> State:
    """One learner update (docs/dqn.md 6.1-6.7); with ``learning`` off it changes nothing
    (its values may then be NaN: empty replay; jnp.where drops them)."""
    c, b = cfg.capacity, cfg.batch
    leaf = sample_leaves(sum_tree_levels(s.leaves), strata, last_slot)
    # w_i = (size * p_i / total)^-beta over its batch maximum is (p_i / min_j p_j)^-beta.
    prio = s.leaves[leaf]
    weight = (prio / prio.min()) ** -beta
    batch = s.replay[leaf]
    obs, act = batch[:, OBS:ACT], batch[:, ACT].astype(I32)
    ret, nxt, disc = batch[:, RET], batch[:, NEXT:DISC], batch[:, DISC]

    grad, loss, error = net.loss_and_grad(cfg, s.params, s.target, obs, act, ret, nxt, disc,
                                          weight)
    grad = grad * jnp.minimum(1.0, cfg.max_grad_norm / (jnp.linalg.norm(grad) + 1e-6))

    t = (s.update_count + 1).astype(F32)
    m = cfg.adam_b1 * s.adam_m + (1 - cfg.adam_b1) * grad
    v = cfg.adam_b2 * s.adam_v + (1 - cfg.adam_b2) * grad * grad
    m_hat = m / (1 - cfg.adam_b1 ** t)
    v_hat = v / (1 - cfg.adam_b2 ** t)
    params = s.params - s.lr * (cfg.weight_decay * s.params + m_hat / (jnp.sqrt(v_hat)
                                                                       + cfg.adam_eps))

    # Only the last occurrence of a leaf in the batch writes (the spec's "highest i wins").
    error = error + cfg.per_eps
    later = jnp.triu(jnp.ones((b, b), bool), 1)
    dup_later = ((leaf[:, None] == leaf[None, :]) & later).any(1)
    leaves = s.leaves.at[jnp.where(dup_later | ~learning, c, leaf)].set(error ** cfg.per_alpha,
                                                                        mode="drop")
    ema = jnp.where(s.update_count == 0, loss,
                    cfg.loss_ema * s.loss_ema + (1 - cfg.loss_ema) * loss)
    new = {"params": params, "adam_m": m, "adam_v": v, "update_count": s.update_count + 1,
           "target": cfg.tau * params + (1 - cfg.tau) * s.target,
           "max_prio": jnp.maximum(s.max_prio, error.max()), "loss_ema": ema, "last_loss": loss}
    return s._replace(leaves=leaves, **{k: jnp.where(learning, v, getattr(s, k))
                                        for k, v in new.items()})


def train_step(cfg: Config, s: State, net: Network = DQN) -> State:
    """One environment step and UPDATES learner updates (docs/dqn.md, One step)."""
    e, n, c, b = cfg.envs, cfg.nstep, cfg.capacity, cfg.batch

    # 1. Tick; the learner gate is read before this step's flush.
    step = s.step + 1
    stepf = step.astype(F32)
    epsilon = jnp.maximum(cfg.eps_end, cfg.eps_start - (cfg.eps_start - cfg.eps_end) * stepf
                          / cfg.eps_decay_steps)
    beta = jnp.minimum(1.0, cfg.per_beta0 + (1 - cfg.per_beta0) * stepf / cfg.per_beta_steps)
    learning = s.size >= cfg.learning_starts
    k_explore, k_action, k_reset, k_sample = jax.random.split(jax.random.fold_in(s.key, step), 4)

    # 2. Act.
    obs = s.env_state.astype(F32)
    explore = jax.random.uniform(k_explore, (e,), F32) < epsilon
    action = jnp.where(explore, jax.random.bernoulli(k_action, shape=(e,)).astype(I32),
                       net.greedy_action(cfg, s.params, obs))

    # 3. Environment.
    nxt, terminated = cartpole_step(s.env_state, action)
    t = s.env_t
    done = terminated | (t + 1 >= MAX_EPISODE_STEPS)
    ret = s.env_ret + 1.0

    # 4. n-step push: window slot t % N, then the chronological window (position p holds
    # episode step t - (N - 1) + p) gives every position's transition at once.
    envs = jnp.arange(e, dtype=I32)
    window = s.window.at[envs, t % n].set(
        jnp.concatenate([obs, action.astype(F32)[:, None], jnp.ones((e, 1), F32)], 1))
    count = jnp.where(done, jnp.minimum(t + 1, n), (t + 1 >= n).astype(I32))
    positions = jnp.arange(n, dtype=I32)
    win = window[envs[:, None], (t[:, None] + 1 + positions) % n]
    returns = win[..., 5] @ jnp.array(nstep_return_matrix(cfg), F32)
    boot = jnp.array([cfg.gamma ** (n - p) for p in range(n)], F32)
    discount = jnp.where(terminated[:, None], 0.0, boot)
    rows = jnp.concatenate([win[..., :5], returns[..., None],
                            jnp.broadcast_to(nxt.astype(F32)[:, None, :], (e, n, 4)),
                            discount[..., None]], -1)
    pos = positions - jnp.where(done, n - count, 0)[:, None]  # position in the flushed run
    flushed = (pos >= 0) & (pos < count[:, None])

    # 5. Flush: the exclusive prefix sum of the counts makes every slot unique; slots that
    # flush nothing are out of range and dropped.
    offset = jnp.cumsum(count, dtype=I32) - count
    total = count.sum(dtype=I32)
    slots = jnp.where(flushed, (s.head + offset[:, None] + pos) % c, c).reshape(-1)
    replay = s.replay.at[slots].set(rows.reshape(-1, ROW), mode="drop")
    leaves = s.leaves.at[slots].set(s.max_prio ** cfg.per_alpha, mode="drop")
    size = jnp.minimum(s.size + total, c)
    reset = jax.random.uniform(k_reset, (e, 4), F64, -0.05, 0.05)
    s = s._replace(env_state=jnp.where(done[:, None], reset, nxt),
                   env_t=jnp.where(done, 0, t + 1), env_ret=jnp.where(done, 0.0, ret),
                   window=window, replay=replay, leaves=leaves, head=(s.head + total) % c,
                   size=size, step=step)

    # 6. Learner, UPDATES times.
    strata = (jnp.arange(b, dtype=F32)
              + jax.random.uniform(k_sample, (cfg.updates, b), F32)) / b
    last_slot = jnp.maximum(size - 1, 0)
    for u in range(cfg.updates):
        s = _learn(cfg, s, strata[u], beta, last_slot, learning, net)

    # 7. Plateau controller on the loss EMA.
    check = learning & (step % cfg.lr_check_every == 0)
    improved = s.loss_ema < s.best_loss * (1 - cfg.lr_threshold)
    bad = jnp.where(check, jnp.where(improved, 0, s.bad_checks + 1), s.bad_checks)
    cut = bad >= cfg.lr_patience
    s = s._replace(best_loss=jnp.where(check & improved, s.loss_ema, s.best_loss),
                   lr=jnp.where(cut, jnp.maximum(s.lr * cfg.lr_factor, cfg.lr_min), s.lr),
                   bad_checks=jnp.where(cut, 0, bad))

    # 8. Episode returns: of the episodes that end in this step only the last 100 (in env
    # order) can be in the ring, and only they write.
    rank = jnp.cumsum(done, dtype=I32)
    keep = done & (rank > rank[-1] - 100)
    ring = s.ret_ring.at[jnp.where(keep, (s.episodes + rank - 1) % 100, 100)].set(
        ret, mode="drop")
    return s._replace(ret_ring=ring, episodes=s.episodes + rank[-1])


class Trainer(ScanTrainer):
    """``advance(k)`` enqueues k steps as k / K dispatches of a jitted ``lax.scan`` over K
    steps (K = ``steps_per_dispatch``; a shorter tail compiles its own scan) and returns
    without waiting; ``diagnostics()`` waits and reads them."""

    net = DQN

    def __init__(self, cfg: Config, steps_per_dispatch: int = 1000) -> None:
        super().__init__(steps_per_dispatch)
        self.cfg = cfg
        self.state = init_state(cfg, self.net)

    def one_step(self, state):
        return train_step(self.cfg, state, self.net)

    def diagnostics(self) -> dict:
        s = self.state
        step, ring, episodes, loss, ema, lr, size = jax.device_get(
            (s.step, s.ret_ring, s.episodes, s.last_loss, s.loss_ema, s.lr, s.size))
        return diagnostics(self.cfg, step=step, ret_ring=ring, episodes=episodes, loss=loss,
                           loss_ema=ema, lr=lr, replay_size=size)


def jax_parser(description: str, config_class=Config):
    """The twins' command line (bench/dqn_spec.py) and K, the steps of one dispatch."""
    p = parser(description, (jax.default_backend(),), ("jit-scan",), config_class)
    p.add_argument("--steps-per-dispatch", type=int, default=500,
                   help="K, the steps one lax.scan runs per jitted call")
    return p


def run(args, cfg, trainer_class=None) -> dict:
    """Compile (timed as set-up), train as `args` says, and the summary with JAX's figures."""
    t0 = time.perf_counter()
    trainer = (trainer_class or Trainer)(cfg, args.steps_per_dispatch)
    trainer.advance(0)
    trainer.synchronize()
    setup_s = time.perf_counter() - t0
    summary = train(trainer, args, cfg)
    summary.update(setup_s=round(setup_s, 3), jax=jax.__version__, steps_per_dispatch=args.steps_per_dispatch)
    return summary


def main(argv=None) -> int:
    args = jax_parser(__doc__.split("\n\n")[0]).parse_args(argv)
    print_summary(run(args, config_of(args)), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
