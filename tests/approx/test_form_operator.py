"""The form-space Gram operator and the preconditioner in its own basis (what the exact solver iterates
on), each against the coefficient-space route it replaces: GramOperator, MixturePreconditioner, rotated."""

from __future__ import annotations

import pytest
import torch

from polyinterp.approx.core.approximant import Approximant
from polyinterp.approx.solvers.form_operator import FormGramOperator, affine_map, form_to_theta, rotate, theta_to_form
from polyinterp.approx.solvers.gram_operator import GramOperator
from polyinterp.approx.solvers.joint_diagonal import joint_diagonalize
from polyinterp.approx.core.mixture import GaussianMixture
from polyinterp.approx.solvers.mixture_preconditioner import MixturePreconditioner, second_moments, to_form
from polyinterp.approx.solvers.whitening import whiten_mixture, whitening

DT = torch.float64


def _whitened(d: int, K: int, seed: int) -> GaussianMixture:
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(K, d, d, generator=g, dtype=DT)
    covs = A @ A.transpose(1, 2) / d + 0.1 * torch.eye(d, dtype=DT)
    w = torch.rand(K, generator=g, dtype=DT) + 0.2
    mix = GaussianMixture(w / w.sum(), 2 * torch.randn(K, d, generator=g, dtype=DT), covs)
    return whiten_mixture(mix, whitening(mix))


def _theta(o: int, d: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    G = torch.randn(o, d, d, generator=g, dtype=DT)
    return (torch.randn(o, generator=g, dtype=DT), torch.randn(o, d, generator=g, dtype=DT),
            G + G.transpose(1, 2))


def _basis(mix: GaussianMixture) -> torch.Tensor:
    return joint_diagonalize(second_moments(mix)[1], mix.weights, sweeps=3, block=2)


def test_form_and_coefficients_round_trip_and_evaluate_the_same_quadratic():
    a, b, G = _theta(3, 5, seed=1)
    X = theta_to_form((a, b, G))
    for x, y in zip(form_to_theta(X), (a, b, G)):
        torch.testing.assert_close(x, y, rtol=0, atol=0)
    x = torch.randn(7, 5, dtype=DT, generator=torch.Generator().manual_seed(2))
    xt = torch.cat([torch.ones(7, 1, dtype=DT), x], 1)
    want = a[None] + x @ b.T + torch.einsum("ni,oij,nj->no", x, G, x)
    torch.testing.assert_close(torch.einsum("ni,oij,nj->no", xt, X, xt), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("d, d2", [(5, 5), (5, 3), (3, 5)])
def test_affine_map_composes_a_form_as_the_quadratic_composed_at_points(d, d2):
    """The form TᵀJ(θ)T of the map T = affine_map(M, shift) takes at x' the value of g at shift + M x' (direct
    evaluation), and is the form of Approximant.compose; a rotation after it is the one sandwich by T Q."""
    g = torch.Generator().manual_seed(5)
    a, b, G = _theta(3, d, seed=6)
    M, shift = torch.randn(d, d2, generator=g, dtype=DT), torch.randn(d, generator=g, dtype=DT)
    T = affine_map(M, shift)
    X = rotate(theta_to_form((a, b, G)), T)
    xp = torch.randn(9, d2, generator=g, dtype=DT)
    x = shift + xp @ M.T
    want = a[None] + x @ b.T + torch.einsum("ni,oij,nj->no", x, G, x)
    xt = torch.cat([torch.ones(9, 1, dtype=DT), xp], 1)
    torch.testing.assert_close(torch.einsum("ni,oij,nj->no", xt, X, xt), want, rtol=1e-12, atol=1e-12)
    c = Approximant(a, b, G, {}).compose(M, shift)
    for got, ref in zip(form_to_theta(X), (c.alpha, c.beta, c.gamma)):
        torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-12)
    Q = torch.linalg.qr(torch.randn(d2 + 1, d2 + 1, generator=g, dtype=DT))[0]
    torch.testing.assert_close(rotate(theta_to_form((a, b, G)), T @ Q), rotate(X, Q), rtol=1e-12, atol=1e-12)
    # and back: a form in the basis Q, rotated back by Q and composed with x' = shift + M x'', is one sandwich
    # by Qᵀ T (the exact fit's way back to the original coordinates)
    Xq = rotate(X, Q)
    M2, shift2 = torch.randn(d2, d, generator=g, dtype=DT), torch.randn(d2, generator=g, dtype=DT)
    back = Approximant(*form_to_theta(rotate(Xq, Q.T)), {}).compose(M2, shift2)
    for got, ref in zip(form_to_theta(rotate(Xq, Q.T @ affine_map(M2, shift2))), (back.alpha, back.beta, back.gamma)):
        torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-12)  # measured: ≤ 2.1e-14 on entries up to 97


@pytest.mark.parametrize("rotated", [False, True])
def test_form_gram_operator_is_the_gram_operator_in_form_space(rotated):
    """G(QᵀJ(θ)Q) = Qᵀ T(GramOperator(θ)) Q: the same normal equations, any orthogonal basis."""
    mix = _whitened(6, 3, seed=3)
    Q = _basis(mix) if rotated else torch.eye(7, dtype=DT)
    theta = _theta(4, 6, seed=4)
    (got,) = FormGramOperator(mix, Q)((rotate(theta_to_form(theta), Q),))
    want = rotate(to_form(GramOperator(mix)(theta)), Q)
    torch.testing.assert_close(got, want, rtol=1e-11, atol=1e-11)


