"""GPU unit tests of the flagship pipeline's kernels (kernels/*.cu).

Kernels are compiled from source with CuPy's NVRTC backend and launched directly, independent
of the pipec runtime. References are NumPy, PyTorch (autograd, AdamW, grad clipping) and
Gymnasium (CartPole-v1). Inputs are fresh random data (the seed is printed; a failing test
shows it), outputs are poisoned (NaN / -777) before every launch so an unwritten output fails.
"""

from __future__ import annotations

import functools
import math
import pathlib
import secrets

import numpy as np
import pytest

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
KDIR = ROOT / "kernels"
OPTS = (f"-I{KDIR}", "--std=c++17")
I32, U32, F32, F64 = np.int32, np.uint32, np.float32, np.float64
POISON_I = -777

STREAM_INIT, STREAM_ACT, STREAM_RESET, STREAM_SAMPLE = (0x494E4954, 0x41435421, 0x52534554, 0x53414D50)


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
@functools.cache
def _module(name: str):
    return cp.RawModule(code=(KDIR / f"{name}.cu").read_text(), options=OPTS)


def K(mod: str, fn: str):
    return _module(mod).get_function(fn)


@functools.cache
def _src_module(code: str):
    return cp.RawModule(code=code, options=OPTS)


def cdiv(a, b):
    return -(-a // b)


def nanf(*shape):
    return cp.full(shape, np.nan, dtype=cp.float32)


def poisoni(*shape):
    return cp.full(shape, POISON_I, dtype=cp.int32)


def dev(a, dtype=None):
    return cp.asarray(np.ascontiguousarray(a, dtype=dtype))


def rel_err(got, ref):
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    den = np.linalg.norm(ref)
    return np.linalg.norm(got - ref) / (den if den > 0 else 1.0)


def assert_same_bits(got, want, msg=""):
    """Equal bit patterns (a NaN equals only the same NaN, -0.0 differs from 0.0)."""
    assert got.dtype == want.dtype and got.shape == want.shape, msg
    unsigned = np.dtype(f"u{got.dtype.itemsize}")
    np.testing.assert_array_equal(got.view(unsigned), want.view(unsigned), err_msg=msg)


@pytest.fixture
def rng():
    seed = secrets.randbits(32)
    print(f"numpy seed {seed}")
    return np.random.default_rng(seed)


def nparams(H):
    return 8 * H + H * H + 2


def unpack(p, H):
    """The layers of a flat parameter vector (NumPy array or torch tensor), as views."""
    out, o = {}, 0
    for name, shape in (
        ("W1", (H, 4)),
        ("b1", (H,)),
        ("W2", (H, H)),
        ("b2", (H,)),
        ("W3", (2, H)),
        ("b3", (2,)),
    ):
        n = int(np.prod(shape))
        out[name] = p[o : o + n].reshape(shape)
        o += n
    assert o == nparams(H)
    return out


def linear_init(rng, H):
    """Parameters drawn like nn.Linear's default init (uniform +-1/sqrt(fan_in))."""
    p = np.empty(nparams(H), np.float32)
    d = unpack(p, H)
    for name, fan in (("W1", 4), ("b1", 4), ("W2", H), ("b2", H), ("W3", H), ("b3", H)):
        b = 1.0 / math.sqrt(fan)
        d[name][...] = rng.uniform(-b, b, d[name].shape)
    return p


def forward64(p, x, H):
    d = {k: v.astype(np.float64) for k, v in unpack(p, H).items()}
    x = x.astype(np.float64)
    z1 = x @ d["W1"].T + d["b1"]
    a1 = np.maximum(z1, 0)
    z2 = a1 @ d["W2"].T + d["b2"]
    a2 = np.maximum(z2, 0)
    return z1, a1, z2, a2, a2 @ d["W3"].T + d["b3"]


# ---- Philox4x32-10 reference (Random123) ----
def philox(c0, c1, c2, c3, k0, k1):
    """Vectorised Philox4x32-10; returns a (n, 4) uint32 array."""
    n = max(np.size(v) for v in (c0, c1, c2, c3, k0, k1))
    c = [np.broadcast_to(np.asarray(v, np.uint64), (n,)).copy() for v in (c0, c1, c2, c3)]
    k = [np.broadcast_to(np.asarray(v, np.uint64), (n,)).copy() for v in (k0, k1)]
    m32 = np.uint64(0xFFFFFFFF)
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c[0]
        p1 = np.uint64(0xCD9E8D57) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k[0], p1 & m32, (p0 >> np.uint64(32)) ^ c[3] ^ k[1], p0 & m32]
        k = [(k[0] + np.uint64(0x9E3779B9)) & m32, (k[1] + np.uint64(0xBB67AE85)) & m32]
    return np.stack([v.astype(np.uint32) for v in c], axis=-1)


def u01f(x):
    return (np.asarray(x, np.uint32) >> 8).astype(np.float32) * np.float32(2.0**-24)


def u01d(a, b):
    a = np.asarray(a, np.uint32)
    b = np.asarray(b, np.uint32)
    return ((a >> 5).astype(np.float64) * 67108864.0 + (b >> 6).astype(np.float64)) * 2.0**-53


def reset_states(seed, step, envs):
    envs = np.asarray(envs)
    r0 = philox(step, envs, 0, 0, seed, STREAM_RESET)
    r1 = philox(step, envs, 1, 0, seed, STREAM_RESET)
    u = np.stack(
        [
            u01d(r0[:, 0], r0[:, 1]),
            u01d(r0[:, 2], r0[:, 3]),
            u01d(r1[:, 0], r1[:, 1]),
            u01d(r1[:, 2], r1[:, 3]),
        ],
        axis=1,
    )
    return -0.05 + (0.05 - -0.05) * u


def tree_from_leaves(leaves):
    """Float32 heap sum tree, each node fl(left + right), node 0 left at 0."""
    C = len(leaves)
    t = np.zeros(2 * C, np.float32)
    t[C:] = leaves
    n = C // 2
    while n >= 1:
        t[n : 2 * n] = t[2 * n : 4 * n : 2] + t[2 * n + 1 : 4 * n : 2]
        n //= 2
    return t


# --------------------------------------------------------------------------------------------
# common.cuh: Philox and the block primitives
# --------------------------------------------------------------------------------------------
PHILOX_SRC = r"""
#include "common.cuh"
extern "C" __global__ void t_philox(const unsigned int* ctr, const unsigned int* key,
                                    unsigned int* out, float* uf, double* ud, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const pipec_u4 r = pipec_philox(ctr[4 * i], ctr[4 * i + 1], ctr[4 * i + 2], ctr[4 * i + 3],
                                    key[2 * i], key[2 * i + 1]);
    out[4 * i] = r.x; out[4 * i + 1] = r.y; out[4 * i + 2] = r.z; out[4 * i + 3] = r.w;
    uf[i] = pipec_u01f(r.x);
    ud[i] = pipec_u01d(r.y, r.z);
}
"""

