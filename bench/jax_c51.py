"""JAX baseline of pipelines/c51_step.pipe: distributional (C51) double DQN with prioritized
n-step replay on vectorised CartPole-v1, as docs/c51.md specifies it.

Everything but the network is bench/jax_dqn.py's step (one pytree of state, ``lax.scan``
over K steps in one jitted dispatch with donated buffers); this module swaps in the
categorical network 4 -> H -> H -> 2 x ATOMS, its greedy action by expected Q and the
projected cross-entropy loss (the projection as a dense gather, the hat-function form, which
XLA fuses). Matmuls use JAX's default precision, TF32 on the H200 like the pipeline's
COMPUTE = "tf32"; ``--precision highest`` gives full float32. ``--bf16 true`` is the
pipeline's BF16 mode: layers 2 and 3 multiply bf16 casts of the f32 parameters and
activations with f32 results (``preferred_element_type``), layer 2's output rounded to bf16.

    python bench/jax_c51.py --steps 10000 --steps-per-dispatch 500
"""

from __future__ import annotations

import math
import sys

import jax_dqn  # sets XLA_PYTHON_CLIENT_PREALLOCATE and jax_enable_x64 before jax is used
import jax
import jax.numpy as jnp
from c51_spec import ACTIONS, C51Config, init_bounds, param_count, param_slices, support
from dqn_spec import config_of, print_summary
from jax import lax

F32 = jnp.float32


def logits(flat, x, cfg: C51Config):
    """[n, ACTIONS, atoms] logits of the flat vector (c51_spec's layout, padding dropped)."""
    w1, b1, w2, b2, w3, b3 = (lax.dynamic_slice_in_dim(flat, o, math.prod(s)).reshape(s)
                              for o, s in param_slices(cfg))
    x = jax.nn.relu(x @ w1.T + b1)
    if cfg.bf16:
        x = jax.nn.relu(_bf16_dot(x, w2) + b2).astype(jnp.bfloat16)
        out = _bf16_dot(x, w3) + b3
    else:
        x = jax.nn.relu(x @ w2.T + b2)
        out = x @ w3.T + b3
    return out[:, :ACTIONS * cfg.atoms].reshape(-1, ACTIONS, cfg.atoms)


def _bf16_dot(x, w):
    """x @ w.T with bf16 operands and an f32 result (f32 accumulation)."""
    return jnp.dot(x.astype(jnp.bfloat16), w.astype(jnp.bfloat16).T, preferred_element_type=F32)


def expected_q(flat, x, cfg: C51Config):
    return jax.nn.softmax(logits(flat, x, cfg), -1) @ jnp.array(support(cfg), F32)


def project(p, ret, disc, cfg: C51Config):
    """p [B, atoms] moved to R + disc * z and projected onto the support z:
    m_k = sum_j p_j max(0, 1 - |b_j - k|), b_j the clamped position in units of dz."""
    dz = (cfg.v_max - cfg.v_min) / (cfg.atoms - 1)
    tz = jnp.clip(ret[:, None] + disc[:, None] * jnp.array(support(cfg), F32), cfg.v_min, cfg.v_max)
    b = (tz - cfg.v_min) / dz
    hat = jnp.maximum(0.0, 1.0 - jnp.abs(b[:, :, None] - jnp.arange(cfg.atoms, dtype=F32)))
    return jnp.einsum("bj,bjk->bk", p, hat)


def init_params(cfg: C51Config, key):
    """nn.Linear's default init per layer, the padding rows of the output layer 0."""
    bound = jnp.concatenate([
        jnp.where(jnp.arange(shape[0]) < rows, b, 0.0).astype(F32).repeat(math.prod(shape[1:]))
        for _, shape, b, rows in init_bounds(cfg)])
    return jax.random.uniform(key, (param_count(cfg),), F32, -1.0, 1.0) * bound


def greedy_action(cfg: C51Config, params, obs):
    return jax_dqn.greedy(expected_q(params, obs, cfg))


def loss_and_grad(cfg: C51Config, params, target, obs, act, ret, nxt, disc, weight):
    """Double DQN on distributions: the online network picks a* on next obs by expected Q,
    the target network's distribution of a* is projected; the loss is the IS-weighted
    cross-entropy, each sample's priority error its cross-entropy."""
    rows = jnp.arange(obs.shape[0])
    best = jax_dqn.greedy(expected_q(params, nxt, cfg))
    m = project(jax.nn.softmax(logits(target, nxt, cfg)[rows, best], -1), ret, disc, cfg)

    def loss_fn(flat):
        log_q = jax.nn.log_softmax(logits(flat, obs, cfg)[rows, act], -1)
        ce = -(m * log_q).sum(-1)
        return (weight * ce).mean(), ce

    (loss, ce), grad = jax.value_and_grad(loss_fn, has_aux=True)(params)
    return grad, loss, ce


C51 = jax_dqn.Network(init_params, greedy_action, loss_and_grad)


class Trainer(jax_dqn.Trainer):
    net = C51


def main(argv=None) -> int:
    p = jax_dqn.jax_parser(__doc__.split("\n\n")[0], C51Config)
    p.add_argument("--precision", choices=("default", "highest"), default="default",
                   help="jax_default_matmul_precision: default (TF32 on the GPU) or highest")
    args = p.parse_args(argv)
    jax.config.update("jax_default_matmul_precision", args.precision)
    cfg = config_of(args, C51Config)
    summary = jax_dqn.run(args, cfg, Trainer)
    summary.update(precision=args.precision, bf16=cfg.bf16)
    print_summary(summary, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
