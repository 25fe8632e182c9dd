"""PyTorch twin of pipelines/c51_step.pipe: distributional (C51) double DQN with prioritized
n-step replay on vectorised CartPole-v1, as docs/c51.md specifies it.

Everything but the network is bench/torch_dqn.py's step (environment, n-step replay,
sampling, AdamW, controllers, diagnostics, the four execution modes); this module swaps in
the categorical network 4 -> H -> H -> 2 x ATOMS, its greedy action by expected Q and the
projected cross-entropy loss, written as an expert writes them for speed: ``F.linear`` on
views of the flat parameter vector (cuBLAS, TF32 when ``--tf32``, like the pipeline's
default COMPUTE = "tf32"; with ``--bf16 true`` layers 2 and 3 under ``torch.autocast`` to
bf16, the f32 parameters the master copy, as the pipeline's BF16 mode), the projection as a dense gather (the hat-function form: one
batched multiply-add, no scatter, deterministic and fusable by Inductor), and
``torch.func.grad_and_value`` for the gradient.

    python bench/torch_c51.py --device cuda --mode cudagraph --steps 10000
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import torch
import torch.nn.functional as F
import torch_dqn
from c51_spec import ACTIONS, C51Config, init_bounds, param_count, param_slices, support
from dqn_spec import config_of, parser, print_summary, train


def layers(flat: torch.Tensor, cfg: C51Config) -> tuple:
    """W1, b1, W2, b2, W3, b3 as views into the flat vector (c51_spec's layout)."""
    return tuple(flat[o:o + math.prod(s)].view(s) for o, s in param_slices(cfg))


def logits(weights: tuple, x: torch.Tensor, atoms: int, bf16: bool = False) -> torch.Tensor:
    """[n, ACTIONS, atoms] logits in the parameters' type; the padding rows of W3 are dropped.
    `bf16`: layers 2 and 3 under autocast (bf16 operands, f32 accumulation; layer 1 stays
    f32 as the pipeline's does). Autocast's weight cache is off: it is unsafe under CUDA-graph
    capture, and the pipeline also rounds the weights once per update."""
    w1, b1, w2, b2, w3, b3 = weights
    x = torch.relu(F.linear(x, w1, b1))
    with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=bf16, cache_enabled=False):
        x = torch.relu(F.linear(x, w2, b2))
        out = F.linear(x, w3, b3)
    return out.to(w3.dtype)[:, :ACTIONS * atoms].view(-1, ACTIONS, atoms)


def project(p: torch.Tensor, ret: torch.Tensor, disc: torch.Tensor, z: torch.Tensor,
            cfg: C51Config) -> torch.Tensor:
    """p [B, atoms] moved to R + disc * z and projected onto the support z:
    m_k = sum_j p_j max(0, 1 - |b_j - k|), b_j the clamped position in units of dz."""
    dz = (cfg.v_max - cfg.v_min) / (cfg.atoms - 1)
    tz = torch.addcmul(ret[:, None], disc[:, None], z).clamp(cfg.v_min, cfg.v_max)
    b = (tz - cfg.v_min) / dz
    k = torch.arange(cfg.atoms, dtype=p.dtype, device=p.device)
    hat = (1 - (b[:, :, None] - k).abs()).clamp(min=0)  # [B, j, k]
    return torch.bmm(p[:, None, :], hat).squeeze(1)


class C51Step(torch_dqn.DQNTrainer):
    """torch_dqn's step with the categorical network (see the module docstring)."""

    def __init__(self, cfg: C51Config, device) -> None:
        super().__init__(cfg, device)
        self.register_buffer("z", torch.tensor(support(cfg), dtype=torch.float32, device=device))

    def init_params(self, dev) -> torch.Tensor:
        """nn.Linear's default init per layer from the init stream, padding rows 0."""
        cfg = self.cfg
        p = param_count(cfg)
        bound = torch.zeros(p, dtype=torch.float64)
        for offset, shape, b, rows in init_bounds(cfg):
            bound[offset:offset + rows * math.prod(shape[1:])] = b
        u = torch_dqn.uniform01(torch_dqn.hash32(torch_dqn._lane_keys(
            cfg.seed, torch_dqn.STREAM_INIT, p, dev)), torch.float64)
        return ((2 * u - 1) * bound.to(dev)).to(torch.float32)

    def _expected_q(self, weights, x):
        return torch.softmax(logits(weights, x, self.cfg.atoms, self.cfg.bf16), -1) @ self.z

    def greedy_action(self, obs: torch.Tensor) -> torch.Tensor:
        return torch_dqn.greedy(self._expected_q(layers(self.params, self.cfg), obs))

    def _loss(self, weights, obs, act, m, w):
        log_q = torch.log_softmax(logits(weights, obs, self.cfg.atoms, self.cfg.bf16)
                                  .gather(1, act[:, None, None].expand(-1, 1, self.cfg.atoms))
                                  .squeeze(1), -1)
        ce = -(m * log_q).sum(-1)
        return (w * ce).mean(), ce

    def loss_and_grad(self, obs, act, ret, nxt, disc, weight) -> tuple:
        """Double DQN on distributions: the online network picks a* on next obs by expected
        Q, the target network's distribution of a* is projected; the loss is the
        IS-weighted cross-entropy; the priority error is each sample's cross-entropy."""
        cfg = self.cfg
        online = layers(self.params, cfg)
        best = torch_dqn.greedy(self._expected_q(online, nxt))
        target_logits = logits(layers(self.target, cfg), nxt, cfg.atoms, cfg.bf16)
        p = torch.softmax(target_logits.gather(1, best[:, None, None].expand(-1, 1, cfg.atoms))
                          .squeeze(1), -1)
        m = project(p, ret, disc, self.z, cfg)
        grads, (loss, ce) = torch.func.grad_and_value(self._loss, has_aux=True)(
            online, obs, act, m, weight)
        return torch.cat([g.reshape(-1) for g in grads]), loss, ce


class Trainer(torch_dqn.Trainer):
    step_module = C51Step


def make_trainer(config: C51Config, device, mode: str = "eager") -> Trainer:
    return Trainer(config, device, mode)


def main(argv=None) -> int:
    p = parser(__doc__.split("\n\n")[0], ("cuda", "cpu") if torch.cuda.is_available() else ("cpu",),
               torch_dqn.MODES, C51Config)
    p.add_argument("--tf32", action=argparse.BooleanOptionalAction, default=True,
                   help="TF32 tensor-core matmuls (the pipeline's COMPUTE = \"tf32\")")
    args = p.parse_args(argv)
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    cfg = config_of(args, C51Config)
    t0 = time.perf_counter()
    trainer = make_trainer(cfg, args.device, args.mode)
    trainer.synchronize()
    setup_s = time.perf_counter() - t0
    summary = train(trainer, args, cfg)
    summary.update(setup_s=round(setup_s, 3), tf32=args.tf32, bf16=cfg.bf16)
    print_summary(summary, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
