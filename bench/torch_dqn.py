"""PyTorch twin of the flagship training step: double DQN with prioritized n-step replay on
vectorised CartPole-v1, exactly as docs/dqn.md specifies it.

It is written the way one writes PyTorch for speed: every stage vectorised over the
environments and the learner batch, static shapes, and not one host synchronisation or
data-dependent Python branch inside the step. Every decision that depends on data (is the
learner on, did an episode end, which leaf was sampled, is the loss on a plateau) is a device
tensor consumed by ``torch.where``. That is what lets the very same step function run

* ``eager``: op by op from Python,
* ``cudagraph``: captured once with ``torch.cuda.CUDAGraph`` and replayed,
* ``compile``: through ``torch.compile(mode="reduce-overhead")`` (Inductor + CUDA graphs),

so that the benchmarks compare pipec with the best PyTorch can do on equal work.

Randomness is a counter-based hash, not a ``torch.Generator``: a generator's offset is host
state that a captured graph freezes, whereas a hash of (SEED, stream, index, step) with the
step counter in device memory gives fresh numbers on every replay and the same numbers in
every mode. The hash (see ``hash32``) is cheap to mirror in a CUDA kernel.

Run ``python bench/torch_dqn.py --help`` for the command line; bench scripts use
``make_trainer(Config(...), device, mode)`` and time ``.step()``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class Config:
    """Sizes and hyper-parameters; field names are docs/dqn.md's names in lower case."""

    envs: int = 128
    hidden: int = 64
    nstep: int = 5
    gamma: float = 0.99
    capacity: int = 1 << 17
    batch: int = 256
    updates: int = 1
    learning_starts: int = 4096
    lr: float = 1e-3
    lr_min: float = 1e-4
    adam_b1: float = 0.9
    adam_b2: float = 0.999
    adam_eps: float = 1e-8
    weight_decay: float = 0.0
    max_grad_norm: float = 10.0
    tau: float = 0.01
    eps_start: float = 1.0
    eps_end: float = 0.02
    eps_decay_steps: int = 2000
    per_alpha: float = 0.6
    per_beta0: float = 0.4
    per_beta_steps: int = 10000
    per_eps: float = 1e-3
    lr_check_every: int = 500
    lr_patience: int = 4
    lr_factor: float = 0.5
    lr_threshold: float = 0.01
    loss_ema: float = 0.99
    seed: int = 0

    def validate(self) -> None:
        c = self.capacity
        if c < 2 or c & (c - 1):
            raise ValueError(f"capacity must be a power of two >= 2, got {c}")
        # One step flushes at most ENVS * NSTEP transitions; the slots of one flush must not
        # wrap onto each other, or two writes of one step would race for a slot.
        if self.envs * self.nstep > c:
            raise ValueError("envs * nstep must not exceed capacity")
        if min(self.envs, self.hidden, self.nstep, self.batch, self.updates) < 1:
            raise ValueError("envs, hidden, nstep, batch and updates must be >= 1")


# CartPole-v1 constants, combined exactly as Gymnasium combines them (in float64).
GRAVITY = 9.8
MASSCART = 1.0
MASSPOLE = 0.1
TOTAL_MASS = MASSPOLE + MASSCART
LENGTH = 0.5
POLEMASS_LENGTH = MASSPOLE * LENGTH
FORCE_MAG = 10.0
TAU_PHYS = 0.02
X_THRESHOLD = 2.4
THETA_THRESHOLD = 12 * 2 * math.pi / 360
MAX_EPISODE_STEPS = 500
SOLVED_RETURN = 195.0

# Random streams of the counter-based generator.
STREAM_EXPLORE, STREAM_ACTION, STREAM_RESET, STREAM_SAMPLE, STREAM_INIT = range(5)

# Columns of one replay row. The whole transition is one float32 row so that a flush is one
# scatter and a learner batch one gather; the action (0 or 1) is exact in float32.
OBS, ACT, RET, NEXT, DISC, ROW = 0, 4, 5, 6, 10, 11

DIAG_FIELDS = ("step", "mean_return_100", "episodes", "loss", "loss_ema", "lr", "epsilon",
               "replay_size")

_M32 = 0xFFFFFFFF


def _mul32(x, c: int):
    """(x * c) mod 2^32 for x in [0, 2^32), without ever overflowing int64: signed overflow
    is undefined in the C++ kernels behind the ops, so the constant is split in halves."""
    return (x * (c & 0xFFFF) + (((x * (c >> 16)) & 0xFFFF) << 16)) & _M32


