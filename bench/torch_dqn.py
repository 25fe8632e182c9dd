"""PyTorch twin of the flagship training step: double DQN with prioritized n-step replay on
vectorised CartPole-v1, exactly as docs/dqn.md specifies it.

It is written the way one writes PyTorch for speed: every stage vectorised over the
environments and the learner batch, static shapes, one library op where one exists (a
prefix sum and a binary search for proportional sampling, the fused AdamW kernel, ``lerp_``
for the target update), and not one host synchronisation or data-dependent Python branch
inside the step. Every decision that depends on data (is the learner on, did an episode end,
which leaf was sampled, is the loss on a plateau) is a device tensor consumed by
``torch.where`` or by the fused optimizer's skip flag. That is what lets the very same step
function run

* ``eager``: op by op from Python,
* ``cudagraph``: captured once with ``torch.cuda.CUDAGraph`` and replayed,
* ``compile``: ``torch.compile(mode="reduce-overhead")`` (Inductor kernels in CUDA graph
  trees),
* ``compile-graph``: ``torch.compile(mode="max-autotune-no-cudagraphs")`` captured by hand in
  one ``torch.cuda.CUDAGraph`` (Inductor's fused kernels, none of cudagraph trees' per-call
  checks),

so that the benchmarks compare pipec with the best PyTorch can do on equal work.

Randomness is a counter-based hash, not a ``torch.Generator``: a generator's offset is host
state that a captured graph freezes, whereas a hash of (SEED, stream, index, step) with the
step counter in device memory gives fresh numbers on every replay and the same numbers in
every mode. The hash (see ``hash32``) is cheap to mirror in a CUDA kernel.

Run ``python bench/torch_dqn.py --help`` for the command line, ``--count-ops`` for the
number of operators (and, on a GPU, kernels) one step runs; bench scripts use
``make_trainer(Config(...), device, mode)`` and time ``.step()``.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import sys
import time

import torch
import torch.nn.functional as F
from dqn_spec import (ACT, DISC, FORCE_MAG, GRAVITY, LENGTH, MASSPOLE, MAX_EPISODE_STEPS, NEXT, OBS,
                      POLEMASS_LENGTH, RET, ROW, TAU_PHYS, THETA_THRESHOLD, TOTAL_MASS, X_THRESHOLD,
                      Config, config_of, diagnostics, nstep_return_matrix, param_count,
                      param_slices, parser, print_summary, train)

MODES = ("eager", "cudagraph", "compile", "compile-graph")

# Random streams of the counter-based generator.
STREAM_EXPLORE, STREAM_ACTION, STREAM_RESET, STREAM_SAMPLE, STREAM_INIT = range(5)

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


def layers(flat: torch.Tensor, hidden: int) -> tuple:
    """W1, b1, W2, b2, W3, b3 as views into the flat parameter vector (layout of
    docs/dqn.md, nn.Linear's [out][in] weight order)."""
    return tuple(flat[o:o + math.prod(s)].view(s) for o, s in param_slices(hidden))


def q_values(weights: tuple, x: torch.Tensor) -> torch.Tensor:
    """The Q network 4 -> H -> H -> 2 (ReLU) of the tensors ``layers`` returns."""
    w1, b1, w2, b2, w3, b3 = weights
    x = torch.relu(F.linear(x, w1, b1))
    x = torch.relu(F.linear(x, w2, b2))
    return F.linear(x, w3, b3)


def greedy(q: torch.Tensor) -> torch.Tensor:
    """argmax over two actions with ties going to action 0."""
    return (q[:, 1] > q[:, 0]).long()


def sample_leaves(leaves: torch.Tensor, strata: torch.Tensor, last_slot: torch.Tensor):
    """Leaf of u = stratum * total for every stratum. docs/dqn.md rebuilds a sum tree from
    the leaves and walks it from the root; the walk ends at the leaf whose interval of the
    leaves' running sum holds u, which is what a binary search in the inclusive prefix sum
    returns: one scan instead of a kernel per tree level, in float64 so that the smallest
    leaves keep their share of a large total. Rounding can land past the last filled leaf,
    hence the clamp to ``last_slot`` (size - 1)."""
    cdf = torch.cumsum(leaves, 0, dtype=torch.float64)
    return torch.minimum(torch.searchsorted(cdf, strata * cdf[-1], right=True), last_slot)


class DQNTrainer(torch.nn.Module):
    """All training state as module buffers (so torch.compile treats them as static inputs
    whose in-place updates a CUDA graph may replay) and ``forward`` = one step.

    No tensor in the step requires grad (the parameters are a buffer and their gradient comes
    from ``torch.func.grad``), so autograd records nothing and ``torch.no_grad`` would change
    nothing."""

    def __init__(self, cfg: Config, device) -> None:
        super().__init__()
        cfg.validate()
        self.cfg = cfg
        dev = torch.device(device)
        e, n, c, b = cfg.envs, cfg.nstep, cfg.capacity, cfg.batch
        i64, f32, f64 = torch.int64, torch.float32, torch.float64

        def buf(name, tensor):
            self.register_buffer(name, tensor.to(dev))

        # Environments: the reset state of every env is drawn at step 0 of the reset stream.
        keys0 = _lane_keys(cfg.seed, STREAM_RESET, 4 * e, dev)
        buf("env_state", (-0.05 + 0.1 * uniform01(hash32(keys0), f64)).view(e, 4))
        buf("env_t", torch.zeros(e, dtype=i64))
        buf("env_ret", torch.zeros(e, dtype=f32))

        params = self.init_params(dev)
        p = params.numel()
        buf("params", params)
        buf("target", params.clone())
        buf("adam_m", torch.zeros(p, dtype=f32))
        buf("adam_v", torch.zeros(p, dtype=f32))
        # The learner update count, AdamW's t: float32, as the fused kernel wants its step.
        buf("update_count", torch.zeros((), dtype=f32))

        # Replay and leaf priorities have a scratch tail past their real extent: a write that
        # a step must not make goes there, to its own scratch slot, so that every scatter has
        # a static shape and no two writes of one scatter meet (which keeps CUDA runs
        # deterministic, scratch included).
        buf("replay", torch.zeros(c + e * n, ROW, dtype=f32))
        buf("priorities", torch.zeros(c + max(e * n, b), dtype=f32))
        buf("head", torch.zeros((), dtype=i64))
        buf("size", torch.zeros((), dtype=i64))
        buf("max_prio", torch.ones((), dtype=f32))
        # n-step window, per env and slot: obs[4], action, reward.
        buf("window", torch.zeros(e, n, 6, dtype=f32))

        buf("step_count", torch.zeros((), dtype=i64))
        buf("episodes", torch.zeros((), dtype=i64))
        buf("lr", torch.tensor(cfg.lr, dtype=f32))
        buf("loss_ema_value", torch.zeros((), dtype=f32))
        buf("best_loss", torch.tensor(math.inf, dtype=f32))
        buf("bad_checks", torch.zeros((), dtype=i64))
        buf("last_loss", torch.zeros((), dtype=f32))
        # Returns of the last 100 finished episodes, then one scratch slot per env.
        buf("ret_ring", torch.zeros(100 + e, dtype=f32))

        # Constants derived from the config.
        buf("rng_keys", torch.cat([
            _lane_keys(cfg.seed, STREAM_EXPLORE, e, dev),
            _lane_keys(cfg.seed, STREAM_ACTION, e, dev),
            keys0,
            _lane_keys(cfg.seed, STREAM_SAMPLE, cfg.updates * b, dev)]))
        buf("reward", torch.ones(e, 1, dtype=f32))  # CartPole-v1 pays 1 on every step
        buf("env_index", torch.arange(e, dtype=i64))
        buf("win_pos", torch.arange(n, dtype=i64))
        buf("flush_scratch", torch.arange(c, c + e * n, dtype=i64).view(e, n))
        buf("ret_matrix", torch.tensor(nstep_return_matrix(cfg), dtype=f32))
        buf("boot_discount", torch.tensor([cfg.gamma ** (n - pp) for pp in range(n)], dtype=f32))
        buf("batch_index", torch.arange(b, dtype=f64))
        buf("sample_scratch", torch.arange(c, c + b, dtype=i64))
        buf("later", torch.ones(b, b, dtype=torch.bool).triu(1))

    # -- the network: what a subclass with another network overrides ----------------------

    def init_params(self, dev) -> torch.Tensor:
        """The flat parameters: nn.Linear's default init, U(-1/sqrt(fan_in), 1/sqrt(fan_in))
        per layer."""
        h = self.cfg.hidden
        p = param_count(h)
        bound = torch.empty(p, dtype=torch.float64)
        bound[:5 * h] = 1 / math.sqrt(4)
        bound[5 * h:] = 1 / math.sqrt(h)
        u = uniform01(hash32(_lane_keys(self.cfg.seed, STREAM_INIT, p, dev)), torch.float64)
        return ((2 * u - 1) * bound.to(dev)).to(torch.float32)

    def greedy_action(self, obs: torch.Tensor) -> torch.Tensor:
        return greedy(q_values(layers(self.params, self.cfg.hidden), obs))

    def loss_and_grad(self, obs, act, ret, nxt, disc, weight) -> tuple:
        """Double-DQN target and the IS-weighted Huber loss (docs/dqn.md 6.3): the flat
        gradient, the loss, and each sample's priority error |TD error|."""
        online = layers(self.params, self.cfg.hidden)
        best = greedy(q_values(online, nxt))
        q_next = q_values(layers(self.target, self.cfg.hidden), nxt).gather(1, best[:, None]).squeeze(1)
        y = torch.addcmul(ret, disc, q_next)
        # Differentiating with respect to the layers, not the flat vector, spares autograd
        # a zero-filled flat gradient per layer; one cat lays the gradients out flat.
        grads, (loss, delta) = torch.func.grad_and_value(self._loss, has_aux=True)(
            online, obs, act, y, weight)
        return torch.cat([g.view(-1) for g in grads]), loss, delta.abs()

    # -- one step ---------------------------------------------------------------------------

    def forward(self) -> None:
        cfg = self.cfg
        e, n, c, b = cfg.envs, cfg.nstep, cfg.capacity, cfg.batch

        # 1. Tick. The learner gate is read once, before this step's flush.
        self.step_count.add_(1)
        step = self.step_count
        stepf = step.to(torch.float32)
        epsilon = torch.clamp(cfg.eps_start - (cfg.eps_start - cfg.eps_end) / cfg.eps_decay_steps
                              * stepf, min=cfg.eps_end)
        beta = torch.clamp(cfg.per_beta0 + (1 - cfg.per_beta0) / cfg.per_beta_steps * stepf,
                           max=1.0)
        learning = self.size >= cfg.learning_starts

        # One conversion of all random words; float64 values of the same 24 bits are exact.
        uniform = uniform01(hash32(self.rng_keys ^ step))  # keys and step are below 2^32
        explore_u = uniform[:e]
        random_action = (uniform[e:2 * e] >= 0.5).long()  # the word's top bit
        reset_state = (-0.05 + 0.1 * uniform[2 * e:6 * e].double()).view(e, 4)
        # Stratum of sample i of every update, (i + U_i) / BATCH, in float64 for the search.
        strata = (self.batch_index + uniform[6 * e:].double().view(cfg.updates, b)) / b

        # 2. Act.
        obs = self.env_state.to(torch.float32)
        action = torch.where(explore_u < epsilon, random_action, self.greedy_action(obs))

        # 3. Environment.
        nxt, terminated = cartpole_step(self.env_state, action)
        t = self.env_t
        t1 = t + 1
        done = terminated | (t1 >= MAX_EPISODE_STEPS)
        ret = self.env_ret + 1.0

        # 4. n-step push.
        self.window[self.env_index, t % n] = torch.cat(
            (obs, action.to(torch.float32)[:, None], self.reward), 1)
        count = torch.where(done, torch.clamp(t1, max=n), (t1 >= n).long())
        # Chronological position p holds episode step t - (n - 1) + p.
        win = self.window[self.env_index[:, None], (t1[:, None] + self.win_pos) % n]
        returns = win[..., 5] @ self.ret_matrix
        discount = torch.where(terminated[:, None], 0.0, self.boot_discount)
        rows = torch.cat((win[..., :5], returns[..., None],
                          nxt.to(torch.float32)[:, None, :].expand(e, n, 4),
                          discount[..., None]), -1)
        # An ended episode flushes its last `count` positions, a running one its oldest.
        first = (n - count) * done
        pos = self.win_pos - first[:, None]  # position within the flushed run
        flushed = (pos >= 0) & (pos < count[:, None])

        # 5. Flush: the exclusive prefix sum of the counts makes every slot unique.
        offset = torch.cumsum(count, 0) - count
        total = count.sum()
        slots = torch.where(flushed, (self.head + offset[:, None] + pos) % c, self.flush_scratch)
        self.replay.index_copy_(0, slots.view(-1), rows.view(-1, ROW))
        self.priorities.index_put_((slots.view(-1),),
                                   (self.max_prio ** cfg.per_alpha).expand(e * n))
        self.head.copy_((self.head + total) % c)
        self.size.copy_(torch.clamp(self.size + total, max=c))
        # The env advances only now: `t` above is a view of env_t.
        self.env_state.copy_(torch.where(done[:, None], reset_state, nxt))
        self.env_t.copy_(torch.where(done, 0, t1))
        self.env_ret.copy_(torch.where(done, 0.0, ret))

        # 6. Learner. With the learner off, AdamW skips its update, tau is 0 and every other
        # write goes through torch.where, never a multiplication: the loss may then be NaN
        # (empty replay), and 0 * NaN is NaN.
        skip = (~learning).to(torch.float32)
        tau = learning * cfg.tau
        last_slot = torch.clamp(self.size - 1, min=0)
        for u in range(cfg.updates):
            self._learn(strata[u], beta, learning, skip, tau, last_slot)

        # 7. Plateau controller on the loss EMA.
        check = learning & (step % cfg.lr_check_every == 0)
        improved = self.loss_ema_value < self.best_loss * (1 - cfg.lr_threshold)
        self.best_loss.copy_(torch.where(check & improved, self.loss_ema_value, self.best_loss))
        bad = torch.where(check, torch.where(improved, 0, self.bad_checks + 1), self.bad_checks)
        cut = bad >= cfg.lr_patience
        self.lr.copy_(torch.where(cut, torch.clamp(self.lr * cfg.lr_factor, min=cfg.lr_min),
                                  self.lr))
        self.bad_checks.copy_(torch.where(cut, 0, bad))

        # 8. Episode returns. Of the episodes that end in this step only the last 100 (in env
        # order) can be in the ring, and only they write, so no two writes meet in one slot.
        rank = torch.cumsum(done, 0)  # 1-based among this step's ended episodes
        n_ended = rank[-1]
        keep = done & (rank > n_ended - 100)
        self.ret_ring.index_put_(
            (torch.where(keep, (self.episodes + rank - 1) % 100, 100 + self.env_index),), ret)
        self.episodes.add_(n_ended)

    @staticmethod
    def _loss(weights, obs, act, y, w):
        q = q_values(weights, obs).gather(1, act[:, None]).squeeze(1)
        loss = (w * F.huber_loss(q, y, reduction="none", delta=1.0)).mean()
        return loss, q - y

    def _adamw_arithmetic(self, grad, learning) -> None:
        """AdamW written out, for torch.compile: it has no fake kernel for the fused op with a
        tensor lr, and Inductor fuses this arithmetic into one kernel of its own."""
        cfg = self.cfg
        t = self.update_count
        m = cfg.adam_b1 * self.adam_m + (1 - cfg.adam_b1) * grad
        v = cfg.adam_b2 * self.adam_v + (1 - cfg.adam_b2) * grad * grad
        step = (m / (1 - cfg.adam_b1 ** t)) / (torch.sqrt(v / (1 - cfg.adam_b2 ** t))
                                               + cfg.adam_eps)
        params = self.params - self.lr * (cfg.weight_decay * self.params + step)
        self.adam_m.copy_(torch.where(learning, m, self.adam_m))
        self.adam_v.copy_(torch.where(learning, v, self.adam_v))
        self.params.copy_(torch.where(learning, params, self.params))

    def _learn(self, strata, beta, learning, skip, tau, last_slot) -> None:
        cfg = self.cfg
        c = cfg.capacity

        # 1-2. Stratified proportional sampling.
        leaves = self.priorities[:c]
        leaf = sample_leaves(leaves, strata, last_slot)
        # w_i = (size * p_i / total)^-beta over its batch maximum is (p_i / min_j p_j)^-beta.
        prio = leaves[leaf]
        weight = (prio / prio.min()) ** -beta
        batch = self.replay[leaf]
        obs, act = batch[:, OBS:ACT], batch[:, ACT].long()
        ret, nxt, disc = batch[:, RET], batch[:, NEXT:DISC], batch[:, DISC]

        # 3. The loss, its gradient and the samples' priority errors.
        grad, loss, error = self.loss_and_grad(obs, act, ret, nxt, disc, weight)

        # 4. Global-norm clip.
        norm = torch.linalg.vector_norm(grad)
        grad.mul_(torch.clamp(cfg.max_grad_norm / (norm + 1e-6), max=1.0))

        # 5. AdamW, bias-corrected with the count this update will have.
        self.update_count.add_(learning)
        if torch.compiler.is_compiling():
            self._adamw_arithmetic(grad, learning)
        else:
            # The kernel behind torch.optim.AdamW(fused=True), skipping the update while the
            # learner is off through the flag AMP's GradScaler raises on overflow.
            torch._fused_adamw_([self.params], [grad], [self.adam_m], [self.adam_v], [],
                                [self.update_count], lr=self.lr, beta1=cfg.adam_b1,
                                beta2=cfg.adam_b2, weight_decay=cfg.weight_decay,
                                eps=cfg.adam_eps, amsgrad=False, maximize=False, found_inf=skip)

        # 6. Priorities. Only the last occurrence of a leaf in the batch writes (the spec's
        # "highest i wins"), which also makes the scatter free of duplicate indices; the
        # others, and all samples while learning is off, write to their scratch slots.
        error = error + cfg.per_eps
        dup_later = ((leaf[:, None] == leaf[None, :]) & self.later).any(1)
        dst = torch.where(learning & ~dup_later, leaf, self.sample_scratch)
        self.priorities.index_put_((dst,), error ** cfg.per_alpha)
        self.max_prio.copy_(torch.where(learning, torch.maximum(self.max_prio, error.max()),
                                        self.max_prio))
        # The EMA starts at the first loss rather than at 0, so that the plateau controller
        # does not see a rising EMA as the loss it averages settles in.
        ema = torch.where(self.update_count == 1, loss,
                          cfg.loss_ema * self.loss_ema_value + (1 - cfg.loss_ema) * loss)
        self.loss_ema_value.copy_(torch.where(learning, ema, self.loss_ema_value))
        self.last_loss.copy_(torch.where(learning, loss, self.last_loss))

        # 7. Target soft update from the updated online weights (tau is 0 with learning off).
        self.target.lerp_(self.params, tau)


class Trainer:
    """What bench scripts time: ``step()`` enqueues one step (UPDATES learner updates
    included) and returns without waiting; ``diagnostics()`` reads the device copy."""

    step_module = DQNTrainer  # the nn.Module whose forward is one step

    def __init__(self, cfg: Config, device, mode: str = "eager") -> None:
        self.cfg = cfg
        self.device = torch.device(device)
        self.mode = mode
        self.module = self.step_module(cfg, self.device)
        if mode == "eager":
            self._step = self.module
        elif mode == "cudagraph":
            self._step = self._capture(self.module)
        elif mode in ("compile", "compile-graph"):
            for buffer in self.module.buffers():
                torch._dynamo.mark_static_address(buffer)
            if mode == "compile":
                self._step = torch.compile(self.module, mode="reduce-overhead", fullgraph=True)
            else:
                self._step = self._capture(torch.compile(
                    self.module, mode="max-autotune-no-cudagraphs", fullgraph=True))
        else:
            raise ValueError(f"unknown mode {mode!r}")

    def _capture(self, step):
        if self.device.type != "cuda":
            raise ValueError(f"mode {self.mode} needs a CUDA device")
        # Warm-up on a side stream compiles (compile-graph) and initialises cuBLAS and the
        # allocator, as capture requires; the state is restored afterwards so that replay 1
        # is step 1, as in eager mode.
        saved = [b.clone() for b in self.module.buffers()]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(side)
        for b, s in zip(self.module.buffers(), saved):
            b.copy_(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        return graph.replay

    def step(self) -> None:
        self._step()

    def advance(self, steps: int) -> None:
        for _ in range(steps):
            self._step()

    def diagnostics(self) -> dict:
        m = self.module
        return diagnostics(self.cfg, step=m.step_count.item(), ret_ring=m.ret_ring[:100].tolist(),
                           episodes=m.episodes.item(), loss=m.last_loss.item(),
                           loss_ema=m.loss_ema_value.item(), lr=m.lr.item(),
                           replay_size=m.size.item())

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def make_trainer(config: Config, device, mode: str = "eager") -> Trainer:
    return Trainer(config, device, mode)


# Operators that only make a view, or allocate without writing: they launch no kernel.
_VIEW_OPS = frozenset("aten::" + name for name in (
    "slice", "view", "unsqueeze", "select", "t", "expand", "as_strided", "reshape", "squeeze",
    "unbind", "alias", "detach", "_unsafe_view", "permute", "transpose", "empty", "empty_like",
    "empty_strided", "lift_fresh", "resolve_conj", "resolve_neg", "_reshape_alias"))


def count_ops(cfg: Config, device, steps: int = 5) -> dict:
    """Operators per step of the eager step with the learner on, from torch.profiler: the
    top-level ATen calls that are not views (each launches one or a few kernels), and on a
    CUDA device the kernels and memory operations themselves."""
    from torch.profiler import ProfilerActivity, profile

    warm_cfg = dataclasses.replace(cfg, learning_starts=min(cfg.learning_starts, cfg.envs))
    trainer = make_trainer(warm_cfg, device)
    while trainer.module.size.item() < warm_cfg.learning_starts + cfg.envs:
        trainer.step()
    activities = [ProfilerActivity.CPU]
    if trainer.device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    trainer.synchronize()
    with profile(activities=activities) as prof:
        trainer.advance(steps)
        trainer.synchronize()
    return _tally(prof.events(), steps, trainer.device.type == "cuda")


def _tally(events, steps: int, cuda: bool) -> dict:
    calls = collections.Counter()  # top-level non-view ATen calls: what Python dispatches
    leaves = 0  # non-view ATen calls without such a call inside: about one kernel each
    device_work = 0
    for event in events:
        if event.device_type == torch.autograd.DeviceType.CUDA:
            device_work += 1
        if not event.name.startswith("aten::") or event.name in _VIEW_OPS:
            continue
        parent = event.cpu_parent
        if parent is None or not parent.name.startswith("aten::"):
            calls[event.name] += 1
        if not any(c.name.startswith("aten::") and c.name not in _VIEW_OPS
                   for c in event.cpu_children):
            leaves += 1
    out = {"aten_calls_per_step": sum(calls.values()) / steps,
           "aten_leaf_ops_per_step": leaves / steps,
           "calls": {k: v / steps for k, v in calls.most_common()}}
    if cuda:
        out["cuda_kernels_and_copies_per_step"] = device_work / steps
    return out


def main(argv=None) -> int:
    p = parser(__doc__.split("\n\n")[0], ("cuda", "cpu") if torch.cuda.is_available() else ("cpu",),
               MODES)
    p.add_argument("--count-ops", action="store_true",
                   help="print the operators (and CUDA kernels) of one eager step and exit")
    args = p.parse_args(argv)
    cfg = config_of(args)
    if args.count_ops:
        print(count_ops(cfg, args.device))
        return 0
    t0 = time.perf_counter()
    trainer = make_trainer(cfg, args.device, args.mode)
    trainer.synchronize()
    setup_s = time.perf_counter() - t0
    summary = train(trainer, args, cfg)
    summary["setup_s"] = round(setup_s, 3)
    print_summary(summary, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
