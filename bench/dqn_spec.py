"""What the PyTorch and JAX baselines (torch_dqn.py, jax_dqn.py) share, framework-free: the
sizes and hyper-parameters of docs/dqn.md, CartPole-v1's constants, the diagnostics layout
and the command line that trains, logs and summarises a run."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from dataclasses import dataclass


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

    @classmethod
    def from_constants(cls, consts: dict) -> Config:
        """The config of a pipeline's constants (upper-case names; others are ignored)."""
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k.lower(): v for k, v in consts.items() if k.lower() in fields})


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

# Columns of one replay row. The whole transition is one float32 row so that a flush is one
# scatter and a learner batch one gather; the action (0 or 1) is exact in float32.
OBS, ACT, RET, NEXT, DISC, ROW = 0, 4, 5, 6, 10, 11

def param_count(hidden: int) -> int:
    """Length of the flat parameter vector of the Q network 4 -> H -> H -> 2 (docs/dqn.md)."""
    return 8 * hidden + hidden * hidden + 2


def param_slices(hidden: int) -> tuple:
    """(offset, shape) of W1, b1, W2, b2, W3, b3 in the flat vector, nn.Linear's [out][in]."""
    h = hidden
    shapes = ((h, 4), (h,), (h, h), (h,), (2, h), (2,))
    out, offset = [], 0
    for shape in shapes:
        out.append((offset, shape))
        offset += math.prod(shape)
    return tuple(out)


def nstep_return_matrix(cfg: Config) -> list[list[float]]:
    """R for chronological window position p is sum_{q >= p} GAMMA^(q-p) r_q: rewards [n] @
    this matrix gives the n-step returns of all positions at once."""
    n = cfg.nstep
    return [[cfg.gamma ** (q - p) if q >= p else 0.0 for p in range(n)] for q in range(n)]


def epsilon_at(cfg: Config, step: int) -> float:
    """The linear epsilon schedule of docs/dqn.md 1."""
    return max(cfg.eps_end, cfg.eps_start - (cfg.eps_start - cfg.eps_end) * step / cfg.eps_decay_steps)


def diagnostics(cfg: Config, *, step, ret_ring, episodes, loss, loss_ema, lr, replay_size) -> dict:
    """docs/dqn.md 8's diagnostics from state read back from the device (``ret_ring``: the
    ring of the last 100 finished episodes' returns). Computed when read, not every step."""
    step, episodes = int(step), int(episodes)
    return {"step": step, "mean_return_100": float(sum(ret_ring)) / min(max(episodes, 1), 100),
            "episodes": episodes, "loss": float(loss), "loss_ema": float(loss_ema),
            "lr": float(lr), "epsilon": epsilon_at(cfg, step), "replay_size": int(replay_size)}


def _boolean(text: str) -> bool:
    """A boolean flag's value as the pipelines write it (`true`/`false`) or 1/0."""
    if text.lower() not in ("true", "false", "1", "0"):
        raise argparse.ArgumentTypeError(f"expected true or false, found {text!r}")
    return text.lower() in ("true", "1")


# Field types as strings: this module uses postponed evaluation of annotations.
_FIELD_TYPES = {"int": int, "float": float, "bool": _boolean}


def parser(description: str, devices: tuple, modes: tuple, config: type = Config) -> argparse.ArgumentParser:
    """The command line of a baseline: device, mode, steps, logging and one flag per field of
    ``config`` (Config or a subclass with more fields)."""
    p = argparse.ArgumentParser(description=description,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--device", choices=devices, default=devices[0])
    p.add_argument("--mode", choices=modes, default=modes[0])
    p.add_argument("--steps", type=int, default=10000)
    p.add_argument("--log-every", type=int, default=100,
                   help="read diagnostics every K steps; the 195 threshold is checked there")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    for f in dataclasses.fields(config):
        flags = ["--" + f.name.replace("_", "-")]
        if "_" in f.name:
            flags.append("--" + f.name)
        p.add_argument(*flags, dest=f.name, type=_FIELD_TYPES[f.type], default=f.default,
                       help=f.name.upper())
    return p


def config_of(args, config: type = Config) -> Config:
    return config(**{f.name: getattr(args, f.name) for f in dataclasses.fields(config)})


def train(trainer, args, cfg: Config) -> dict:
    """Run ``args.steps`` steps in chunks of ``args.log_every`` (``trainer.advance(k)``),
    print the diagnostics after each chunk and return the summary."""
    solved_step = None
    start = last_time = time.perf_counter()
    done = 0
    while done < args.steps:
        k = min(args.log_every, args.steps - done)
        trainer.advance(k)
        done += k
        d = trainer.diagnostics()
        now = time.perf_counter()
        d["steps_per_s"] = k / (now - last_time)
        last_time = now
        if solved_step is None and d["mean_return_100"] >= SOLVED_RETURN:
            solved_step = d["step"]
        if args.json:
            print(json.dumps(d), flush=True)
        else:
            print(f"step {d['step']:6d}  return100 {d['mean_return_100']:7.2f}  "
                  f"episodes {d['episodes']:7d}  loss {d['loss']:.4f}  lr {d['lr']:.2e}  "
                  f"eps {d['epsilon']:.3f}  {d['steps_per_s']:8.1f} steps/s", flush=True)
    wall = time.perf_counter() - start
    final = trainer.diagnostics()
    return {"summary": True, "device": args.device, "mode": args.mode, "steps": args.steps,
            "wall_s": round(wall, 3), "steps_per_s": args.steps / wall,
            "solved_step": solved_step, "final_mean_return_100": final["mean_return_100"],
            "config": dataclasses.asdict(cfg)}


def print_summary(summary: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary), flush=True)
        return
    print(f"done: {summary['steps']} steps in {summary['wall_s']:.1f} s "
          f"({summary['steps_per_s']:.1f} steps/s, setup {summary['setup_s']:.1f} s), mean "
          f"return over 100 reached {SOLVED_RETURN:g} at step {summary['solved_step']}, final "
          f"{summary['final_mean_return_100']:.1f}", flush=True)
