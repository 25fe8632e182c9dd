"""What the baselines' tests (test_torch_dqn, test_jax_dqn, test_torch_c51, test_jax_c51) do
to a trainer to see it learn: advance it and watch the mean return."""

from __future__ import annotations


def best_mean_return(trainer, every: int, reads: int, goal: float = 195.0) -> float:
    """The best mean return of the last 100 episodes read every `every` steps, at most `reads`
    times, stopping once it reaches `goal`."""
    best = 0.0
    for _ in range(reads):
        trainer.advance(every)
        best = max(best, trainer.diagnostics()["mean_return_100"])
        if best >= goal:
            break
    return best