def test_form_gram_operator_in_lower_precision_is_close_and_symmetric():
    mix = _whitened(6, 3, seed=5)
    Q = _basis(mix)
    X = rotate(theta_to_form(_theta(2, 6, seed=6)), Q)
    op = FormGramOperator(mix, Q)
    (hi,) = op((X,))
    (lo,) = op.to(torch.float32, product_dtype=torch.float32)((X.float(),))
    assert lo.dtype == torch.float32
    torch.testing.assert_close(lo, lo.transpose(1, 2), rtol=0, atol=0)
    assert float((lo.double() - hi).norm() / hi.norm()) < 2e-6  # float32 round-off: 1e-7 to 2e-7 here


def test_the_preconditioner_in_its_basis_is_the_preconditioner_rotated():
    """BasisPreconditioner(QᵀT(r)Q) = Qᵀ J(MixturePreconditioner(r)) Q, and it is symmetric in the
    Frobenius inner product (⟨Y, P⁻¹X⟩ = ⟨X, P⁻¹Y⟩)."""
    mix = _whitened(5, 4, seed=7)
    Q = _basis(mix)
    pc = MixturePreconditioner(mix, Q, dtype=None)
    r = _theta(3, 5, seed=8)
    (got,) = pc.in_basis()((rotate(to_form(r), Q),))
    want = rotate(theta_to_form(pc(r)), Q)
    torch.testing.assert_close(got, want, rtol=1e-11, atol=1e-11)
    X, Y = (rotate(theta_to_form(_theta(1, 5, seed=s)), Q) for s in (9, 10))
    (PX,), (PY,) = pc.in_basis()((X,)), pc.in_basis()((Y,))
    assert float((Y * PX).sum()) == pytest.approx(float((X * PY).sum()), rel=1e-12)


def test_the_preconditioner_from_rotated_moments_is_the_rotated_preconditioner():
    """BasisPreconditioner.from_moments (what the solver builds: no n³ product) maps every form as
    MixturePreconditioner(r) rotated into the basis does (a residual built in coefficient space)."""
    from polyinterp.approx.solvers.mixture_preconditioner import BasisPreconditioner

    mix = _whitened(6, 3, seed=11)
    Q = _basis(mix)
    pc = MixturePreconditioner(mix, Q, dtype=None)
    fast = BasisPreconditioner.from_moments(FormGramOperator(mix, Q).M, mix.weights, Q[0])
    r = _theta(4, 6, seed=12)
    (got,) = fast((rotate(to_form(r), Q),))
    want = rotate(theta_to_form(pc(r)), Q)
    torch.testing.assert_close(got, want, rtol=1e-11, atol=1e-11 * float(want.abs().max()))


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=CUDA)])
@pytest.mark.parametrize("p", [32, 96, 200, 800])
def test_sandwich_sum_on_blocks_equals_the_direct_sum(p, device):
    """Σ_k c_k M_k X M_k from the upper blocks and their mirror images equals the two full products per
    component (one block at p = 32, several above; the last block shorter at p = 200, 800), on each device."""
    from polyinterp.approx.solvers.form_operator import BLOCKS, PAD, _block_starts, sandwich_sum

    g = torch.Generator().manual_seed(p)
    K, o = 3, 2
    A = torch.randn(K, p, p, generator=g, dtype=DT)
    M = A @ A.transpose(1, 2) / p
    X = torch.randn(o, p, p, generator=g, dtype=DT)
    X = X + X.transpose(1, 2)
    c = torch.rand(K, generator=g, dtype=DT)
    want = sum(c[k] * M[k] @ X @ M[k] for k in range(K))
    got = sandwich_sum(M.to(device), X.to(device), c.to(device), DT).cpu()
    starts = _block_starts(p)
    assert (len(starts) > 1) == (p > PAD) and len(starts) <= BLOCKS and all(s % PAD == 0 for s in starts)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12 * float(want.abs().max()))
    for s in starts[1:]:  # below the block diagonal: exact transposes of the blocks above it
        torch.testing.assert_close(got[:, s:, :s], got[:, :s, s:].transpose(1, 2), rtol=0, atol=0)


def test_form_gram_operator_over_several_blocks_is_the_gram_operator():
    """d = 70 (forms padded to 96 rows, three blocks): the same normal equations as in coefficients, and a
    form that is not symmetric acts as its symmetric part."""
    mix = _whitened(70, 3, seed=8)
    Q = _basis(mix)
    theta = _theta(3, 70, seed=9)
    X = rotate(theta_to_form(theta), Q)
    op = FormGramOperator(mix, Q)
    (got,) = op((X,))
    want = rotate(to_form(GramOperator(mix)(theta)), Q)
    torch.testing.assert_close(got, want, rtol=1e-11, atol=1e-11 * float(want.abs().max()))
    skew = torch.randn(X.shape, dtype=DT, generator=torch.Generator().manual_seed(10))
    (with_skew,) = op((X + skew - skew.transpose(1, 2),))
    torch.testing.assert_close(with_skew, got, rtol=1e-12, atol=1e-12 * float(got.abs().max()))
