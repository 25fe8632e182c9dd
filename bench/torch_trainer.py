"""PyTorch twin of pipelines/examples/wide_trainer.pipe (bench/trainer_spec.py), written as a
PyTorch expert writes a small-kernel training step: parameters as leaf tensors, autograd,
`clip_grad_norm_(foreach=True)`, the fused AdamW with `capturable=True` and a device-side
learning rate, so that the whole step can be one CUDA graph.

Modes (the fastest of them is the baseline that counts):
* ``eager``: launched op by op;
* ``cudagraph``: the whole step (forward, backward, clipping, AdamW, the schedule) captured
  once in ``torch.cuda.CUDAGraph`` and replayed;
* ``compile``: the network under ``torch.compile(mode="reduce-overhead")`` (Inductor kernels,
  CUDA graph trees for forward and backward), clipping and AdamW as in eager;
* ``compile-graph``: the network under ``torch.compile(mode="max-autotune-no-cudagraphs")``, and
  the whole step captured by hand in one ``CUDAGraph``.

``make_trainer(TrainerConfig(...), device, mode)`` and time ``.step()``."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from trainer_spec import TrainerConfig

MODES = ("eager", "cudagraph", "compile", "compile-graph")


class Network(torch.nn.Module):
    def __init__(self, cfg: TrainerConfig, device) -> None:
        super().__init__()
        g = torch.Generator(device="cpu").manual_seed(1)
        uniform = lambda shape, bound: torch.nn.Parameter(((torch.rand(*shape, generator=g) * 2 - 1) * bound).to(device))
        self.w = torch.nn.ParameterList(uniform((cfg.width, cfg.width), 0.02) for _ in range(cfg.layers))
        self.b = torch.nn.ParameterList(torch.nn.Parameter(torch.zeros(cfg.width, device=device))
                                        for _ in range(cfg.layers))
        self.w_head = uniform((cfg.out, cfg.width), 0.06)
        self.b_head = torch.nn.Parameter(torch.zeros(cfg.out, device=device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = x
        for w, b in zip(self.w, self.b):
            a = a + F.relu(F.linear(a, w, b))
        return F.linear(a, self.w_head, self.b_head)


class Trainer:
    def __init__(self, cfg: TrainerConfig, device, mode: str = "eager") -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}")
        torch.backends.cuda.matmul.allow_tf32 = cfg.compute == "tf32"
        self.cfg, self.mode, self.device = cfg, mode, torch.device(device)
        self.net = Network(cfg, self.device)
        self.forward = self.net
        if mode == "compile":
            self.forward = torch.compile(self.net, mode="reduce-overhead")
        elif mode == "compile-graph":
            self.forward = torch.compile(self.net, mode="max-autotune-no-cudagraphs")
        self.w_star = torch.cos(torch.arange(cfg.out, device=self.device)[:, None] * 7.0
                                + torch.arange(cfg.width, device=self.device)[None, :])
        self.t = torch.zeros((), device=self.device)
        self.lr = torch.full((), cfg.lr, device=self.device)
        self.diag = torch.zeros(4, device=self.device)
        on_gpu = self.device.type == "cuda"  # capturable and fused AdamW are CUDA-only
        matrices = [*self.net.w, self.net.w_head]
        vectors = [*self.net.b, self.net.b_head]
        self.params = matrices + vectors
        self.opt = torch.optim.AdamW([{"params": matrices, "weight_decay": cfg.weight_decay},
                                      {"params": vectors, "weight_decay": 0.0}],
                                     lr=self.lr, betas=(cfg.adam_b1, cfg.adam_b2), eps=cfg.adam_eps,
                                     capturable=on_gpu, fused=on_gpu)
        for group in self.opt.param_groups:  # every group reads the one device-side rate
            group["lr"] = self.lr
        self._step = self._capture() if mode in ("cudagraph", "compile-graph") else self._train_step

    def _train_step(self) -> None:
        cfg = self.cfg
        if self.mode == "compile":  # a new step for cudagraph trees: the last step's outputs may go
            torch.compiler.cudagraph_mark_step_begin()
        x = torch.rand(cfg.batch, cfg.width, device=self.device) * 2 - 1
        target = torch.sin(x @ self.w_star.T / math.sqrt(cfg.width))
        loss = F.mse_loss(self.forward(x), target)
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm, foreach=True)
        self.t += 1
        phase = torch.clamp(self.t, max=cfg.decay_steps) / cfg.decay_steps
        self.lr.copy_(cfg.lr * 0.5 * (1 + torch.cos(math.pi * phase)))
        self.opt.step()
        self.diag.copy_(torch.stack([self.t, loss.detach(), norm, self.lr]))

    def _capture(self):
        if self.device.type != "cuda":
            raise ValueError(f"mode {self.mode} needs a CUDA device")
        # Warm-up on a side stream (compiles, initialises cuBLAS, the allocator and the
        # optimizer's state), as capture requires.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._train_step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._train_step()
        return graph.replay

    def step(self) -> None:
        self._step()

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def make_trainer(config: TrainerConfig, device, mode: str = "eager") -> Trainer:
    return Trainer(config, device, mode)
