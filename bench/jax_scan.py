"""What the JAX twins share: K steps per `jax.jit` dispatch of a `lax.scan`, the state donated so
that XLA updates it in place. Framework code only; each twin gives its state and its step."""

from __future__ import annotations

import jax
from jax import lax


class ScanTrainer:
    """``advance(k)`` enqueues k steps as k / K dispatches of a jitted ``lax.scan`` over K
    steps (K = ``steps_per_dispatch``; a shorter tail compiles its own scan) and returns
    without waiting. A twin sets ``self.state`` and defines ``one_step(state) -> state``."""

    state: object

    def __init__(self, steps_per_dispatch: int) -> None:
        self.steps_per_dispatch = steps_per_dispatch
        self._scans: dict = {}

    def one_step(self, state):
        raise NotImplementedError(f"{type(self).__name__} defines no step")

    def _scan(self, length: int):
        if length not in self._scans:
            def run(state):
                state, _ = lax.scan(lambda s, _: (self.one_step(s), None), state, None, length=length)
                return state
            self._scans[length] = jax.jit(run, donate_argnums=0)
        return self._scans[length]

    def advance(self, steps: int) -> None:
        k = self.steps_per_dispatch
        for _ in range(steps // k):
            self.state = self._scan(k)(self.state)
        if steps % k:
            self.state = self._scan(steps % k)(self.state)

    def synchronize(self) -> None:
        jax.block_until_ready(self.state)
