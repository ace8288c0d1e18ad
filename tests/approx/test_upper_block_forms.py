"""The SGD fit's forms held by their upper block triangle: the quadratic, the full matrices' gradient at the
held entries, and the forms mirrored back, against the full matrices (einsum and autograd)."""

from __future__ import annotations

import pytest
import torch

from polyinterp.approx.core.blocks import block_edges
from polyinterp.approx.fits.upper_block_forms import UpperBlockForms

DT = torch.float64


def _symmetric_forms(o, d, seed):
    g = torch.Generator().manual_seed(seed)
    P = torch.randn(o, d, d, generator=g, dtype=DT)
    return 0.5 * (P + P.transpose(1, 2))


def test_block_edges_cut_evenly_and_cover_the_range():
    assert block_edges(7, 2) == [0, 2, 4, 5, 7]
    assert block_edges(784, 56) == list(range(0, 785, 56))
    assert block_edges(5, 64) == [0, 5]
    for d in range(1, 40):
        for block in (1, 3, 8, 50):
            e = block_edges(d, block)
            sizes = [b - a for a, b in zip(e[:-1], e[1:])]
            assert e[0] == 0 and e[-1] == d and min(sizes) >= 1 and max(sizes) <= block
            assert max(sizes) - min(sizes) <= 1
    with pytest.raises(ValueError, match="block must be >= 1"):
        block_edges(5, 0)


@pytest.mark.parametrize("block", [1, 2, 3, 7, 64])
def test_quadratic_gradient_and_gamma_match_the_full_matrices(block):
    """d = 7 in blocks of 1, 2 (sizes 2, 2, 1, 2: uneven), 3, 7 and 64 (one block). The quadratic equals
    xᵀG_kx by einsum; each held entry's gradient equals autograd's gradient of Σ r·xᵀGx with respect to
    that entry of the full matrices G (which is not the derivative by the held entry: twice that above
    the diagonal blocks); the forms come back whole."""
    o, d, n = 3, 7, 50
    G = _symmetric_forms(o, d, seed=1)
    g = torch.Generator().manual_seed(2)
    x = torch.randn(n, d, generator=g, dtype=DT)
    r = torch.randn(n, o, generator=g, dtype=DT)
    forms = UpperBlockForms(G, block)
    assert len(forms.parameters) == len(block_edges(d, block)) - 1

    full = torch.einsum("ni,kij,nj->nk", x, G, x)
    torch.testing.assert_close(forms.quadratic(x), full, rtol=1e-13, atol=1e-13)

    Gf = G.clone().requires_grad_(True)
    (r * torch.einsum("ni,kij,nj->nk", x, Gf, x)).sum().backward()
    forms.set_grad(r, x)
    for (lo, hi), C in zip(forms.spans, forms.parameters):
        want = Gf.grad[:, :hi, lo:hi].permute(1, 0, 2).reshape(hi, -1)
        torch.testing.assert_close(C.grad, want, rtol=1e-13, atol=1e-13)

    assert torch.equal(forms.gamma(), G)


def test_an_sgd_step_on_the_held_entries_is_the_step_on_the_full_matrices():
    """One plain SGD step on the held entries lands where the step on the full matrices does (their
    gradient is symmetric, so they stay symmetric); the quadratic after it agrees."""
    o, d, n, lr = 2, 9, 40, 0.1
    G = _symmetric_forms(o, d, seed=3)
    g = torch.Generator().manual_seed(4)
    x = torch.randn(n, d, generator=g, dtype=DT)
    target = torch.randn(n, o, generator=g, dtype=DT)
    forms = UpperBlockForms(G, 4)
    diff = forms.quadratic(x) - target
    forms.set_grad(2 * diff / diff.numel(), x)
    torch.optim.SGD(forms.parameters, lr=lr).step()

    Gf = G.clone().requires_grad_(True)
    ((torch.einsum("ni,kij,nj->nk", x, Gf, x) - target) ** 2).mean().backward()
    with torch.no_grad():
        Gf -= lr * Gf.grad
    torch.testing.assert_close(forms.gamma(), Gf.detach(), rtol=1e-13, atol=1e-13)
    assert not torch.allclose(forms.gamma(), G, atol=1e-3)  # it moved


