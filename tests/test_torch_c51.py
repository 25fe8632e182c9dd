"""Tests of the PyTorch C51 twin (bench/torch_c51.py): its projection, loss and priority
errors against the NumPy reference (tests/c51_reference.py), the parameter layout's padding,
and a smoke run of the step it shares with bench/torch_dqn.py."""

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the PyTorch baseline needs torch")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import c51_reference as ref  # noqa: E402 - tests/
import torch_c51 as tc  # noqa: E402 - after the skip, from bench/
from c51_spec import C51Config, outputs, param_slices  # noqa: E402 - from bench/
from baseline_runs import SMALL_C51, best_mean_return, small_config  # noqa: E402 - after the skip


def _small(**overrides):
    return small_config(C51Config, SMALL_C51, **overrides)


def _w3(params, cfg):
    offset, shape = param_slices(cfg)[4]
    return params[offset:offset + shape[0] * shape[1]].view(shape)


def test_projection_matches_reference():
    cfg = C51Config()
    p, ret, disc = ref.projection_case(cfg.atoms)
    z = torch.tensor(ref.support(cfg.atoms, cfg.v_min, cfg.v_max), dtype=torch.float64)
    got = tc.project(torch.tensor(p), torch.tensor(ret), torch.tensor(disc), z, cfg)
    np.testing.assert_allclose(got.numpy(), ref.project(p, ret, disc, cfg.v_min, cfg.v_max), atol=1e-12)


def test_loss_and_priorities_match_reference():
    cfg = _small()
    module = tc.make_trainer(cfg, "cpu").module.double()
    module.target.copy_(module.params + 0.05 * torch.randn_like(module.params))
    gen = torch.Generator().manual_seed(0)
    b = 24
    obs, nxt = torch.randn(b, 4, generator=gen, dtype=torch.float64), torch.randn(b, 4, generator=gen, dtype=torch.float64)
    act = torch.randint(0, 2, (b,), generator=gen)
    ret = torch.rand(b, generator=gen, dtype=torch.float64) * 10
    disc = torch.where(torch.rand(b, generator=gen) < 0.25, 0.0, 0.95).double()
    w = torch.rand(b, generator=gen, dtype=torch.float64) + 0.1
    grad, loss, ce = module.loss_and_grad(obs, act, ret, nxt, disc, w)

    def rows(flat, x):
        return tc.logits(tc.layers(flat, cfg), x, cfg.atoms).reshape(b, -1).numpy()

    _, want_ce, want_l = ref.loss_grad(rows(module.params, obs), rows(module.params, nxt),
                                       rows(module.target, nxt), act.numpy(), ret.numpy(),
                                       disc.numpy(), w.numpy(), cfg.atoms, cfg.v_min, cfg.v_max)
    np.testing.assert_allclose(ce.numpy(), want_ce, rtol=1e-10)
    assert float(loss) == pytest.approx(want_l.mean(), rel=1e-10)
    assert grad.shape == module.params.shape
    assert (_w3(grad, cfg)[2 * cfg.atoms:] == 0).all() and (grad[-(outputs(cfg) - 2 * cfg.atoms):] == 0).all()


def test_padding_rows_start_and_stay_zero():
    cfg = _small()
    trainer = tc.make_trainer(cfg, "cpu")
    m = trainer.module
    params0 = m.params.clone()
    for _ in range(12):
        trainer.step()
    assert int(m.update_count) > 0 and not torch.equal(m.params, params0)
    for flat in (params0, m.params, m.target):
        assert (_w3(flat, cfg)[2 * cfg.atoms:] == 0).all()
        assert (flat[-(outputs(cfg) - 2 * cfg.atoms):] == 0).all()
    d = trainer.diagnostics()
    assert d["step"] == 12 and all(np.isfinite(v) for v in d.values())
    assert torch.isfinite(m.priorities).all()


def test_same_seed_same_run():
    cfg = _small()
    a, b = tc.make_trainer(cfg, "cpu"), tc.make_trainer(cfg, "cpu")
    for _ in range(8):
        a.step()
        b.step()
    for (k, x), y in zip(a.module.named_buffers(), b.module.buffers()):
        assert torch.equal(x, y), k


@pytest.mark.gpu
def test_learns_cartpole_on_the_gpu():
    """docs/c51.md's bar at the default size (HIDDEN 512): mean return of the last 100
    episodes >= 195 within 10 000 steps, seed 1."""
    if not torch.cuda.is_available():
        pytest.skip(f"PyTorch {torch.__version__} sees no CUDA device")
    trainer = tc.make_trainer(C51Config(), "cuda", "cudagraph")
    best = best_mean_return(trainer, 500, 20)
    assert best >= 195, best


def test_bf16_mode_rounds_layers_2_and_3_and_keeps_f32_gradients():
    """--bf16 true: the logits and the gradient stay float32 and the gradient is within bf16's
    rounding of the f32 one (norm-wise 3e-2: bf16's 8-bit significand on the weights and
    activations of two layers, the bound of tests/gpu/test_gemm.py's bf16 backward pass),
    yet differs from it, so the autocast region really runs in bf16."""
    grads = {}
    for bf16 in (False, True):
        cfg = _small(bf16=bf16)
        module = tc.make_trainer(cfg, "cpu").module
        gen = torch.Generator().manual_seed(1)
        b = 24
        obs, nxt = torch.randn(b, 4, generator=gen), torch.randn(b, 4, generator=gen)
        act = torch.randint(0, 2, (b,), generator=gen)
        ret, w = torch.rand(b, generator=gen) * 10, torch.rand(b, generator=gen) + 0.1
        disc = torch.full((b,), 0.95)
        assert tc.logits(tc.layers(module.params, cfg), obs, cfg.atoms, bf16).dtype == torch.float32
        grads[bf16], _, _ = module.loss_and_grad(obs, act, ret, nxt, disc, w)
    assert grads[True].dtype == torch.float32
    err = float((grads[True] - grads[False]).norm() / grads[False].norm())
    assert 0 < err < 3e-2, err
