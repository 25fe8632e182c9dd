"""JAX twin of pipelines/examples/wide_trainer.pipe (bench/trainer_spec.py), written as JAX
trainers are: the parameters, AdamW's moments and the step count one pytree, one step a pure
function (`jax.value_and_grad`, the global norm, AdamW written out), and `lax.scan` running K
steps inside one `jax.jit` dispatch with the state donated, so XLA updates it in place.

``Trainer(TrainerConfig(...), K).advance(n)``."""

from __future__ import annotations

import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # pipec and PyTorch share the GPU

import jax
import jax.numpy as jnp
from jax_scan import ScanTrainer
from trainer_spec import TrainerConfig


def init_state(cfg: TrainerConfig) -> dict:
    keys = jax.random.split(jax.random.PRNGKey(1), cfg.layers + 1)
    params = {"w": jnp.stack([jax.random.uniform(k, (cfg.width, cfg.width), jnp.float32, -0.02, 0.02)
                              for k in keys[:-1]]),
              "b": jnp.zeros((cfg.layers, cfg.width), jnp.float32),
              "w_head": jax.random.uniform(keys[-1], (cfg.out, cfg.width), jnp.float32, -0.06, 0.06),
              "b_head": jnp.zeros((cfg.out,), jnp.float32)}
    def zeros() -> dict:  # a buffer of its own for each moment: the scan donates them all
        return jax.tree_util.tree_map(jnp.zeros_like, params)

    return {"params": params, "m": zeros(), "v": zeros(), "t": jnp.zeros((), jnp.int32),
            "diag": jnp.zeros((4,), jnp.float32)}


def loss_fn(params: dict, x: jnp.ndarray, target: jnp.ndarray) -> jnp.ndarray:
    a = x
    for i in range(params["w"].shape[0]):  # unrolled, as the fastest form of a few dozen layers
        a = a + jax.nn.relu(a @ params["w"][i].T + params["b"][i])
    y = a @ params["w_head"].T + params["b_head"]
    return jnp.mean((y - target) ** 2)


def train_step(cfg: TrainerConfig, w_star: jnp.ndarray, state: dict) -> dict:
    t = state["t"] + 1
    x = jax.random.uniform(jax.random.fold_in(jax.random.PRNGKey(7), t), (cfg.batch, cfg.width),
                           jnp.float32, -1.0, 1.0)
    loss, grads = jax.value_and_grad(loss_fn)(state["params"], x, jnp.sin(x @ w_star.T / cfg.width ** 0.5))
    norm = jnp.sqrt(sum(jnp.sum(g * g) for g in jax.tree_util.tree_leaves(grads)))
    scale = jnp.minimum(1.0, cfg.max_grad_norm / (norm + 1e-6))
    lr = cfg.lr * 0.5 * (1 + jnp.cos(jnp.pi * jnp.minimum(t, cfg.decay_steps) / cfg.decay_steps))
    b1, b2 = cfg.adam_b1, cfg.adam_b2
    bc1, bc2 = 1 - b1 ** t.astype(jnp.float32), 1 - b2 ** t.astype(jnp.float32)

    def adamw(name, p, g, m, v):
        g = g * scale
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        wd = cfg.weight_decay if name in ("w", "w_head") else 0.0
        return p - lr * (wd * p + (m / bc1) / (jnp.sqrt(v / bc2) + cfg.adam_eps)), m, v

    updated = {k: adamw(k, state["params"][k], grads[k], state["m"][k], state["v"][k]) for k in grads}
    return {"params": {k: u[0] for k, u in updated.items()}, "m": {k: u[1] for k, u in updated.items()},
            "v": {k: u[2] for k, u in updated.items()}, "t": t,
            "diag": jnp.stack([t.astype(jnp.float32), loss, norm, lr])}


class Trainer(ScanTrainer):
    def __init__(self, cfg: TrainerConfig, steps_per_dispatch: int = 100) -> None:
        super().__init__(steps_per_dispatch)
        jax.config.update("jax_default_matmul_precision", "tensorfloat32" if cfg.compute == "tf32" else "highest")
        self.cfg = cfg
        self.w_star = jnp.cos(jnp.arange(cfg.out)[:, None] * 7.0 + jnp.arange(cfg.width)[None, :])
        self.state = init_state(cfg)

    def one_step(self, state: dict) -> dict:
        return train_step(self.cfg, self.w_star, state)