def test_bfloat16_products_round_their_inputs_and_results():
    """product_dtype=bfloat16: the quadratic and the gradients differ from the float32 ones (both the
    quadratic and each gradient go through bfloat16) and lie within bfloat16's rounding of them (8 bits:
    ≈ 0.4 % an input), returned in float32."""
    o, d, n = 3, 20, 64
    G = _symmetric_forms(o, d, seed=5).float()
    g = torch.Generator().manual_seed(6)
    x = torch.randn(n, d, generator=g)
    r = torch.randn(n, o, generator=g)
    forms = UpperBlockForms(G, 6)
    q32, q16 = forms.quadratic(x), forms.quadratic(x, torch.bfloat16)
    assert q16.dtype == torch.float32 and not torch.equal(q16, q32)
    assert float((q16 - q32).abs().max()) < 0.02 * float(q32.abs().max())
    forms.set_grad(r, x)
    g32 = [C.grad for C in forms.parameters]
    forms.set_grad(r, x, torch.bfloat16)
    for a, b in zip(g32, [C.grad for C in forms.parameters]):
        assert b.dtype == torch.float32 and not torch.equal(a, b)
        assert float((a - b).abs().max()) < 0.02 * float(a.abs().max())


def test_in_one_block_bfloat16_is_the_full_matrices_product_and_gradient():
    """One block holds the full matrices side by side: the quadratic and the gradient in bfloat16 are then
    the full product (x·F in bfloat16, its result widened) and autograd's gradient of it, the same
    operations on the same numbers, to the bit: the bfloat16 path rounds what the full matrices' did."""
    o, d, n = 2, 10, 32
    G = _symmetric_forms(o, d, seed=7).float()
    g = torch.Generator().manual_seed(8)
    x = torch.randn(n, d, generator=g)
    r = torch.randn(n, o, generator=g)
    forms = UpperBlockForms(G, d)
    F = G.permute(1, 0, 2).reshape(d, o * d).clone().requires_grad_(True)
    full = ((x.to(torch.bfloat16) @ F.to(torch.bfloat16)).float().view(n, o, d) * x[:, None, :]).sum(-1)
    (r * full).sum().backward()
    assert torch.equal(forms.quadratic(x, torch.bfloat16), full.detach())
    forms.set_grad(r, x, torch.bfloat16)
    assert torch.equal(forms.parameters[0].grad, F.grad)


def test_the_forms_stay_symmetric_after_a_bfloat16_step():
    """In bfloat16 the diagonal blocks' gradients are rounded entry by entry, so the held diagonal blocks
    drift from symmetry; the forms returned are exactly symmetric all the same."""
    o, d, n = 2, 12, 48
    forms = UpperBlockForms(_symmetric_forms(o, d, seed=9).float(), 5)
    g = torch.Generator().manual_seed(10)
    x, r = torch.randn(n, d, generator=g), torch.randn(n, o, generator=g)
    forms.set_grad(r, x, torch.bfloat16)
    torch.optim.SGD(forms.parameters, lr=0.5).step()
    lo, hi = forms.spans[0]
    held = forms.parameters[0].view(hi, o, hi - lo).permute(1, 0, 2)  # the first diagonal block, as held
    assert not torch.equal(held, held.transpose(1, 2))  # the premise: the step left it unsymmetric
    G = forms.gamma()
    assert torch.equal(G, G.transpose(1, 2))


def test_non_square_forms_are_refused():
    with pytest.raises(ValueError, match=r"gamma must be \[o, d, d\], got \[2, 3, 4\]"):
        UpperBlockForms(torch.zeros(2, 3, 4), 2)
