"""``Approximant.__call__(quad_dtype=…)``: the quadratic form in a lower precision, the rest unchanged."""

from __future__ import annotations

import math

import pytest
import torch

from polyinterp.approx import Approximant, GaussianMixture, fvu, kl_divergence, quadratic_approximant

DT = torch.float64


def _approximant(o: int, d: int, seed: int, alpha_scale: float = 1.0) -> Approximant:
    g = torch.Generator().manual_seed(seed)
    G = torch.randn(o, d, d, generator=g, dtype=DT) / d
    return Approximant(alpha_scale * torch.randn(o, generator=g, dtype=DT), torch.randn(o, d, generator=g, dtype=DT),
                       G + G.transpose(1, 2))


def test_default_is_the_float64_route():
    ap = _approximant(3, 12, 0)
    x = torch.randn(50, 12, generator=torch.Generator().manual_seed(1), dtype=DT)
    assert torch.equal(ap(x, quad_dtype=DT), ap(x))
    assert torch.equal(ap(x, chunk_size=7, quad_dtype=None), ap(x, chunk_size=7))


def test_float32_form_keeps_alpha_beta_in_float64():
    ap = _approximant(3, 12, 2, alpha_scale=1e8)  # α + βx would lose digits in float32
    x = torch.randn(200, 12, generator=torch.Generator().manual_seed(3), dtype=DT)
    zero = Approximant(ap.alpha, ap.beta, torch.zeros_like(ap.gamma))
    assert torch.equal(zero(x, quad_dtype=torch.float32), zero(x))  # the form is exactly 0 in any dtype
    lin = Approximant(ap.alpha, ap.beta)
    assert torch.equal(lin(x, quad_dtype=torch.float32), lin(x))  # linear: nothing to lower
    out, ref = ap(x, quad_dtype=torch.float32, chunk_size=33), ap(x)
    assert out.dtype == DT
    quad = ref - zero(x)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-5 * float(quad.abs().max()))
    torch.testing.assert_close(ap(x[0], quad_dtype=torch.float32), out[0])


def _fidelity_change(random_model, d: int, h: int, n: int) -> dict[str, float]:
    """Relative change of FVU and KL when the fitted quadratic's form is float32: a random ReLU MLP
    d → h → 10 and its exact quadratic approximant under a Gaussian, on n samples of it."""
    g = torch.Generator().manual_seed(0)
    A = torch.randn(d, d, generator=g, dtype=DT) / math.sqrt(d)
    mix = GaussianMixture.single(0.3 * torch.randn(d, generator=g, dtype=DT), A @ A.T + 0.1 * torch.eye(d, dtype=DT))
    mlp = random_model("mlp", d, h, 10, seed=1)
    quad = quadratic_approximant(mlp, mix)
    x = mix.sample(n, seed=2)
    f = mlp(x)
    g64, g32 = quad(x), quad(x, quad_dtype=torch.float32)
    assert 1e-3 < fvu(f, g64) < 1  # a fit worth reporting, not noise
    return {name: abs(metric(f, g32) / metric(f, g64) - 1) for name, metric in (("fvu", fvu), ("kl", kl_divergence))}


def test_float32_form_moves_fvu_and_kl_by_less_than_1e6(random_model):
    for name, change in _fidelity_change(random_model, d=64, h=64, n=4000).items():
        assert change < 1e-6, name


@pytest.mark.slow
def test_float32_form_moves_fvu_and_kl_by_less_than_1e6_at_mnist_scale(random_model):
    for name, change in _fidelity_change(random_model, d=784, h=256, n=20000).items():
        assert change < 1e-6, name


def _form_case(d: int, seed: int, o: int = 3):
    """A random approximant with a non-symmetric Γ, 77 inputs, the plain contraction α + βx + Σᵢⱼ Γᵢⱼ xᵢ xⱼ
    on them and its largest magnitude."""
    g = torch.Generator().manual_seed(seed)
    ap = Approximant(torch.randn(o, generator=g, dtype=DT), torch.randn(o, d, generator=g, dtype=DT),
                     torch.randn(o, d, d, generator=g, dtype=DT) / d)
    x = torch.randn(77, d, generator=g, dtype=DT)
    want = ap.alpha + x @ ap.beta.T + torch.einsum("oij,ni,nj->no", ap.gamma, x, x)
    return ap, x, want, float(want.abs().max())


@pytest.mark.parametrize("d", [5, 128, 129, 300])
def test_block_triangle_form_equals_the_full_contraction(d):
    """g(x) by the quadratic form's upper block triangle (blocks of ≤ 128 inputs) against the plain
    contraction α + βx + Σᵢⱼ Γᵢⱼ xᵢ xⱼ, for a non-symmetric Γ (the form sees its symmetric part), one
    block or several, chunked or not, in float64 and float32."""
    ap, x, want, scale = _form_case(d, seed=d)
    torch.testing.assert_close(ap(x), want, rtol=0, atol=1e-13 * scale)
    torch.testing.assert_close(ap(x, chunk_size=10), want, rtol=0, atol=1e-13 * scale)
    torch.testing.assert_close(ap(x[3]), want[3], rtol=0, atol=1e-13 * scale)
    torch.testing.assert_close(ap(x, quad_dtype=torch.float32), want, rtol=0, atol=1e-6 * scale)


@pytest.mark.parametrize("d", [5, 129])
def test_form_in_cache_sized_rows_equals_the_full_contraction(d, monkeypatch):
    """With the rows of a block row's product cut to 7 at a time (the cache budget lowered to 7 rows' worth),
    77 rows in chunks of 30 (sub-blocks of 7, 7, 7, 7, 2, and 7, 7, 3 in the last) or in one chunk give the
    plain contraction, in float64 and float32, for one block or two."""
    import polyinterp.approx.core.approximant as approximant

    ap, x, want, scale = _form_case(d, seed=10 + d)
    for dtype, atol in ((DT, 1e-13), (torch.float32, 1e-6)):
        monkeypatch.setattr(approximant, "_QUAD_ROWS_BYTES", 7 * dtype.itemsize * ap.o * d)
        torch.testing.assert_close(ap(x, chunk_size=30, quad_dtype=dtype), want, rtol=0, atol=atol * scale)
        torch.testing.assert_close(ap(x, quad_dtype=dtype), want, rtol=0, atol=atol * scale)
