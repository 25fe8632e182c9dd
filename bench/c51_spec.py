"""What the C51 baselines (torch_c51.py, jax_c51.py) share, framework-free: docs/c51.md's
extra sizes (atoms, support) and the flat parameter layout of pipelines/c51_step.pipe, whose
output layer is padded to a multiple of 4 rows so that every GEMM operand is 16-byte aligned
(the padding rows are zero and stay zero)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dqn_spec import Config

ACTIONS = 2


@dataclass(frozen=True)
class C51Config(Config):
    """docs/dqn.md's sizes and hyper-parameters with c51_step.pipe's defaults, plus the
    categorical support and the bf16 mode (docs/c51.md: layers 2 and 3 multiply bf16
    operands, f32 master parameters, gradients and logits)."""

    hidden: int = 512
    seed: int = 1
    atoms: int = 51
    v_min: float = 0.0
    v_max: float = 100.0
    bf16: bool = False

    def validate(self) -> None:
        super().validate()
        if not 2 <= self.atoms <= 64:
            raise ValueError(f"atoms must be in 2..64, got {self.atoms}")
        if not self.v_min < self.v_max:
            raise ValueError("v_min must be below v_max")


def outputs(cfg: C51Config) -> int:
    """Logits per row: ACTIONS * atoms rounded up to a multiple of 4 (the padded W3 rows)."""
    return -(-ACTIONS * cfg.atoms // 4) * 4


def param_slices(cfg: C51Config) -> tuple:
    """(offset, shape) of W1, b1, W2, b2, W3, b3 in the flat vector (nn.Linear's [out][in])."""
    h, o = cfg.hidden, outputs(cfg)
    out, offset = [], 0
    for shape in ((h, 4), (h,), (h, h), (h,), (o, h), (o,)):
        out.append((offset, shape))
        offset += math.prod(shape)
    return tuple(out)


def param_count(cfg: C51Config) -> int:
    offset, shape = param_slices(cfg)[-1]
    return offset + math.prod(shape)


def init_bounds(cfg: C51Config) -> tuple:
    """(offset, shape, bound, rows) per layer tensor: nn.Linear's init bound 1/sqrt(fan_in)
    for its first `rows` rows, 0 for the padding rows after them (W3 and b3 only)."""
    h, used = cfg.hidden, ACTIONS * cfg.atoms
    return tuple((offset, shape, 1 / math.sqrt(fan), used if shape[0] == outputs(cfg) else shape[0])
                 for (offset, shape), fan in zip(param_slices(cfg), (4, 4, h, h, h, h)))


def support(cfg: C51Config) -> list[float]:
    dz = (cfg.v_max - cfg.v_min) / (cfg.atoms - 1)
    return [cfg.v_min + i * dz for i in range(cfg.atoms)]