def hash32(x):
    """Chris Wellons' lowbias32, a bijection of 32-bit integers with good avalanche.

    Works on Python ints and on int64 tensors holding values in [0, 2^32). The random word
    for (seed, stream, index, step) is
    ``hash32(hash32(hash32(hash32(seed) ^ stream) ^ index) ^ step)``; being a bijection at
    every stage, it never repeats within one stream and step, nor across steps of one lane.
    """
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def _lane_keys(seed: int, stream: int, n: int, device) -> torch.Tensor:
    """Keys of ``n`` lanes of one stream; XOR in the step and hash once more for the word."""
    head = hash32(hash32(seed & _M32) ^ stream)
    return hash32(torch.full((n,), head, dtype=torch.int64, device=device)
                  ^ torch.arange(n, dtype=torch.int64, device=device))


def uniform01(bits: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """Top 24 bits of a random word as a float in [0, 1), exact in float32."""
    return (bits >> 8).to(dtype) * (1.0 / (1 << 24))


def cartpole_step(state: torch.Tensor, action: torch.Tensor):
    """One Euler step of CartPole-v1 for a batch of float64 states [..., 4] and actions in
    {0, 1}. Returns (next_state, terminated). Operations and their order follow Gymnasium
    1.x's ``CartPoleEnv.step`` so that the float64 results agree to rounding."""
    x, x_dot, theta, theta_dot = state.unbind(-1)
    force = FORCE_MAG * (2 * action - 1).to(torch.float64)
    costheta = torch.cos(theta)
    sintheta = torch.sin(theta)
    temp = (force + POLEMASS_LENGTH * (theta_dot * theta_dot) * sintheta) / TOTAL_MASS
    thetaacc = (GRAVITY * sintheta - costheta * temp) / (
        LENGTH * (4.0 / 3.0 - MASSPOLE * (costheta * costheta) / TOTAL_MASS))
    xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS
    nxt = torch.stack((x + TAU_PHYS * x_dot, x_dot + TAU_PHYS * xacc,
                       theta + TAU_PHYS * theta_dot, theta_dot + TAU_PHYS * thetaacc), -1)
    terminated = (nxt[..., 0].abs() > X_THRESHOLD) | (nxt[..., 2].abs() > THETA_THRESHOLD)
    return nxt, terminated


def param_count(hidden: int) -> int:
    return 8 * hidden + hidden * hidden + 2


def q_values(flat: torch.Tensor, x: torch.Tensor, hidden: int) -> torch.Tensor:
    """The Q network 4 -> H -> H -> 2 (ReLU) with its weights as views into the flat vector
    (layout of docs/dqn.md, nn.Linear's [out][in] weight order)."""
    h = hidden
    w1 = flat[:4 * h].view(h, 4)
    b1 = flat[4 * h:5 * h]
    w2 = flat[5 * h:5 * h + h * h].view(h, h)
    b2 = flat[5 * h + h * h:6 * h + h * h]
    w3 = flat[6 * h + h * h:8 * h + h * h].view(2, h)
    b3 = flat[8 * h + h * h:8 * h + h * h + 2]
    x = torch.relu(F.linear(x, w1, b1))
    x = torch.relu(F.linear(x, w2, b2))
    return F.linear(x, w3, b3)


def greedy(q: torch.Tensor) -> torch.Tensor:
    """argmax over two actions with ties going to action 0."""
    return (q[:, 1] > q[:, 0]).long()


class DQNTrainer(torch.nn.Module):
    """All training state as module buffers (so torch.compile treats them as static inputs
    whose in-place updates a CUDA graph may replay) and ``forward`` = one step."""

    def __init__(self, cfg: Config, device) -> None:
        super().__init__()
        cfg.validate()
        self.cfg = cfg
        dev = torch.device(device)
        e, n, c, b, h = cfg.envs, cfg.nstep, cfg.capacity, cfg.batch, cfg.hidden
        p = param_count(h)
        i64, f32, f64 = torch.int64, torch.float32, torch.float64

        def buf(name, tensor):
            self.register_buffer(name, tensor.to(dev))

        # Environments: the reset state of every env is drawn at step 0 of the reset stream.
        keys0 = _lane_keys(cfg.seed, STREAM_RESET, 4 * e, dev)
        buf("env_state", (-0.05 + 0.1 * uniform01(hash32(keys0), f64)).view(e, 4))
        buf("env_t", torch.zeros(e, dtype=i64))
        buf("env_ret", torch.zeros(e, dtype=f32))

        # Q network: nn.Linear's default init, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) per layer.
        bound = torch.empty(p, dtype=f64)
        bound[:5 * h] = 1 / math.sqrt(4)
        bound[5 * h:] = 1 / math.sqrt(h)
        u = uniform01(hash32(_lane_keys(cfg.seed, STREAM_INIT, p, dev)), f64)
        params = ((2 * u - 1) * bound.to(dev)).to(f32)
        buf("params", params)
        buf("target", params.clone())
        buf("adam_m", torch.zeros(p, dtype=f32))
        buf("adam_v", torch.zeros(p, dtype=f32))

        # Replay and sum tree have a scratch tail past their real extent: a write that a step
        # must not make goes there, to its own scratch slot, so that every scatter has a
        # static shape and no two writes of one scatter meet (which keeps CUDA runs
        # deterministic, scratch included).
        buf("replay", torch.zeros(c + e * n, ROW, dtype=f32))
        buf("tree", torch.zeros(2 * c + max(e * n, b), dtype=f32))
        buf("head", torch.zeros((), dtype=i64))
        buf("size", torch.zeros((), dtype=i64))
        buf("max_prio", torch.ones((), dtype=f32))
        # n-step window, per env and slot: obs[4], action, reward.
        buf("window", torch.zeros(e, n, 6, dtype=f32))

        buf("step_count", torch.zeros((), dtype=i64))
        buf("update_count", torch.zeros((), dtype=i64))
        buf("episodes", torch.zeros((), dtype=i64))
        buf("lr", torch.tensor(cfg.lr, dtype=f32))
        buf("loss_ema_value", torch.zeros((), dtype=f32))
        buf("best_loss", torch.tensor(math.inf, dtype=f32))
        buf("bad_checks", torch.zeros((), dtype=i64))
        buf("last_loss", torch.zeros((), dtype=f32))
        # Returns of the last 100 finished episodes, then one scratch slot per env.
        buf("ret_ring", torch.zeros(100 + e, dtype=f32))
        buf("diag", torch.zeros(len(DIAG_FIELDS), dtype=f64))

        # Constants derived from the config.
        buf("rng_keys", torch.cat([
            _lane_keys(cfg.seed, STREAM_EXPLORE, e, dev),
            _lane_keys(cfg.seed, STREAM_ACTION, e, dev),
            keys0,
            _lane_keys(cfg.seed, STREAM_SAMPLE, cfg.updates * b, dev)]))
        buf("reward", torch.ones(e, 1, dtype=f32))  # CartPole-v1 pays 1 on every step
        buf("env_index", torch.arange(e, dtype=i64))
        buf("win_pos", torch.arange(n, dtype=i64))
        buf("flush_scratch", torch.arange(e * n, dtype=i64).view(e, n))
        # R for chronological window position p is sum_{q >= p} GAMMA^(q-p) r_q: one matmul
        # with an upper-triangular matrix of powers gives the n-step returns of all positions.
        buf("ret_matrix", torch.tensor(
            [[cfg.gamma ** (q - pp) if q >= pp else 0.0 for pp in range(n)] for q in range(n)],
            dtype=f32))
        buf("boot_discount", torch.tensor([cfg.gamma ** (n - pp) for pp in range(n)], dtype=f32))
        buf("batch_index", torch.arange(b, dtype=f32))
        buf("sample_scratch", torch.arange(2 * c, 2 * c + b, dtype=i64))
        buf("walk_root", torch.ones(b, dtype=i64))
        buf("later", torch.ones(b, b, dtype=torch.bool).triu(1))

    # -- one step ---------------------------------------------------------------------------

    def forward(self) -> None:
        cfg = self.cfg
        e, n, c, b = cfg.envs, cfg.nstep, cfg.capacity, cfg.batch

        # 1. Tick. The learner gate is read once, before this step's flush.
        self.step_count.add_(1)
        step = self.step_count
        stepf = step.to(torch.float32)
        epsilon = torch.clamp(cfg.eps_start - (cfg.eps_start - cfg.eps_end) * stepf
                              / cfg.eps_decay_steps, min=cfg.eps_end)
        beta = torch.clamp(cfg.per_beta0 + (1 - cfg.per_beta0) * stepf / cfg.per_beta_steps,
                           max=1.0)
        learning = self.size >= cfg.learning_starts

        bits = hash32(self.rng_keys ^ (step & _M32))
        explore_u = uniform01(bits[:e])
        random_action = bits[e:2 * e] >> 31
        reset_state = (-0.05 + 0.1 * uniform01(bits[2 * e:6 * e], torch.float64)).view(e, 4)
        sample_u = uniform01(bits[6 * e:]).view(cfg.updates, b)

        # 2. Act.
        obs = self.env_state.to(torch.float32)
        action = torch.where(explore_u < epsilon, random_action,
                             greedy(q_values(self.params, obs, cfg.hidden)))

        # 3. Environment.
        nxt, terminated = cartpole_step(self.env_state, action)
        t = self.env_t
        truncated = t + 1 >= MAX_EPISODE_STEPS
        done = terminated | truncated
        ret = self.env_ret + 1.0

        # 4. n-step push.
        self.window[self.env_index, t % n] = torch.cat(
            (obs, action.to(torch.float32)[:, None], self.reward), 1)
        count = torch.where(done, torch.clamp(t + 1, max=n), (t + 1 >= n).long())
        # Chronological position p holds episode step t - (n - 1) + p.
        win = self.window[self.env_index[:, None], (t[:, None] + 1 + self.win_pos) % n]
        returns = win[..., 5] @ self.ret_matrix
        discount = torch.where(terminated[:, None], 0.0, self.boot_discount)
        rows = torch.cat((win[..., :5], returns[..., None],
                          nxt.to(torch.float32)[:, None, :].expand(e, n, 4),
                          discount[..., None]), -1)
        # An ended episode flushes its last `count` positions, a running one its oldest.
        first = torch.where(done, n - count, 0)[:, None]
        flushed = (self.win_pos >= first) & (self.win_pos < first + count[:, None])

        # 5. Flush: the exclusive prefix sum of the counts makes every slot unique.
        offset = (torch.cumsum(count, 0) - count)[:, None]
        total = count.sum()
        slots = torch.where(flushed, (self.head + offset + self.win_pos - first) % c,
                            c + self.flush_scratch)
        self.replay.index_copy_(0, slots.view(-1), rows.view(-1, ROW))
        self.tree.index_put_(((slots + c).view(-1),),
                             (self.max_prio ** cfg.per_alpha).expand(e * n))
        self.head.copy_((self.head + total) % c)
        self.size.copy_(torch.clamp(self.size + total, max=c))
        # The env advances only now: `t` above is a view of env_t.
        self.env_state.copy_(torch.where(done[:, None], reset_state, nxt))
        self.env_t.copy_(torch.where(done, 0, t + 1))
        self.env_ret.copy_(torch.where(done, 0.0, ret))

        # 6. Learner.
        for u in range(cfg.updates):
            self._learn(sample_u[u], beta, learning)

        # 7. Plateau controller on the loss EMA.
        check = learning & (step % cfg.lr_check_every == 0)
        improved = self.loss_ema_value < self.best_loss * (1 - cfg.lr_threshold)
        self.best_loss.copy_(torch.where(check & improved, self.loss_ema_value, self.best_loss))
        bad = torch.where(check, torch.where(improved, 0, self.bad_checks + 1), self.bad_checks)
        cut = bad >= cfg.lr_patience
        self.lr.copy_(torch.where(cut, torch.clamp(self.lr * cfg.lr_factor, min=cfg.lr_min),
                                  self.lr))
        self.bad_checks.copy_(torch.where(cut, 0, bad))

        # 8. Diagnostics. Of the episodes that end in this step only the last 100 (in env
        # order) can be in the ring, and only they write, so no two writes meet in one slot.
        rank = torch.cumsum(done, 0)  # 1-based among this step's ended episodes
        n_ended = rank[-1]
        keep = done & (rank > n_ended - 100)
        self.ret_ring.index_put_(
            (torch.where(keep, (self.episodes + rank - 1) % 100, 100 + self.env_index),), ret)
        self.episodes.add_(n_ended)
        mean100 = self.ret_ring[:100].sum() / torch.clamp(self.episodes, 1, 100)
        self.diag.copy_(torch.stack((stepf, mean100, self.episodes.to(torch.float32),
                                     self.last_loss, self.loss_ema_value, self.lr, epsilon,
                                     self.size.to(torch.float32))))

    def _loss(self, flat, obs, act, y, w):
        q = q_values(flat, obs, self.cfg.hidden).gather(1, act[:, None]).squeeze(1)
        loss = (w * F.huber_loss(q, y, reduction="none", delta=1.0)).mean()
        return loss, q - y

    def _learn(self, sample_u: torch.Tensor, beta: torch.Tensor, learning: torch.Tensor):
        cfg = self.cfg
        c, b = cfg.capacity, cfg.batch
        levels = c.bit_length() - 1
        tree = self.tree

        # 1. Sum-tree rebuild, leaves to root. Runs even with the learner off: internal nodes
        # are a pure function of the leaves.
        for lvl in reversed(range(levels)):
            lo = 1 << lvl
            torch.add(tree[2 * lo:4 * lo:2], tree[2 * lo + 1:4 * lo:2], out=tree[lo:2 * lo])

        # 2. Stratified proportional sampling by a walk from the root. Node k's left child is
        # entry k of the even-indexed view, which saves computing 2k at every level.
        total = tree[1]
        left_children = tree[0:2 * c:2]
        u = (self.batch_index + sample_u) * total / b
        node = self.walk_root
        for _ in range(levels):
            left = left_children[node]
            right = u >= left
            u = u - left * right
            node = torch.add(right, node, alpha=2)
        # Float rounding can walk past the last filled leaf; before the first flush size is 0
        # and the clamp to 0 keeps the (unused) gathers in bounds.
        leaf = torch.clamp(torch.minimum(node - c, self.size - 1), min=0)
        size = self.size.to(torch.float32)
        weight = (size * tree[leaf + c] / total) ** -beta
        weight = weight / weight.max()
        batch = self.replay[leaf]
        obs, act = batch[:, OBS:ACT], batch[:, ACT].long()
        ret, nxt, disc = batch[:, RET], batch[:, NEXT:DISC], batch[:, DISC]

        # 3. Double-DQN target and gradients of the weighted Huber loss.
        with torch.no_grad():
            best = greedy(q_values(self.params, nxt, cfg.hidden))
            q_next = q_values(self.target, nxt, cfg.hidden).gather(1, best[:, None]).squeeze(1)
            y = ret + disc * q_next
        grad, (loss, delta) = torch.func.grad_and_value(self._loss, has_aux=True)(
            self.params, obs, act, y, weight)

        # 4. Global-norm clip.
        norm = torch.linalg.vector_norm(grad)
        grad = grad * torch.clamp(cfg.max_grad_norm / (norm + 1e-6), max=1.0)

        # 5. AdamW, bias-corrected with the update count this update will have. Every state
        # write below goes through torch.where on `learning`, never a multiplication by it:
        # with the learner off the loss may be NaN (empty tree), and 0 * NaN is NaN.
        t = (self.update_count + 1).to(torch.float32)
        m = cfg.adam_b1 * self.adam_m + (1 - cfg.adam_b1) * grad
        v = cfg.adam_b2 * self.adam_v + (1 - cfg.adam_b2) * grad * grad
        m_hat = m / (1 - cfg.adam_b1 ** t)
        v_hat = v / (1 - cfg.adam_b2 ** t)
        params = self.params - self.lr * (cfg.weight_decay * self.params
                                          + m_hat / (torch.sqrt(v_hat) + cfg.adam_eps))
        self.adam_m.copy_(torch.where(learning, m, self.adam_m))
        self.adam_v.copy_(torch.where(learning, v, self.adam_v))
        self.params.copy_(torch.where(learning, params, self.params))

        # 6. Priorities. Only the last occurrence of a leaf in the batch writes (the spec's
        # "highest i wins"), which also makes the scatter free of duplicate indices; the
        # others, and all samples while learning is off, write to their scratch slots.
        error = delta.abs() + cfg.per_eps
        dup_later = ((leaf[:, None] == leaf[None, :]) & self.later).any(1)
        dst = torch.where(learning & ~dup_later, leaf + c, self.sample_scratch)
        tree.index_put_((dst,), error ** cfg.per_alpha)
        self.max_prio.copy_(torch.where(learning, torch.maximum(self.max_prio, error.max()),
                                        self.max_prio))
        # The EMA starts at the first loss rather than at 0, so that the plateau controller
        # does not see a rising EMA as the loss it averages settles in.
        ema = torch.where(self.update_count == 0, loss,
                          cfg.loss_ema * self.loss_ema_value + (1 - cfg.loss_ema) * loss)
        self.loss_ema_value.copy_(torch.where(learning, ema, self.loss_ema_value))
        self.last_loss.copy_(torch.where(learning, loss, self.last_loss))
        self.update_count.add_(learning.long())

        # 7. Target soft update from the updated online weights.
        self.target.copy_(torch.where(
            learning, cfg.tau * self.params + (1 - cfg.tau) * self.target, self.target))


class Trainer:
    """What bench scripts time: ``step()`` enqueues one step (UPDATES learner updates
    included) and returns without waiting; ``diagnostics()`` reads the device copy."""

    def __init__(self, cfg: Config, device, mode: str = "eager") -> None:
        self.cfg = cfg
        self.device = torch.device(device)
        self.mode = mode
        self.module = DQNTrainer(cfg, self.device)
        if mode == "eager":
            self._step = self.module
        elif mode == "cudagraph":
            self._step = self._capture()
        elif mode == "compile":
            for buffer in self.module.buffers():
                torch._dynamo.mark_static_address(buffer)
            self._step = torch.compile(self.module, mode="reduce-overhead", fullgraph=True)
        else:
            raise ValueError(f"unknown mode {mode!r}")

    def _capture(self):
        if self.device.type != "cuda":
            raise ValueError("mode cudagraph needs a CUDA device")
        # Warm-up on a side stream initialises cuBLAS and the allocator, as capture requires;
        # the state is restored afterwards so that replay 1 is step 1, as in eager mode.
        saved = [b.clone() for b in self.module.buffers()]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self.module()
        torch.cuda.current_stream().wait_stream(side)
        for b, s in zip(self.module.buffers(), saved):
            b.copy_(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.module()
        return graph.replay

    def step(self) -> None:
        self._step()

    def diagnostics(self) -> dict:
        values = self.module.diag.tolist()
        out = dict(zip(DIAG_FIELDS, values))
        for key in ("step", "episodes", "replay_size"):
            out[key] = int(out[key])
        return out

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def make_trainer(config: Config, device, mode: str = "eager") -> Trainer:
    return Trainer(config, device, mode)


# Field types as strings: this module uses postponed evaluation of annotations.
_FIELD_TYPES = {"int": int, "float": float}


def _parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--mode", choices=("eager", "cudagraph", "compile"), default="eager")
    parser.add_argument("--steps", type=int, default=10000)
    parser.add_argument("--log-every", type=int, default=100,
                        help="read diagnostics every K steps; the 195 threshold is checked there")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    for f in dataclasses.fields(Config):
        flags = ["--" + f.name.replace("_", "-")]
        if "_" in f.name:
            flags.append("--" + f.name)
        parser.add_argument(*flags, dest=f.name, type=_FIELD_TYPES[f.type], default=f.default,
                            help=f.name.upper())
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = _parse_args(argv)
    cfg = Config(**{f.name: getattr(args, f.name) for f in dataclasses.fields(Config)})
    t0 = time.perf_counter()
    trainer = make_trainer(cfg, args.device, args.mode)
    trainer.synchronize()
    setup_s = time.perf_counter() - t0

    solved_step = None
    start = last_time = time.perf_counter()
    last_step = 0
    for i in range(1, args.steps + 1):
        trainer.step()
        if i % args.log_every == 0 or i == args.steps:
            d = trainer.diagnostics()
            now = time.perf_counter()
            d["steps_per_s"] = (i - last_step) / (now - last_time)
            last_time, last_step = now, i
            if solved_step is None and d["mean_return_100"] >= SOLVED_RETURN:
                solved_step = d["step"]
            if args.json:
                print(json.dumps(d), flush=True)
            else:
                print(f"step {d['step']:6d}  return100 {d['mean_return_100']:7.2f}  "
                      f"episodes {d['episodes']:7d}  loss {d['loss']:.4f}  lr {d['lr']:.2e}  "
                      f"eps {d['epsilon']:.3f}  {d['steps_per_s']:8.1f} steps/s", flush=True)
    trainer.synchronize()
    wall = time.perf_counter() - start
    final = trainer.diagnostics()
    summary = {"summary": True, "device": args.device, "mode": args.mode, "steps": args.steps,
               "setup_s": round(setup_s, 3), "wall_s": round(wall, 3),
               "steps_per_s": args.steps / wall, "solved_step": solved_step,
               "final_mean_return_100": final["mean_return_100"],
               "config": dataclasses.asdict(cfg)}
    if args.json:
        print(json.dumps(summary), flush=True)
    else:
        print(f"done: {args.steps} steps in {wall:.1f} s ({summary['steps_per_s']:.1f} steps/s, "
              f"setup {setup_s:.1f} s), mean return over 100 reached {SOLVED_RETURN:g} at step "
              f"{solved_step}, final {final['mean_return_100']:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
