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


class NStepReference:
    """docs/dqn.md's n-step flush read per environment and per transition: fed each step's
    observed states, episode steps, actions, next states and terminations (NumPy arrays), it
    lists the transitions the replay must hold, in slot order (obs, action, n-step return, next
    obs, bootstrap discount), and the returns of the episodes that ended."""

    def __init__(self, envs: int, nstep: int, gamma: float, max_episode_steps: int = 500) -> None:
        self.nstep, self.gamma, self.max_episode_steps = nstep, gamma, max_episode_steps
        self.episodes: list[list] = [[] for _ in range(envs)]  # per env: (obs, action) so far
        self.expected: list[tuple] = []
        self.returns: list[int] = []

    def observe(self, state, t, action, nxt, terminated) -> None:
        n, g = self.nstep, self.gamma
        for env, episode in enumerate(self.episodes):
            episode.append((state[env], int(action[env])))
            ep_t = int(t[env])
            done = bool(terminated[env]) or ep_t + 1 >= self.max_episode_steps
            if done:
                js = range(max(0, ep_t + 1 - n), ep_t + 1)
                self.returns.append(ep_t + 1)
            else:
                js = [ep_t + 1 - n] if ep_t + 1 >= n else []
            for j in js:
                disc = 0.0 if bool(terminated[env]) else g ** (ep_t - j + 1)
                ret = sum(g ** (k - j) for k in range(j, ep_t + 1))
                self.expected.append((episode[j][0], episode[j][1], ret, nxt[env], disc))
            if done:
                self.episodes[env] = []


# The sizes the twins' tests run at: a few environments and a small network, quick on a CPU.
SMALL_DQN = {"envs": 5, "hidden": 8, "nstep": 3, "capacity": 256, "batch": 16, "updates": 2, "seed": 3}
SMALL_C51 = {"envs": 8, "hidden": 32, "nstep": 3, "capacity": 1024, "batch": 16, "updates": 2,
             "learning_starts": 64, "seed": 3}


def small_config(config_class, sizes: dict, **overrides):
    """`config_class` (bench/dqn_spec.py's Config or a subclass) at `sizes`, with `overrides`."""
    return config_class(**{**sizes, **overrides})