KAT = [  # Random123 known-answer vectors for philox4x32_10: counter, key, result
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


def test_philox_reference_matches_known_answers():
    for ctr, key, want in KAT:
        got = philox(*[np.array([v]) for v in ctr], *[np.array([v]) for v in key])[0]
        assert [int(v) for v in got] == list(want)


def test_philox_device_matches_reference(rng):
    n = 4099
    ctr = rng.integers(0, 2**32, (n, 4), dtype=np.uint64).astype(np.uint32)
    key = rng.integers(0, 2**32, (n, 2), dtype=np.uint64).astype(np.uint32)
    for i, (c, k, _) in enumerate(KAT):
        ctr[i], key[i] = c, k
    out = cp.full((n, 4), 0xDEADBEEF, dtype=cp.uint32)
    uf, ud = nanf(n), cp.full(n, np.nan, dtype=cp.float64)
    _src_module(PHILOX_SRC).get_function("t_philox")(
        (cdiv(n, 128),), (128,), (dev(ctr), dev(key), out, uf, ud, I32(n))
    )
    ref = philox(ctr[:, 0], ctr[:, 1], ctr[:, 2], ctr[:, 3], key[:, 0], key[:, 1])
    got = out.get()
    np.testing.assert_array_equal(got, ref)
    for i, (_, _, want) in enumerate(KAT):
        assert [int(v) for v in got[i]] == list(want)
    np.testing.assert_array_equal(uf.get(), u01f(ref[:, 0]))
    np.testing.assert_array_equal(ud.get(), u01d(ref[:, 1], ref[:, 2]))
    assert 0.0 <= ud.get().min() and ud.get().max() < 1.0


BLOCK_SRC = r"""
#include "common.cuh"
extern "C" __global__ void t_block(const float* x, const int* v, float* sum, float* mx,
                                   int* exs, int* tot) {
    __shared__ float s[1024];
    __shared__ int si[1024];
    const unsigned int t = pipec_tid();
    const float a = x[t];
    const float r = pipec_block_sum(a, s);
    const float m = pipec_block_max(a, s);
    int total = -1;
    const int e = pipec_block_exscan(v[t], si, &total);
    sum[t] = r; mx[t] = m; exs[t] = e; tot[t] = total;
}
"""


def tree_sum_f32(vals):
    """The exact pairing order of pipec_block_sum, in float32."""
    s = np.asarray(vals, np.float32).copy()
    n = len(s)
    p = 1
    while p < n:
        p <<= 1
    h = p >> 1
    while h > 0:
        idx = np.arange(h)
        idx = idx[idx + h < n]
        s[idx] = s[idx] + s[idx + h]
        h >>= 1
    return s[0]


@pytest.mark.parametrize(
    "block", [(1,), (2,), (31,), (32,), (33,), (100,), (256,), (1000,), (1024,), (16, 5), (8, 4, 3)]
)
def test_block_primitives(rng, block):
    n = int(np.prod(block))
    fn = _src_module(BLOCK_SRC).get_function("t_block")
    # random data, then the maximum planted in the last and in the first thread
    for where in (None, -1, 0):
        x = rng.normal(0, 1, n).astype(np.float32)
        if where is not None:
            x[where] = np.float32(10.0)
        v = rng.integers(0, 5, n).astype(np.int32)
        outs = []
        for _ in range(2):
            s, m, e, t = nanf(n), nanf(n), poisoni(n), poisoni(n)
            fn((1,), block, (dev(x), dev(v), s, m, e, t))
            outs.append((s.get(), m.get(), e.get(), t.get()))
        s, m, e, t = outs[0]
        assert np.all(s == tree_sum_f32(x))  # bit-exact: the documented fixed order
        assert abs(float(s[0]) - float(x.astype(np.float64).sum())) <= 1e-5 * (1 + np.abs(x).sum())
        assert np.all(m == x.max())
        np.testing.assert_array_equal(e, np.concatenate([[0], np.cumsum(v)[:-1]]))
        assert np.all(t == v.sum())
        for a, b in zip(outs[0], outs[1], strict=True):  # determinism: same bits twice
            np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


# --------------------------------------------------------------------------------------------
# cartpole.cu, cartpole.cuh
# --------------------------------------------------------------------------------------------
# The env step alone, one thread per env with given actions: what cartpole_step was before the
# acting kernels took the step in (mlp_act_push, c51_act_env). Gymnasium checks it; it is the
# reference the fused kernels' env outputs must equal bit for bit.
CARTPOLE_SRC = r"""
#include "cartpole.cuh"
extern "C" __global__ void t_cartpole_step(double* state, int* ep_steps, float* ep_return,
                                           const int* action, const int* step, float* next_obs,
                                           float* reward, int* step_info, float* fin_return,
                                           int n, unsigned int seed, int max_steps) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n) return;
    cp_step_env(e, action[e], (unsigned int)(step[0] + 1), state, ep_steps, ep_return,
                next_obs, reward, step_info, fin_return, seed, max_steps);
}
"""

ENV_FIELDS = ("state", "ep_steps", "ep_return", "next_obs", "reward", "step_info", "fin_return")


class EnvBuffers:
    """Device buffers of n environments: the state, ep_steps and ep_return a step updates, and
    its outputs next_obs, reward, step_info and fin_return, poisoned by `poison()`."""

    def __init__(self, state, ep_steps, ep_return):
        self.n = len(state)
        self.state = dev(state, np.float64)
        self.ep_steps = dev(ep_steps, np.int32)
        self.ep_return = dev(ep_return, np.float32)
        self.poison()

    def poison(self):
        n = self.n
        self.next_obs, self.reward, self.fin_return = nanf(n, 4), nanf(n), nanf(n)
        self.step_info = poisoni(n, 2)

    def updated(self):
        return self.state, self.ep_steps, self.ep_return

    def outputs(self):
        return self.next_obs, self.reward, self.step_info, self.fin_return

    def host(self):
        return {k: getattr(self, k).get() for k in ENV_FIELDS}

    def copy(self):
        h = self.host()
        return EnvBuffers(h["state"], h["ep_steps"], h["ep_return"])


def env_step(env, action, step, seed, max_steps):
    """Steps `env` with `action` by t_cartpole_step; `step` is the counter before the tick."""
    env.poison()
    _src_module(CARTPOLE_SRC).get_function("t_cartpole_step")(
        (cdiv(env.n, 32),),
        (32,),
        (*env.updated(), dev(action, np.int32), dev([step], np.int32), *env.outputs(), I32(env.n), U32(seed),
         I32(max_steps)),
    )


def assert_steps_like_env_step(rng, n, act_env, seed, steps=40, max_steps=25):
    """`act_env(env, step, max_steps)` launches an acting kernel fused with the env step on
    `env` (`step` the counter before the tick) and returns its (obs, action) on the host. Step
    after step, a copy of the pre-step envs is stepped by t_cartpole_step with the actions it
    chose: every env buffer must be the same bits, and obs float32 of the pre-step state (read
    before the step overwrote it). Episodes end both ways: max_steps is short, env 0 truncates
    and env 1 terminates on the first step, the others as they go."""
    state = rng.uniform(-0.15, 0.15, (n, 4))
    ep_steps = rng.integers(0, max_steps, n)
    ep_steps[0] = max_steps - 1
    if n > 1:
        state[1, 2:] = (0.2, 1.0)  # theta 0.2 + 0.02 * 1.0 beyond 12 degrees after one step
    env = EnvBuffers(state, ep_steps, rng.integers(0, 9, n))
    n_term = n_trunc = 0
    first = int(rng.integers(0, 10**6))
    for step in range(first, first + steps):
        ref = env.copy()
        pre = env.state.get()
        env.poison()
        obs, action = act_env(env, step, max_steps)
        np.testing.assert_array_equal(obs, pre.astype(np.float32))
        assert np.all((action == 0) | (action == 1))
        env_step(ref, action, step, seed, max_steps)
        got, want = env.host(), ref.host()
        for k in ENV_FIELDS:
            assert_same_bits(got[k], want[k], f"{k} at step {step}")
        if step == first:
            assert got["step_info"][0, 1] == 2 and (n == 1 or got["step_info"][1, 1] == 1)
        n_term += int((got["step_info"][:, 1] == 1).sum())
        n_trunc += int((got["step_info"][:, 1] == 2).sum())
    print(f"{n_term} terminations, {n_trunc} truncations")


def test_cartpole_reset_all(rng):
    n = 301
    seed = int(rng.integers(0, 2**32))
    state = cp.full((n, 4), np.nan, dtype=cp.float64)
    steps, ret = poisoni(n), nanf(n)
    K("cartpole", "cartpole_reset_all")((cdiv(n, 64),), (64,), (state, steps, ret, I32(n), U32(seed)))
    s = state.get()
    np.testing.assert_array_equal(s, reset_states(seed, 0, np.arange(n)))
    assert np.all(np.abs(s) <= 0.05)
    assert np.all(steps.get() == 0) and np.all(ret.get() == 0)
    assert len(np.unique(s[:, 0])) == n  # envs get distinct states


def test_cartpole_step_matches_gymnasium(rng):
    gym = pytest.importorskip("gymnasium")
    n, T, max_steps = 96, 300, 500
    seed = int(rng.integers(0, 2**32))
    start = rng.uniform(-0.15, 0.15, (n, 4))
    t_ref = rng.integers(0, max_steps, n)  # some envs truncate during the test
    ret_ref = t_ref.astype(np.float64)
    envs = []
    for e in range(n):
        g = gym.make("CartPole-v1").unwrapped
        g.reset(seed=e)
        g.state = start[e].copy()
        envs.append(g)
    env = EnvBuffers(start, t_ref, ret_ref)
    worst_state = worst_obs = 0.0
    n_term = n_trunc = 0
    for step in range(1, T + 1):
        act = rng.integers(0, 2, n).astype(np.int32)
        env_step(env, act, step - 1, seed, max_steps)  # the counter before this step's tick
        h = env.host()
        st, no, si, fr, rw = h["state"], h["next_obs"], h["step_info"], h["fin_return"], h["reward"]
        assert np.all(rw == 1.0)
        ended = []
        for e in range(n):
            g = envs[e]
            _obs, r, term, _, _ = g.step(int(act[e]))
            assert r == 1.0
            post = np.asarray(g.state, np.float64)
            worst_obs = max(worst_obs, float(np.abs(no[e] - post).max()))
            assert np.all(np.isfinite(no[e]))
            trunc = t_ref[e] + 1 >= max_steps
            code = 1 if term else (2 if trunc else 0)
            assert (si[e, 0], si[e, 1]) == (t_ref[e], code), (step, e)
            if code:
                ended.append(e)
                assert fr[e] == ret_ref[e] + 1
                n_term += code == 1
                n_trunc += code == 2
                g.state = st[e].copy()
                g.steps_beyond_terminated = None
                t_ref[e], ret_ref[e] = 0, 0.0
            else:
                worst_state = max(worst_state, float(np.abs(st[e] - post).max()))
                assert fr[e] == 0.0
                t_ref[e] += 1
                ret_ref[e] += 1
        if ended:
            np.testing.assert_array_equal(st[ended], reset_states(seed, step, ended))
        np.testing.assert_array_equal(h["ep_steps"], t_ref)
        np.testing.assert_array_equal(h["ep_return"], ret_ref.astype(np.float32))
    print(
        f"max |state - gym| {worst_state:.3g}, max |obs - gym| {worst_obs:.3g}, "
        f"{n_term} terminations, {n_trunc} truncations"
    )
    assert worst_state <= 1e-5 and worst_obs <= 1e-5
    assert n_term > 100 and n_trunc > 0


# --------------------------------------------------------------------------------------------
# mlp.cu: init, act
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("H", [64, 48])
def test_mlp_init_params(rng, H):
    P = nparams(H)
    seed = int(rng.integers(0, 2**32))
    p = nanf(P)
    K("mlp", "mlp_init_params")((cdiv(P, 256),), (256,), (p, I32(H), U32(seed)))
    got = p.get()
    u = u01f(philox(np.arange(P), 0, 0, 0, seed, STREAM_INIT)[:, 0])
    fan = np.where(np.arange(P) < 5 * H, 4, H).astype(np.float32)
    bound = np.float32(1.0) / np.sqrt(fan)
    np.testing.assert_array_equal(got, bound * (np.float32(2.0) * u - np.float32(1.0)))
    d = unpack(got, H)
    for name, fan_in in (("W1", 4), ("b1", 4), ("W2", H), ("b2", H), ("W3", H), ("b3", H)):
        assert np.abs(d[name]).max() <= 1 / math.sqrt(fan_in) + 1e-7, name
    w2 = d["W2"].ravel() * math.sqrt(H)  # uniform(-1, 1): mean 0, var 1/3
    assert abs(w2.mean()) < 0.05 and abs(w2.var() - 1 / 3) < 0.03


def _mlp_act_push(params, env, step, H, epb, threads, seed, eps_sched, max_steps=500, push=None,
                  nstep=3, top=2, max_prio=1.5, tick=(F64(0.4), I32(15), I32(500), I32(3)), batch=None):
    """replay_plan, then mlp_act_push on `env` (`step` the counter before the tick) and
    `push` (PushBuffers with nstep and a capacity of 4096 unless given), drawing into `batch`
    ((b_idx, b_w), 64 draws unless given); (obs, action)."""
    n = env.n
    start, end, decay = eps_sched
    if push is None:
        push = PushBuffers(n, nstep, 4096, 0, 0, 1e-3, 0)
    C = len(push.leaves)
    push.step[...] = step
    flush_off = poisoni(n + 3)
    K("replay", "replay_plan")(
        (1,),
        (min(n, 1024),),
        (env.state, env.ep_steps, push.head, push.step, flush_off, I32(n), I32(nstep), I32(max_steps)),
    )
    obs, act = nanf(n, 4), poisoni(n)
    b_idx, b_w = batch if batch is not None else (poisoni(64), nanf(64))
    K("mlp_act", "mlp_act_push")(
        (cdiv(n, epb) + 1,),
        (threads,),
        (dev(params), *env.updated(), flush_off, dev([max_prio], np.float32), obs, act, *env.outputs(), *push.win,
         *push.ring, push.tree, push.head, push.size, push.step, push.sched, push.learn_on, push.lr, push.adam_t,
         b_idx, b_w, I32(n), I32(H), I32(epb), U32(seed), F64(start), F64(end), I32(decay), I32(max_steps),
         I32(nstep), I32(C), I32(top), F32(0.9), F32(0.6), *tick, I32(len(b_idx))),
        shared_mem=4 * (H * (H + 4) + 8 * H + 2 + epb * (2 * H + 6 + 6 * nstep)),
    )
    return obs.get(), act.get()


ACT_SHAPES = [(64, 256, 4, 256), (40, 250, 3, 96), (64, 7, 4, 256), (32, 1000, 16, 512)]  # 512: its bound


@pytest.mark.parametrize("H,n,epb,threads", ACT_SHAPES)
def test_mlp_act_push_actions(rng, H, n, epb, threads):
    params = linear_init(rng, H)
    state = rng.normal(0, 0.5, (n, 4))
    obs32 = state.astype(np.float32)
    q = forward64(params, obs32, H)[4]
    seed = int(rng.integers(0, 2**32))
    step = int(rng.integers(1, 10**6))
    r = philox(step, np.arange(n), 0, 0, seed, STREAM_ACT)
    rand_a = (r[:, 1] >> 31).astype(np.int32)
    greedy = (q[:, 1] > q[:, 0]).astype(np.int32)
    sure = np.abs(q[:, 1] - q[:, 0]) > 1e-4

    def run(p, start, end, decay):
        env = EnvBuffers(state, np.zeros(n), np.zeros(n))
        # step - 1: the counter before this step's tick
        obs, act = _mlp_act_push(p, env, step - 1, H, epb, threads, seed, (start, end, decay))
        np.testing.assert_array_equal(obs, obs32)
        return act

    # (start, end, decay steps): constant 0, 1, 0.35, and halfway down 1 -> 0.02 (eps 0.51)
    for start, end, decay in ((0.0, 0.0, 7), (1.0, 1.0, 7), (0.35, 0.35, 7), (1.0, 0.02, 2 * step)):
        eps = max(end, start - (start - end) * step / decay)
        a = run(params, start, end, decay)
        explore = u01f(r[:, 0]) < np.float32(eps)
        np.testing.assert_array_equal(a[explore], rand_a[explore])
        np.testing.assert_array_equal(a[~explore & sure], greedy[~explore & sure])
        assert np.all((a == 0) | (a == 1))
        if eps == 0.0:
            assert not explore.any() and sure.mean() > 0.9
        if eps == 1.0:
            assert explore.all()
        if decay == 2 * step and explore.size >= 256:  # eps 0.51: a band of over 3 sigma at 256 envs
            assert 0.4 < explore.mean() < 0.6
    # ties go to action 0: make both output rows identical
    tied = params.copy()
    d = unpack(tied, H)
    d["W3"][1] = d["W3"][0]
    d["b3"][1] = d["b3"][0]
    assert np.all(run(tied, 0.0, 0.0, 7) == 0)


@pytest.mark.parametrize("H,n,epb,threads", ACT_SHAPES)
def test_mlp_act_push_steps_like_the_env_step_alone(rng, H, n, epb, threads):
    params = linear_init(rng, H)
    seed = int(rng.integers(0, 2**32))

    def act_env(env, step, max_steps):
        return _mlp_act_push(params, env, step, H, epb, threads, seed, (0.5, 0.5, 7), max_steps)

    assert_steps_like_env_step(rng, n, act_env, seed)


@pytest.mark.parametrize(
    "H,n,epb,threads,N,C,top", [(64, 128, 4, 256, 5, 131072, 8), (40, 250, 3, 96, 3, 512, 4), (32, 37, 16, 512, 2, 64, 0)]
)
def test_mlp_act_push_pushes_like_the_push_node(rng, H, n, epb, threads, N, C, top):
    """The push inside mlp_act_push (at replay_plan's offsets, the tick, the tree and the first
    update's draw in one extra block) leaves the bits replay_push_flush then per_sample leave
    after the same env step, step after step: windows, ring, the whole sum tree, head, size,
    step, sched, learn_on, adam_t and the drawn batch, through terminations, truncations and a
    wrapped ring (C is small against n * N in two of the shapes, and the first starts near the
    end of a large ring). The draw reads the leaves the acting blocks are writing meanwhile."""
    params = linear_init(rng, H)
    seed, max_steps, max_prio = int(rng.integers(0, 2**32)), 25, float(rng.uniform(0.5, 3.0))
    tick = (F64(0.4), I32(15), I32(min(C // 2, 2000)), I32(3))
    eps = (F64(1.0), F64(0.05), I32(10))
    head0 = int(rng.integers(max(0, C - 4 * n * N), C))
    fused, split = (PushBuffers(n, N, C, head0, 0, 2e-3, 5) for _ in range(2))
    tree0 = tree_from_leaves((rng.random(C) ** 2).astype(np.float32))
    for b in (fused, split):
        b.tree[...] = dev(tree0)
    env = EnvBuffers(rng.uniform(-0.15, 0.15, (n, 4)), rng.integers(0, max_steps, n), rng.integers(0, 9, n))
    B = 256
    drawn, want_drawn = (poisoni(B), nanf(B)), (poisoni(B), nanf(B))
    ended = wrapped = 0
    for step in range(30):
        head_before = int(fused.head.get()[0])
        obs, act = _mlp_act_push(params, env, step, H, epb, threads, seed, (1.0, 0.05, 10), max_steps, fused, N,
                                 top, max_prio, tick, drawn)
        info = env.step_info
        K("replay", "replay_push_flush")(
            (1,),
            (max(32, -(-n // 32) * 32),),
            (dev(obs), dev(act), env.reward, env.next_obs, info, dev([max_prio], np.float32), *split.win, split.head,
             split.size, split.step, split.sched, split.learn_on, split.lr, split.adam_t, *split.ring, split.tree,
             I32(n), I32(N), I32(C), I32(top), F32(0.9), F32(0.6), *eps, *tick),
        )
        gathered = [nanf(B, 4), poisoni(B), nanf(B), nanf(B, 4), nanf(B)]
        K("sumtree", "per_sample")(
            (1,),
            (B,),
            (dev([1], np.int32), split.tree, split.size, split.step, split.sched, *split.ring, *want_drawn, *gathered,
             I32(B), I32(C), I32(top), U32(seed), I32(0)),
        )
        got, want = fused.host(), split.host()
        for k in want:
            assert_same_bits(got[k], want[k], f"{k} at step {step}")
        for g, w, k in zip(drawn, want_drawn, ("b_idx", "b_w")):
            assert_same_bits(g.get(), w.get(), f"{k} at step {step}")
        ended += int((info.get()[:, 1] != 0).sum())
        wrapped |= int(want["head"][0]) < head_before
    assert ended > 0 and wrapped and want["learn_on"][0] == 1
    assert len(np.unique(drawn[0].get())) > 8


# --------------------------------------------------------------------------------------------
# mlp.cu: learner kernels against PyTorch autograd
# --------------------------------------------------------------------------------------------
def _torch_learner(torch, params, target, obs, act, ret, nxt, disc, w, H):
    F = torch.nn.functional
    t = lambda a: torch.tensor(a)
    p = torch.tensor(params, requires_grad=True)
    tp = t(target)

    def net(v, x, keep=False):
        d = unpack(v, H)
        z1 = x @ d["W1"].T + d["b1"]
        a1 = torch.relu(z1)
        z2 = a1 @ d["W2"].T + d["b2"]
        a2 = torch.relu(z2)
        q = a2 @ d["W3"].T + d["b3"]
        if keep:
            z1.retain_grad()
            z2.retain_grad()
            q.retain_grad()
        return z1, a1, z2, a2, q

    z1, a1, z2, a2, q = net(p, t(obs), keep=True)
    with torch.no_grad():
        qn = net(p, t(nxt))[4]
        qt = net(tp, t(nxt))[4]
        astar = torch.argmax(qn, dim=1, keepdim=True)
        y = t(ret) + t(disc) * qt.gather(1, astar)[:, 0]
    qa = q.gather(1, t(act.astype(np.int64))[:, None])[:, 0]
    lossi = t(w) * F.huber_loss(qa, y, reduction="none", delta=1.0)
    loss = lossi.mean()
    loss.backward()
    g = lambda a: a.detach().numpy()
    return {
        "h1": g(a1),
        "h2": g(a2),
        "td": g(qa - y),
        "lossi": g(lossi),
        "dq": g(q.grad),
        "dh1": g(z1.grad),
        "dh2": g(z2.grad),
        "grad": g(p.grad),
        "loss": loss.item(),
    }


def _learner_inputs(rng, B, H):
    params = linear_init(rng, H)
    target = (params + rng.normal(0, 0.02, params.shape)).astype(np.float32)
    obs = rng.normal(0, 1, (B, 4)).astype(np.float32)
    nxt = rng.normal(0, 1, (B, 4)).astype(np.float32)
    act = rng.integers(0, 2, B).astype(np.int32)
    ret = rng.uniform(-3, 3, B).astype(np.float32)  # both Huber branches
    disc = np.where(rng.random(B) < 0.2, 0.0, 0.99**3).astype(np.float32)
    w = rng.uniform(0.1, 1.0, B).astype(np.float32)
    # Samples whose ReLU masks or argmax could flip under float32 rounding get weight 0, so
    # they contribute no gradient in either implementation.
    z1, _, z2, _, _ = forward64(params, obs, H)
    qn = forward64(params, nxt, H)[4]
    fragile = (
        (np.abs(z1).min(axis=1) < 1e-5)
        | (np.abs(z2).min(axis=1) < 1e-5)
        | (np.abs(qn[:, 0] - qn[:, 1]) < 1e-5)
    )
    w[fragile] = 0.0
    return params, target, obs, act, ret, nxt, disc, w


def _replay_of(rng, inputs, size):
    """A ring holding `inputs` (from _learner_inputs) as transitions, with random priorities;
    the samples _learner_inputs marked fragile (weight 0) get priority 0, so no draw takes
    them. Returns the ring, the tree and the replay size (its last slot drawable)."""
    params, target, obs, act, ret, nxt, disc, w = inputs
    C = len(obs)
    fragile = w == 0
    while fragile[size - 1]:
        size -= 1
    leaves = np.where(fragile, 0, rng.uniform(0.05, 2.0, C)).astype(np.float32)
    leaves[size:] = 0
    ring = {"obs": obs, "act": act, "ret": ret, "nxt": nxt, "disc": disc}
    return ring, tree_from_leaves(leaves), size


def _batch_out(B):
    return {"idx": poisoni(B), "w": nanf(B), "obs": nanf(B, 4), "act": poisoni(B), "ret": nanf(B),
            "nxt": nanf(B, 4), "disc": nanf(B)}


def _draw_args(learn_on, tree, size, step, beta, ring):
    return (dev([learn_on], np.int32), tree, dev([size], np.int32), dev([step], np.int32),
            dev([0.1, beta, 1e-3], np.float32), *(dev(ring[k]) for k in ("obs", "act", "ret", "nxt", "disc")))


_BATCH_KEYS = ("idx", "w", "obs", "act", "ret", "nxt", "disc")
_LEARN_KEYS = ("h1", "h2", "dh1", "dh2", "dq", "td", "lossi")


def _run_td(B, H, spb, threads, params, target, ring, drawn, learn_on=1):
    """mlp_td_backward on a drawn batch (b_idx, b_w on the device): the batch it gathered and
    its learner outputs."""
    C = len(ring["act"])
    batch = {k: v for k, v in _batch_out(B).items() if k not in ("idx", "w")}
    out = {k: nanf(B, H) for k in ("h1", "h2", "dh1", "dh2")}
    out.update(dq=nanf(B, 2), td=nanf(B), lossi=nanf(B))
    smem = 4 * (2 * H * (H + 4) + 16 * H + 8 + spb * (6 * H + 20))
    fn = K("mlp", "mlp_td_backward")
    # above 48 KiB the launch must opt in, as pipec's runtime does (runtime/modules.py)
    fn.max_dynamic_shared_size_bytes = max(fn.max_dynamic_shared_size_bytes, smem)
    fn((cdiv(B, spb),), (threads,),
       (dev([learn_on], np.int32), *drawn, *(dev(ring[k]) for k in ("obs", "act", "ret", "nxt", "disc")),
        dev(params), dev(target), *(batch[k] for k in ("obs", "act", "ret", "nxt", "disc")),
        *(out[k] for k in _LEARN_KEYS), I32(B), I32(H), I32(spb), I32(C)),
       shared_mem=smem)
    return {k: v.get() for k, v in batch.items()}, out


def _run_per_sample(B, threads, top, ring, tree, size, draw, learn_on=1):
    """per_sample on a tree whose depths below `top` are stale (NaN): the batch and the tree
    after."""
    step, seed, update, beta = draw
    tree_dev = dev(tree)
    tree_dev[1 : 1 << top] = np.nan
    batch = _batch_out(B)
    K("sumtree", "per_sample")((1,), (threads,),
        (*_draw_args(learn_on, tree_dev, size, step, beta, ring), *(batch[k] for k in _BATCH_KEYS),
         I32(B), I32(len(ring["act"])), I32(top), U32(seed), I32(update)))
    return {k: v.get() for k, v in batch.items()}, tree_dev.get()


def _run_grad(B, H, block, obs, h1, h2, dh1, dh2, dq, learn_on=1):
    P = nparams(H)
    nb = cdiv(P, block[0])
    grad, part = nanf(P), nanf(nb)
    K("mlp", "mlp_grad")(
        (nb,), block, (dev([learn_on], np.int32), dev(obs), h1, h2, dh1, dh2, dq, grad, part, I32(B), I32(H))
    )
    return grad, part


@pytest.mark.parametrize(
    "B,H,spb,threads,gblock,C,top",
    [
        (256, 64, 4, 256, (64, 8), 1024, 8),
        (100, 40, 3, 128, (32, 4), 256, 5),
        (37, 64, 8, 512, (128, 3), 64, 6),
        (256, 64, 4, 100, (256, 1), 8192, 10),
    ],
)
def test_learner_kernels_match_autograd(rng, B, H, spb, threads, gblock, C, top):
    """mlp_td_backward gathers the batch per_sample drew (bit for bit, as per_sample gathered
    it), and its learner outputs, then mlp_grad's gradient, match PyTorch autograd on it."""
    torch = pytest.importorskip("torch")
    inputs = _learner_inputs(rng, C, H)
    ring, tree, size = _replay_of(rng, inputs, int(C * 0.9))
    draw = (int(rng.integers(1, 10**6)), int(rng.integers(0, 2**32)), 1, np.float32(rng.uniform(0.4, 1.0)))
    want, _ = _run_per_sample(B, min(B, 1024), top, ring, tree, size, draw)
    drawn = (dev(want["idx"]), dev(want["w"]))
    batch, out = _run_td(B, H, spb, threads, *inputs[:2], ring, drawn)
    for k in ("obs", "act", "ret", "nxt", "disc"):
        assert_same_bits(batch[k], want[k], k)
    assert len(np.unique(want["idx"])) > B // 2 and want["w"].max() == 1.0
    ref = _torch_learner(torch, *inputs[:2], want["obs"], want["act"], want["ret"], want["nxt"], want["disc"],
                         want["w"], H)
    got = {k: v.get() for k, v in out.items()}
    for k in ("h1", "h2", "td", "lossi", "dq", "dh1", "dh2"):
        err = rel_err(got[k], ref[k])
        print(f"{k}: rel err {err:.2e}")
        assert err <= 1e-4, k
    assert abs(got["lossi"].mean() - ref["loss"]) <= 1e-5 * (1 + abs(ref["loss"]))
    # dq is zero off the taken action
    assert np.all(got["dq"][np.arange(B), 1 - want["act"]] == 0)
    grad, part = _run_grad(B, H, gblock, want["obs"], out["h1"], out["h2"], out["dh1"], out["dh2"], out["dq"])
    g = grad.get()
    for name, gg in unpack(g, H).items():
        err = rel_err(gg, unpack(ref["grad"], H)[name])
        print(f"d{name}: rel err {err:.2e}")
        assert err <= 1e-4, name
    pt = part.get()
    blocks = [g[i : i + gblock[0]].astype(np.float64) for i in range(0, len(g), gblock[0])]
    np.testing.assert_allclose(pt, [np.sum(b * b) for b in blocks], rtol=1e-5, atol=1e-30)
    # learning off: nothing is written
    b_off, o_off = _run_td(B, H, spb, threads, *inputs[:2], ring, drawn, learn_on=0)
    assert np.all(b_off["act"] == POISON_I) and np.all(np.isnan(o_off["h1"].get()))


@pytest.mark.parametrize("B,H,block", [(256, 64, (64, 8)), (77, 24, (32, 5)), (5, 16, (96, 1)), (40, 16, (16, 1)),
                                       (33, 16, (8, 3))])
def test_mlp_grad_formula(rng, B, H, block):
    """mlp_grad alone on random tensors (no masking), against float64 sums."""
    obs = rng.normal(0, 1, (B, 4)).astype(np.float32)
    h1, h2, dh1, dh2 = (rng.normal(0, 1, (B, H)).astype(np.float32) for _ in range(4))
    dq = rng.normal(0, 1, (B, 2)).astype(np.float32)
    grad, part = _run_grad(B, H, block, obs, dev(h1), dev(h2), dev(dh1), dev(dh2), dev(dq))
    d64 = lambda a: a.astype(np.float64)
    ref = np.concatenate(
        [
            (d64(dh1).T @ d64(obs)).ravel(),
            d64(dh1).sum(0),
            (d64(dh2).T @ d64(h1)).ravel(),
            d64(dh2).sum(0),
            (d64(dq).T @ d64(h2)).ravel(),
            d64(dq).sum(0),
        ]
    )
    g = grad.get()
    for name, gg in unpack(g, H).items():
        assert rel_err(gg, unpack(ref, H)[name]) <= 1e-5, name
    blocks = [g[i : i + block[0]].astype(np.float64) for i in range(0, len(g), block[0])]
    np.testing.assert_allclose(part.get(), [np.sum(b * b) for b in blocks], rtol=1e-5, atol=1e-30)
    np.testing.assert_allclose(part.get().sum(), np.sum(d64(g) ** 2), rtol=1e-5)


# --------------------------------------------------------------------------------------------
# replay.cu + sumtree rebuild: flush against a NumPy model of the n-step ring
# --------------------------------------------------------------------------------------------
class ReplayModel:
    """Straightforward model of docs/dqn.md 4-5: per-env lists, ring writes in order."""

    def __init__(self, E, N, C, gamma):
        self.E, self.N, self.C, self.gamma = E, N, C, gamma
        self.win = [[] for _ in range(E)]  # previous entries (j, obs, a, r) of the episode
        self.head = self.size = 0
        self.obs = np.zeros((C, 4), np.float32)
        self.act = np.zeros(C, np.int32)
        self.ret = np.zeros(C, np.float64)
        self.nxt = np.zeros((C, 4), np.float32)
        self.disc = np.zeros(C, np.float64)
        self.leaf = np.zeros(C, np.float64)

    def step(self, t, done, obs, act, rew, nxt, maxp, alpha):
        base, g, offsets = self.head, 0, []
        for e in range(self.E):
            entries = (self.win[e] + [(t[e], obs[e], act[e], rew[e])])[-self.N :]
            assert entries[0][0] == t[e] - len(entries) + 1
            if done[e]:
                flushed = entries
            elif t[e] + 1 >= self.N:
                flushed = entries[:1]
            else:
                flushed = []
            offsets.append(g)
            for j, o, a, _ in flushed:
                R = sum(self.gamma ** (k - j) * float(r) for (k, _, _, r) in entries if k >= j)
                slot = (base + g) % self.C
                self.obs[slot], self.act[slot], self.ret[slot] = o, a, R
                self.nxt[slot] = nxt[e]
                self.disc[slot] = 0.0 if done[e] == 1 else self.gamma ** (t[e] - j + 1)
                self.leaf[slot] = float(maxp) ** alpha
                g += 1
            self.win[e] = [] if done[e] else (entries[1:] if len(entries) == self.N else entries)
        self.head = (base + g) % self.C
        self.size = min(self.size + g, self.C)
        return offsets, base, g


# eps_start, eps_end, eps_decay_steps, beta0, beta_steps, learning_starts, updates: the tick's
# constants, as replay_push_scan takes them
_TICK_CONSTS = (F64(1.0), F64(0.05), I32(10), F64(0.4), I32(15), I32(500), I32(3))


def _tick_args(step=0, lr=1e-3, adam_t=0):
    """Device buffers of the tick run by replay_push_scan: step, sched, learn_on, lr, adam_t."""
    return dev([step], np.int32), nanf(3), poisoni(1), dev([lr], np.float32), dev([adam_t], np.int32)


def test_replay_push_scan_ticks(rng):
    eps_start, eps_end, decay, beta0, beta_steps, starts, updates = (float(c) for c in _TICK_CONSTS)
    E, N, C = 40, 3, 4096
    step, sched, on, lr, adam_t = _tick_args(lr=rng.uniform(1e-4, 1e-2), adam_t=int(rng.integers(0, 99)))
    t_ref = int(adam_t.get()[0])
    head = dev([int(rng.integers(0, C))], np.int32)
    info = np.zeros((E, 2), np.int32)  # episode step 0, running: nothing is flushed
    for s in range(1, 26):
        size = int(rng.integers(starts - 2, starts + 2)) if s % 2 else int(rng.integers(0, 10))
        sz, off = dev([size], np.int32), poisoni(E + 2)
        sched[:] = np.nan
        K("replay", "replay_push_scan")(
            (1,),
            (64,),
            (dev(info), head, sz, off, step, sched, on, lr, adam_t, I32(E), I32(N), I32(C), *_TICK_CONSTS),
        )
        eps = max(eps_end, eps_start - (eps_start - eps_end) * s / decay)
        beta = min(1.0, beta0 + (1 - beta0) * s / beta_steps)
        assert step.get()[0] == s and sz.get()[0] == size and off.get()[E + 1] == 0
        np.testing.assert_array_equal(sched.get(), np.array([eps, beta, lr.get()[0]], np.float32))
        learning = size >= starts
        assert on.get()[0] == int(learning)
        t_ref += int(updates) if learning else 0
        assert adam_t.get()[0] == t_ref


def rebuild_stages(levels, stage):
    """(lo, hi) of rebuild launches of `stage` levels each, leaves to root."""
    return [(max(0, levels - (s + 1) * stage), levels - s * stage) for s in range(cdiv(levels, stage))]


@pytest.mark.parametrize(
    "E,N,C,scan_threads", [(37, 3, 64, 37), (256, 3, 4096, 256), (300, 5, 256, 128), (19, 1, 32, 1024)]
)
def test_flush_and_rebuild_match_model(rng, E, N, C, scan_threads):
    gamma, alpha = 0.9, 0.6
    model = ReplayModel(E, N, C, gamma)
    levels = int(math.log2(C))
    head, size = dev([0], np.int32), dev([0], np.int32)
    win_obs, win_act, win_rew = (
        cp.zeros((E, N, 4), cp.float32),
        cp.zeros((E, N), cp.int32),
        cp.zeros((E, N), cp.float32),
    )
    rb = {
        "obs": cp.zeros((C, 4), cp.float32),
        "act": cp.zeros(C, cp.int32),
        "ret": cp.zeros(C, cp.float32),
        "nxt": cp.zeros((C, 4), cp.float32),
        "disc": cp.zeros(C, cp.float32),
    }
    tree = cp.zeros(2 * C, cp.float32)
    t = np.zeros(E, np.int64)
    scan, write = K("replay", "replay_push_scan"), K("replay", "replay_flush_write")
    rebuild = K("sumtree", "sumtree_rebuild")
    wrapped = overfull = False
    for step in range(40):
        p_done = [0.05, 0.3, 0.95][step % 3] if step > 4 else 0.0
        done = np.where(rng.random(E) < p_done, rng.integers(1, 3, E), 0).astype(np.int32)
        obs = rng.normal(0, 1, (E, 4)).astype(np.float32)
        nxt = rng.normal(0, 1, (E, 4)).astype(np.float32)
        act = rng.integers(0, 2, E).astype(np.int32)
        rew = rng.uniform(-1, 2, E).astype(np.float32)
        maxp = np.float32(rng.uniform(0.5, 3.0))
        info = np.stack([t, done], axis=1).astype(np.int32)
        offsets, base, total = model.step(t, done, obs, act, rew, nxt, maxp, alpha)
        wrapped |= base + total > C
        overfull |= total > C
        off = poisoni(E + 2)
        scan(
            (1,),
            (scan_threads,),
            (dev(info), head, size, off, *_tick_args(), I32(E), I32(N), I32(C), *_TICK_CONSTS),
        )
        o = off.get()
        np.testing.assert_array_equal(o[:E], offsets)
        assert (o[E], o[E + 1]) == (base, total)
        assert (int(head.get()[0]), int(size.get()[0])) == (model.head, model.size)
        write(
            (E,),
            (32,),
            (
                dev(obs),
                dev(act),
                dev(rew),
                dev(nxt),
                dev(info),
                off,
                dev([maxp], np.float32),
                win_obs,
                win_act,
                win_rew,
                rb["obs"],
                rb["act"],
                rb["ret"],
                rb["nxt"],
                rb["disc"],
                tree[C:],
                I32(E),
                I32(N),
                I32(C),
                F32(gamma),
                F32(alpha),
            ),
        )
        np.testing.assert_array_equal(rb["obs"].get(), model.obs)
        np.testing.assert_array_equal(rb["act"].get(), model.act)
        np.testing.assert_array_equal(rb["nxt"].get(), model.nxt)
        np.testing.assert_allclose(rb["ret"].get(), model.ret, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(rb["disc"].get(), model.disc, rtol=1e-6, atol=0)
        leaves = tree[C:].get()
        np.testing.assert_allclose(leaves, model.leaf, rtol=2e-6, atol=0)
        # rebuild as the pipeline does (3 levels per node) and compare bit for bit
        tree[1:C] = np.nan
        for lo, hi in rebuild_stages(levels, 3):
            rebuild((1 << lo,), (64,), (tree, I32(lo), I32(hi)))
        np.testing.assert_array_equal(tree.get()[1:], tree_from_leaves(leaves)[1:])
        t = np.where(done != 0, 0, t + 1)
    assert wrapped
    if E * N > C:
        assert overfull  # the "only the last C transitions" path ran


class PushBuffers:
    """Device buffers one push updates: the windows, the ring and its leaves, head and size, and
    the tick's counter, schedules, learning flag, lr and update count."""

    def __init__(self, E, N, C, head, size, lr, adam_t):
        self.win = (
            cp.zeros((E, N, 4), cp.float32),
            cp.zeros((E, N), cp.int32),
            cp.zeros((E, N), cp.float32),
        )
        self.ring = (
            cp.zeros((C, 4), cp.float32),
            cp.zeros(C, cp.int32),
            cp.zeros(C, cp.float32),
            cp.zeros((C, 4), cp.float32),
            cp.zeros(C, cp.float32),
        )
        self.tree = cp.zeros(2 * C, cp.float32)
        self.leaves = self.tree[C:]
        self.head, self.size = dev([head], np.int32), dev([size], np.int32)
        self.step, self.sched, self.learn_on, self.lr, self.adam_t = _tick_args(lr=lr, adam_t=adam_t)

    def host(self):
        named = dict(zip(("win_obs", "win_act", "win_rew"), self.win))
        named.update(zip(("rb_obs", "rb_act", "rb_ret", "rb_next", "rb_disc"), self.ring), tree=self.tree)
        for k in ("head", "size", "step", "sched", "learn_on", "adam_t"):
            named[k] = getattr(self, k)
        return {k: v.get() for k, v in named.items()}


@pytest.mark.parametrize(
    "E,N,C,threads,scan_threads,top",
    [(37, 3, 64, 37, 37, 2), (256, 3, 4096, 256, 64, 8), (300, 5, 256, 320, 128, 0),
     (1024, 5, 1024, 1024, 1024, 5), (19, 1, 32, 32, 19, 4), (128, 5, 131072, 128, 128, 8)],
)
def test_push_flush_matches_scan_then_write(rng, E, N, C, threads, scan_threads, top):
    """replay_push_flush (one block, thread e for env e) leaves the bits replay_push_scan then
    replay_flush_write then a rebuild of the tree's depths top .. L-1 leave, step after step:
    windows, ring, the whole sum tree, head, size and the tick's outputs, through episode ends
    (terminated and truncated), full windows, a wrapped ring and, when E * N > C, a flush of
    more than C transitions. The tree starts from random priorities, so the flushed range's
    edge nodes sum flushed and unflushed leaves."""
    gamma, alpha = 0.9, 0.6
    consts = (*_TICK_CONSTS[:5], I32(min(C // 2, 2000)), _TICK_CONSTS[6])  # learning starts on the way
    head0 = int(rng.integers(max(0, C - 4 * E * N), C))  # near the end: the ring wraps
    lr, adam_t = float(rng.uniform(1e-4, 1e-2)), int(rng.integers(0, 99))
    fused, split = (PushBuffers(E, N, C, head0, 0, lr, adam_t) for _ in range(2))
    tree0 = tree_from_leaves((rng.random(C) ** 2).astype(np.float32))
    for b in (fused, split):
        b.tree[...] = dev(tree0)
    levels = int(math.log2(C))
    push = K("replay", "replay_push_flush")
    scan, write = K("replay", "replay_push_scan"), K("replay", "replay_flush_write")
    rebuild = K("sumtree", "sumtree_rebuild")
    t = np.zeros(E, np.int64)
    flushed = ended = full = 0
    wrapped = overfull = False
    for step in range(40):
        p_done = [0.05, 0.3, 0.95][step % 3] if step > 4 else 0.0
        done = np.where(rng.random(E) < p_done, rng.integers(1, 3, E), 0).astype(np.int32)
        info = dev(np.stack([t, done], axis=1).astype(np.int32))
        obs, nxt = dev(rng.normal(0, 1, (E, 4)), np.float32), dev(rng.normal(0, 1, (E, 4)), np.float32)
        act, rew = dev(rng.integers(0, 2, E), np.int32), dev(rng.uniform(-1, 2, E), np.float32)
        maxp = dev([rng.uniform(0.5, 3.0)], np.float32)
        push(
            (1,),
            (threads,),
            (obs, act, rew, nxt, info, maxp, *fused.win, fused.head, fused.size, fused.step, fused.sched,
             fused.learn_on, fused.lr, fused.adam_t, *fused.ring, fused.tree, I32(E), I32(N), I32(C),
             I32(top), F32(gamma), F32(alpha), *consts),
        )
        off = poisoni(E + 2)
        scan(
            (1,),
            (scan_threads,),
            (info, split.head, split.size, off, split.step, split.sched, split.learn_on, split.lr,
             split.adam_t, I32(E), I32(N), I32(C), *consts),
        )
        write(
            (E,),
            (32,),
            (obs, act, rew, nxt, info, off, maxp, *split.win, *split.ring, split.leaves, I32(E), I32(N),
             I32(C), F32(gamma), F32(alpha)),
        )
        if top < levels:
            rebuild((1 << top,), (64,), (split.tree, I32(top), I32(levels)))
        got, want = fused.host(), split.host()
        for k in want:
            assert_same_bits(got[k], want[k], f"{k} at step {step}")
        base, total = off.get()[E:]
        flushed += int(total)
        ended += int((done != 0).sum())
        full += int(((done == 0) & (t + 1 >= N)).sum())
        wrapped |= base + total > C
        overfull |= total > C
        t = np.where(done != 0, 0, t + 1)
    assert flushed > 0 and ended > 0 and full > 0 and wrapped
    assert want["learn_on"][0] == 1 and want["adam_t"][0] > adam_t
    if E * N > C:
        assert overfull  # the "only the last C transitions" path ran


@pytest.mark.parametrize(
    "C,stage,threads",
    [(4096, 1, 32), (4096, 5, 96), (4096, 12, 1024), (65536, 8, 128), (8, 2, 32), (2, 1, 1)],
)
def test_sumtree_rebuild(rng, C, stage, threads):
    leaves = (rng.random(C) ** 3).astype(np.float32)
    leaves[rng.random(C) < 0.3] = 0
    tree = cp.full(2 * C, np.nan, dtype=cp.float32)
    tree[C:] = dev(leaves)
    fn = K("sumtree", "sumtree_rebuild")
    for lo, hi in rebuild_stages(int(math.log2(C)), stage):
        fn((1 << lo,), (threads,), (tree, I32(lo), I32(hi)))
    got = tree.get()
    assert np.isnan(got[0])  # node 0 untouched
    np.testing.assert_array_equal(got[1:], tree_from_leaves(leaves)[1:])


# --------------------------------------------------------------------------------------------
# sumtree.cu: sampling and priority update
# --------------------------------------------------------------------------------------------
def _sample_ref(tree, C, B, size, step, seed, update):
    r = philox(step, np.arange(B), update, 0, seed, STREAM_SAMPLE)
    total = tree[1]
    u = (np.arange(B, dtype=np.float32) + u01f(r[:, 0])) * total / np.float32(B)
    u0 = u.copy()
    node = np.ones(B, np.int64)
    for _ in range(int(math.log2(C))):
        left = tree[2 * node]
        go = u < left
        u = np.where(go, u, (u - left).astype(np.float32)).astype(np.float32)
        node = np.where(go, 2 * node, 2 * node + 1)
    return np.minimum(node - C, size - 1), u0


@pytest.mark.parametrize(
    "C,B,threads,fill,top,offset",
    [
        (1024, 256, 256, 1.0, 8, 0),
        (16384, 100, 96, 0.3, 10, 0),
        (64, 256, 256, 0.5, 6, 0),
        (65536, 256, 1024, 0.9, 0, 0),
        (131072, 256, 256, 0.7, 8, 0),
        (131072, 256, 256, 0.7, 8, 1),  # the tree 4 bytes off alignment: the walk's scalar loads
    ],
)
def test_per_sample(rng, C, B, threads, fill, top, offset):
    size = max(1, int(C * fill))
    leaves = np.zeros(C, np.float32)
    leaves[:size] = (rng.uniform(0.01, 2.0, size) ** 0.6).astype(np.float32)
    # a few heavy leaves (5% of the mass each): the batch samples them repeatedly
    leaves[rng.integers(0, size, 5)] = np.float32(0.05 * leaves.astype(np.float64).sum())
    tree = tree_from_leaves(leaves)
    rb = {
        "obs": rng.normal(0, 1, (C, 4)).astype(np.float32),
        "act": rng.integers(0, 2, C).astype(np.int32),
        "ret": rng.normal(0, 1, C).astype(np.float32),
        "nxt": rng.normal(0, 1, (C, 4)).astype(np.float32),
        "disc": rng.random(C).astype(np.float32),
    }
    step, seed, update = int(rng.integers(1, 10**6)), int(rng.integers(0, 2**32)), 1
    beta = np.float32(rng.uniform(0.4, 1.0))

    def run(learn_on, sz):
        # depths below `top` are stale on entry: per_sample builds them
        tree_dev = cp.full(len(tree) + offset, np.nan, dtype=cp.float32)[offset:]
        tree_dev[:] = dev(tree)
        tree_dev[1 : 1 << top] = np.nan
        out = {
            "idx": poisoni(B),
            "w": nanf(B),
            "obs": nanf(B, 4),
            "act": poisoni(B),
            "ret": nanf(B),
            "nxt": nanf(B, 4),
            "disc": nanf(B),
        }
        K("sumtree", "per_sample")(
            (1,),
            (threads,),
            (
                dev([learn_on], np.int32),
                tree_dev,
                dev([sz], np.int32),
                dev([step], np.int32),
                dev([0.1, beta, 1e-3], np.float32),
                dev(rb["obs"]),
                dev(rb["act"]),
                dev(rb["ret"]),
                dev(rb["nxt"]),
                dev(rb["disc"]),
                out["idx"],
                out["w"],
                out["obs"],
                out["act"],
                out["ret"],
                out["nxt"],
                out["disc"],
                I32(B),
                I32(C),
                I32(top),
                U32(seed),
                I32(update),
            ),
        )
        return {k: v.get() for k, v in out.items()}, tree_dev.get()

    got, tree_after = run(1, size)
    np.testing.assert_array_equal(tree_after[1:], tree[1:])  # the top, bit for bit as a rebuild
    leaf, u = _sample_ref(tree, C, B, size, step, seed, update)
    np.testing.assert_array_equal(got["idx"], leaf)
    assert np.all(np.diff(got["idx"]) >= 0)  # stratified: non-decreasing
    assert len(np.unique(got["idx"])) < B  # heavy leaves were sampled repeatedly
    # independent check of the walk: the leaf whose cumulative-sum interval holds u (for the
    # samples whose u is clear of every interval boundary by more than float32 rounding)
    cum = np.cumsum(leaves.astype(np.float64))
    gap = np.min(np.abs(u[:, None].astype(np.float64) - cum[None, :size]), axis=1)
    far = gap > 4e-6 * cum[-1]
    ss = np.minimum(np.searchsorted(cum, u.astype(np.float64), side="right"), size - 1)
    np.testing.assert_array_equal(got["idx"][far], ss[far])
    assert far.sum() >= min(20, B // 4)
    p = leaves[leaf].astype(np.float64)
    w = (size * p / float(tree[1])) ** (-float(beta))
    np.testing.assert_allclose(got["w"], w / w.max(), rtol=2e-5)
    assert got["w"].max() == 1.0
    for k in ("obs", "act", "ret", "nxt", "disc"):
        np.testing.assert_array_equal(got[k], rb[k][leaf])
    # learning off, or an empty replay: nothing is written
    for lo, sz in ((0, size), (1, 0)):
        off, _ = run(lo, sz)
        assert np.all(off["idx"] == POISON_I) and np.all(np.isnan(off["w"]))


@pytest.mark.parametrize(
    "B,threads,layout",
    [
        (256, 256, "random"),
        (256, 256, "sorted"),
        (300, 128, "random"),
        (5000, 1024, "random"),
        (5000, 1024, "sorted"),
        (1, 32, "random"),
    ],
)
def test_per_update_priorities(rng, B, threads, layout):
    C = 4096
    idx = rng.integers(0, max(1, B // 4), B).astype(np.int32)  # many duplicates
    if layout == "sorted":
        idx = np.sort(idx)
    td = rng.normal(0, 2, B).astype(np.float32)
    lossi = rng.uniform(0, 3, B).astype(np.float32)
    leaves0 = rng.uniform(0, 1, C).astype(np.float32)
    alpha, eps, decay = 0.6, 1e-6, 0.99
    pr = np.abs(td) + np.float32(eps)

    def launch(learn_on, leaves, maxp, last, ema):
        K("sumtree", "per_update_priorities")(
            (1,),
            (threads,),
            (
                dev([learn_on], np.int32),
                dev(idx),
                dev(td),
                dev(lossi),
                leaves,
                maxp,
                last,
                ema,
                I32(B),
                I32(C),
                F32(alpha),
                F32(eps),
                F32(decay),
            ),
        )

    for mp0 in (np.float32(0.5), np.float32(100.0)):
        ema0 = np.float32(rng.uniform(0, 2))
        leaves = dev(leaves0)
        maxp, last, ema = dev([mp0], np.float32), nanf(1), dev([ema0], np.float32)
        launch(1, leaves, maxp, last, ema)
        want = leaves0.astype(np.float64)
        for i in range(B):  # in order: the last sample of a leaf wins
            want[idx[i]] = float(pr[i]) ** alpha
        np.testing.assert_allclose(leaves.get(), want, rtol=2e-6, atol=0)
        untouched = np.setdiff1d(np.arange(C), idx)
        np.testing.assert_array_equal(leaves.get()[untouched], leaves0[untouched])
        assert maxp.get()[0] == max(mp0, pr.max())
        loss = lossi.astype(np.float64).mean()
        np.testing.assert_allclose(last.get()[0], loss, rtol=1e-5)
        np.testing.assert_allclose(ema.get()[0], decay * float(ema0) + (1 - decay) * loss, rtol=1e-5)
    # learning off: nothing changes
    leaves = dev(leaves0)
    maxp, last, ema = dev([0.5], np.float32), nanf(1), dev([0.25], np.float32)
    launch(0, leaves, maxp, last, ema)
    np.testing.assert_array_equal(leaves.get(), leaves0)
    assert maxp.get()[0] == np.float32(0.5) and ema.get()[0] == np.float32(0.25)
    assert np.isnan(last.get()[0])


# --------------------------------------------------------------------------------------------
# optim.cu: the global-norm clip fused into AdamW (with the target soft update)
# --------------------------------------------------------------------------------------------
def _run_adamw(P, learn_on, g, parts, adam_t, sched, params, m, v, tgt, opt, max_norm, b1, b2,
               eps, wd, tau, updates, update, bf16_copies=()):
    """adamw_step, or with bf16_copies = (params_bf16, target_bf16) the bf16 mode's
    c51_adamw_step_bf16 (kernels/c51.cu) on the same arguments."""
    kernel = K("c51", "c51_adamw_step_bf16") if bf16_copies else K("optim", "adamw_step")
    kernel(
        (cdiv(P, 256),),
        (256,),
        (
            dev([learn_on], np.int32),
            dev(g),
            dev(parts),
            adam_t,
            dev(sched, np.float32),
            params,
            m,
            v,
            tgt,
            opt,
            *bf16_copies,
            I32(P),
            I32(len(parts)),
            F32(max_norm),
            F64(b1),
            F64(b2),
            F32(eps),
            F32(wd),
            F32(tau),
            I32(updates),
            I32(update),
        ),
    )


@pytest.mark.parametrize("max_norm,updates,update", [(0.5, 1, 0), (1e6, 1, 0), (0.5, 3, 1)])
def test_clip_and_adamw(rng, max_norm, updates, update):
    torch = pytest.importorskip("torch")
    P, gx = 4610, 64
    b1, b2, eps, wd, tau, lr = 0.9, 0.999, 1e-8, 0.01, 0.01, 3e-3
    g = rng.normal(0, 1, P).astype(np.float32)
    parts = np.array([np.sum(g[i : i + gx].astype(np.float64) ** 2) for i in range(0, P, gx)], np.float32)
    t0 = int(rng.integers(0, 50))
    t = t0 + update + 1  # the tick advanced the count by `updates` from t0
    adam_t, opt = dev([t0 + updates], np.int32), nanf(4)
    p0 = rng.normal(0, 1, P).astype(np.float32)
    m0 = rng.normal(0, 0.1, P).astype(np.float32)
    v0 = (rng.normal(0, 0.1, P) ** 2).astype(np.float32)
    tgt0 = rng.normal(0, 1, P).astype(np.float32)
    params, m, v, tgt = dev(p0), dev(m0), dev(v0), dev(tgt0)
    _run_adamw(P, 1, g, parts, adam_t, [0.1, 0.5, lr], params, m, v, tgt, opt, max_norm, b1, b2,
               eps, wd, tau, updates, update)
    o = opt.get()
    assert adam_t.get()[0] == t0 + updates  # read only
    # the norm in the finalize order: lane l sums parts[l::32] in turn, then the pairs
    # (l, l + h) for h = 16 .. 1, all in float32 (bit-identical to the former one-warp node)
    lanes = [np.float32(0)] * 32
    for i, x in enumerate(parts):
        lanes[i % 32] = np.float32(lanes[i % 32] + x)
    h = 16
    while h:
        lanes = [np.float32(lanes[i] + lanes[i + h]) if i < h else lanes[i] for i in range(32)]
        h //= 2
    assert o[3] == np.sqrt(lanes[0])
    norm = math.sqrt(float(parts.astype(np.float64).sum()))
    np.testing.assert_allclose(o[3], norm, rtol=1e-6)
    np.testing.assert_allclose(o[0], min(1.0, max_norm / (norm + 1e-6)), rtol=1e-6)
    np.testing.assert_allclose(o[1:3], [1 - b1**t, 1 - b2**t], rtol=1e-6)
    tg = torch.tensor(g.copy())
    tg.grad = tg.clone()
    torch.nn.utils.clip_grad_norm_([tg], max_norm)
    assert rel_err(g * o[0], tg.grad.numpy()) <= 1e-5

    gs = g.astype(np.float64) * float(o[0])
    b1f, b2f = float(F32(b1)), float(F32(b2))  # the moment updates take float betas
    m_ref = b1f * m0 + (1 - b1f) * gs
    v_ref = b2f * v0 + (1 - b2f) * gs * gs
    p_ref = p0 - lr * (wd * p0 + (m_ref / (1 - b1**t)) / (np.sqrt(v_ref / (1 - b2**t)) + eps))
    tgt_ref = tau * p_ref + (1 - tau) * tgt0
    assert rel_err(m.get(), m_ref) <= 1e-6
    assert rel_err(v.get(), v_ref) <= 1e-6
    assert rel_err(params.get() - p0, p_ref - p0) <= 1e-4
    assert rel_err(tgt.get() - tgt0, tgt_ref - tgt0) <= 1e-4
    # the same step with torch.optim.AdamW
    tp = torch.tensor(p0.copy(), requires_grad=True)
    topt = torch.optim.AdamW([tp], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
    topt.state[tp] = {
        "step": torch.tensor(float(t - 1)),
        "exp_avg": torch.tensor(m0.copy()),
        "exp_avg_sq": torch.tensor(v0.copy()),
    }
    tp.grad = torch.tensor((g * o[0]).astype(np.float32))
    topt.step()
    assert rel_err(params.get() - p0, tp.detach().numpy() - p0) <= 1e-4


def _bf16_bits(torch, x):
    """float32 values rounded to bf16 by torch (round to nearest even), as raw bits."""
    return torch.from_numpy(np.asarray(x, np.float32)).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


# P: whole float4s and a scalar tail; offset: the bf16 copies start `offset` elements into
# their allocations (1: not 8-byte aligned, so every parameter takes the scalar path).
@pytest.mark.parametrize("P,offset,learn_on", [(4610, 0, 1), (4610, 1, 1), (4097, 0, 0)])
def test_adamw_with_bf16_copies(rng, P, offset, learn_on):
    """c51_adamw_step_bf16 gives adamw_step's f32 results bit for bit and their bf16 roundings;
    with learning off it writes nothing, the copies included."""
    torch = pytest.importorskip("torch")
    g = rng.normal(0, 1, P).astype(np.float32)
    parts = np.array([np.sum(g[i : i + 64].astype(np.float64) ** 2) for i in range(0, P, 64)], np.float32)
    p0 = rng.normal(0, 1, P).astype(np.float32)
    m0 = rng.normal(0, 0.1, P).astype(np.float32)
    v0 = (rng.normal(0, 0.1, P) ** 2).astype(np.float32)
    tgt0 = rng.normal(0, 1, P).astype(np.float32)
    runs = []
    for with_copies in (False, True):
        state = [dev(x) for x in (p0, m0, v0, tgt0)] + [dev([9], np.int32), nanf(4)]
        copies = [cp.full(P + offset, 0xFFFF, dtype=cp.uint16) for _ in range(2)]  # NaN bits
        params, m, v, tgt, adam_t, opt = state
        _run_adamw(P, learn_on, g, parts, adam_t, [0.1, 0.5, 3e-3], params, m, v, tgt, opt, 0.5,
                   0.9, 0.999, 1e-8, 0.01, 0.01, 1, 0, tuple(c[offset:] for c in copies) if with_copies else ())
        runs.append(([x.get() for x in (params, m, v, tgt, opt)], [c.get() for c in copies]))
    (plain, _), (fused, copies) = runs
    for a, b in zip(plain, fused):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    assert (copies[0][:offset] == 0xFFFF).all() and (copies[1][:offset] == 0xFFFF).all()
    if learn_on == 0:
        assert (copies[0] == 0xFFFF).all() and (copies[1] == 0xFFFF).all()
        np.testing.assert_array_equal(fused[0], p0)
        return
    assert not np.array_equal(fused[0], p0)
    np.testing.assert_array_equal(copies[0][offset:], _bf16_bits(torch, fused[0]))
    np.testing.assert_array_equal(copies[1][offset:], _bf16_bits(torch, fused[3]))


def test_optim_learning_off(rng):
    P = 1000
    g, p0 = rng.normal(0, 1, P).astype(np.float32), rng.normal(0, 1, P).astype(np.float32)
    adam_t, opt = dev([7], np.int32), nanf(4)
    params, m, v, tgt = dev(p0), dev(p0 * 0.1), dev(p0**2), dev(p0 * 2)
    _run_adamw(P, 0, g, g[:16], adam_t, [0.1, 0.5, 1e-3], params, m, v, tgt, opt, 1.0, 0.9, 0.999,
               1e-8, 0.0, 0.005, 1, 0)
    assert adam_t.get()[0] == 7 and np.all(np.isnan(opt.get()))
    for got, want in ((params, p0), (m, p0 * 0.1), (v, p0**2), (tgt, p0 * 2)):
        np.testing.assert_array_equal(got.get(), want)


def test_mlp_grad_learning_off(rng):
    """(mlp_td_backward's learning-off case is in test_learner_kernels_match_autograd.)"""
    B, H = 64, 32
    inputs = _learner_inputs(rng, B, H)
    grad, part = _run_grad(
        B,
        H,
        (64, 4),
        inputs[2],
        *(dev(np.ones((B, H), np.float32)) for _ in range(4)),
        dev(np.ones((B, 2), np.float32)),
        learn_on=0,
    )
    assert np.all(np.isnan(grad.get())) and np.all(np.isnan(part.get()))


# --------------------------------------------------------------------------------------------
# controllers.cu
# --------------------------------------------------------------------------------------------
def test_lr_plateau(rng):
    check, patience, factor, thr, lr_min = 5, 3, 0.5, 0.01, 1e-4
    lr, best, bad = nanf(1), nanf(1), poisoni(1)
    maxp, ema0 = nanf(1), nanf(1)
    K("controllers", "controllers_init")((1,), (1,), (lr, best, bad, maxp, ema0, F32(1e-2)))
    assert lr.get()[0] == np.float32(1e-2) and best.get()[0] == np.inf and bad.get()[0] == 0
    assert maxp.get()[0] == 1.0 and ema0.get()[0] == 0.0
    r_lr, r_best, r_bad = np.float32(1e-2), np.float32(np.inf), 0
    fn = K("controllers", "lr_plateau")
    drops = 0
    for s in range(1, 400):
        on = int(rng.random() < 0.9)
        ema = np.float32(1.0 + 0.02 * rng.normal()) if s < 200 else np.float32(1.0 / s)
        fn(
            (1,),
            (1,),
            (
                dev([s], np.int32),
                dev([on], np.int32),
                dev([ema], np.float32),
                lr,
                best,
                bad,
                I32(check),
                I32(patience),
                F32(factor),
                F32(thr),
                F32(lr_min),
            ),
        )
        if on and s % check == 0:
            if ema < r_best * (np.float32(1) - np.float32(thr)):
                r_best, r_bad = ema, 0
            else:
                r_bad += 1
            if r_bad >= patience:
                new = max(np.float32(lr_min), r_lr * np.float32(factor))
                drops += new != r_lr
                r_lr, r_bad = new, 0
        assert (lr.get()[0], best.get()[0], bad.get()[0]) == (r_lr, r_best, r_bad), s
    assert drops >= 2


# --------------------------------------------------------------------------------------------
# diagnostics.cu
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("E,R,threads", [(300, 100, 256), (256, 100, 1024), (37, 7, 100), (5, 100, 32)])
def test_episode_stats(rng, E, R, threads):
    ring, count = dev(rng.normal(0, 1, R), np.float32), dev([0], np.int32)  # junk before use
    ring0 = ring.get()
    returns = []
    fn = K("diagnostics", "episode_stats")
    for step in range(40):
        p = [0.02, 0.5, 0.97, 0.0][step % 4]
        done = np.where(rng.random(E) < p, rng.integers(1, 3, E), 0).astype(np.int32)
        info = np.stack([rng.integers(0, 500, E), done], axis=1).astype(np.int32)
        fin = np.where(done != 0, rng.integers(1, 501, E), 0).astype(np.float32)
        mean = nanf(1)
        fn((1,), (threads,), (dev(info), dev(fin), ring, count, mean, I32(E), I32(R)))
        returns.extend(fin[done != 0].tolist())
        want = ring0.copy()
        for k in range(max(0, len(returns) - R), len(returns)):
            want[k % R] = returns[k]
        np.testing.assert_array_equal(ring.get(), want)
        assert count.get()[0] == len(returns)
        last = returns[-R:]
        np.testing.assert_allclose(mean.get()[0], np.mean(last) if last else 0.0, rtol=1e-6)


def test_diag_write():
    diag = nanf(8)
    K("diagnostics", "diag_write")(
        (1,),
        (1,),
        (
            dev([1234], np.int32),
            dev([187.5], np.float32),
            dev([77], np.int32),
            dev([0.25], np.float32),
            dev([0.5], np.float32),
            dev([0.3, 0.7, 2e-3], np.float32),
            dev([4096], np.int32),
            diag,
        ),
    )
    np.testing.assert_array_equal(  # lr: the one the step used, sched[2]
        diag.get(), np.array([1234, 187.5, 77, 0.25, 0.5, 2e-3, 0.3, 4096], np.float32)
    )


# --------------------------------------------------------------------------------------------
# examples: tutorial.cu, reduce.cu
# --------------------------------------------------------------------------------------------
def test_tutorial_kernels(rng):
    n = (1 << 16) + 3
    x = rng.uniform(-1, 1, n).astype(np.float32)
    y, total, steps, diag = nanf(n), dev([0.0], np.float32), dev([0], np.int32), nanf(2)
    K("tutorial", "scale")((cdiv(n, 256),), (256,), (dev(x), y, F32(0.5), I32(n)))
    np.testing.assert_array_equal(y.get(), x * np.float32(0.5))
    for s in (1, 2):
        K("tutorial", "accumulate")((1,), (256,), (y, total, I32(n)))
        K("tutorial", "report")((1,), (32,), (total, steps, diag))
        want = s * float(np.sum(x.astype(np.float64) * 0.5))
        np.testing.assert_allclose(total.get()[0], want, rtol=1e-4, atol=1e-3)
        np.testing.assert_array_equal(diag.get(), [s, total.get()[0]])


def test_reduce_kernels(rng):
    n, blocks, threads = (1 << 20) + 17, 64, 512
    x = rng.uniform(0, 1, n).astype(np.float32)
    partial = cp.full(blocks, np.nan)
    result, readback = cp.full(1, np.nan), cp.full(1, np.nan)
    K("reduce", "reduce")((blocks,), (threads,), (dev(x), partial, I32(n)))
    idx = np.arange(n)
    owner = (idx // threads) % blocks
    want = np.bincount(owner, weights=x.astype(np.float64), minlength=blocks)
    np.testing.assert_allclose(partial.get(), want, rtol=1e-12)
    K("reduce", "reduce_final")((1,), (threads,), (partial, result, I32(blocks)))
    np.testing.assert_allclose(result.get()[0], x.astype(np.float64).sum(), rtol=1e-12)
    K("reduce", "reduce_readback")((1,), (1,), (result, readback))
    assert readback.get()[0] == result.get()[0]
