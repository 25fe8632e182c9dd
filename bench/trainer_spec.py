"""What the PyTorch and JAX twins of pipelines/examples/wide_trainer.pipe share, framework-free:
its sizes and hyper-parameters, read from the pipeline's constants so the three stay one step.

The step (docs/benchmarks.md, "A step shaped like a trainer"): a batch of BATCH x WIDTH inputs
uniform in [-1, 1) with targets sin(x @ w*.T / sqrt(WIDTH)), w*[o, c] = cos(7 o + c); LAYERS residual blocks
a' = a + relu(a @ W.T + b); a linear head to OUT; the mean squared error; its gradient;
global-norm clipping to MAX_GRAD_NORM; AdamW (weight decay on the matrices only) at a cosine
learning rate over DECAY_STEPS steps. The inputs come from each framework's own generator (the
pipeline's is Philox keyed by the step): the same work, not the same bits."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class TrainerConfig:
    layers: int = 24
    batch: int = 256
    width: int = 256
    out: int = 16
    lr: float = 1e-3
    decay_steps: int = 100000
    adam_b1: float = 0.9
    adam_b2: float = 0.999
    adam_eps: float = 1e-8
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    compute: str = "tf32"

    @classmethod
    def from_constants(cls, consts: dict) -> TrainerConfig:
        """The config of a checked pipeline's constants (bench/rl_step.py's pipe_constants)."""
        return cls(**{f.name: consts[f.name.upper()] for f in fields(cls)})
