"""The exact mixture quadratic on the real MNIST class mixture at d = 49 (7×7 pooling) for ridges
1e-2, 1e-3 and 1e-4 × the mean within-class variance: the block-PCG solution against a float64
direct solve of the densely assembled normal equations (whitened coordinates, where they are
best conditioned), with float64 and with float32 inner products; and independence from the thread
count and from the hooks run between iterations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from polyinterp.approx import MLP, GaussianMixture, SolverPlan, quadratic_approximant
from polyinterp.approx.solvers.gram_operator import GramOperator
from polyinterp.approx.moments.monomial_rhs import monomial_rhs

DT = torch.float64
RIDGES = (1e-2, 1e-3, 1e-4)


@pytest.fixture(scope="module")
def pooled(mnist_wheel):
    from polyinterp.mnist.data import load_wheel
    from polyinterp.mnist.preprocess import apply_preprocess, make_preprocess

    data = load_wheel(mnist_wheel)
    spec = make_preprocess(data.train_images, 4, False)
    return apply_preprocess(data.train_images, spec, dtype=DT), torch.as_tensor(data.train_labels)


def _mixture(pooled, ridge) -> GaussianMixture:
    from polyinterp.mnist.mixture import fit_mixture

    x, labels = pooled
    m = fit_mixture(x, labels, ridge)
    return GaussianMixture(m["weights"], m["means"], m["covs"])


def _model(d: int) -> MLP:
    g = torch.Generator().manual_seed(3)
    r = lambda *s: torch.randn(*s, generator=g, dtype=DT)  # noqa: E731
    return MLP(r(32, d) / d**0.5 * 4, 0.3 * r(32), r(10, 32) / 32**0.5, r(10), "relu")


def _unit_quadratics(d: int):
    """Every basis quadratic (α; β_i; x_i x_j for i ≤ j) as one block of N = 1 + d + d(d+1)/2 outputs."""
    iu, ju = np.triu_indices(d)
    n = 1 + d + len(iu)
    a, b, G = torch.zeros(n, dtype=DT), torch.zeros(n, d, dtype=DT), torch.zeros(n, d, d, dtype=DT)
    a[0] = 1
    b[1 + np.arange(d), np.arange(d)] = 1
    rows = 1 + d + np.arange(len(iu))
    G[rows, iu, ju] += 0.5
    G[rows, ju, iu] += 0.5
    return (a, b, G), iu, ju


def _coordinates(theta, iu, ju) -> torch.Tensor:
    """(α, β, Γ) per output → coefficients on the unit quadratics (x_i x_j, i < j, gets 2 Γ_ij)."""
    a, b, G = theta
    scale = torch.where(torch.as_tensor(iu == ju), 1.0, 2.0).to(DT)
    return torch.cat([a[:, None], b, G[:, iu, ju] * scale], 1)


def _moments(r, iu, ju) -> torch.Tensor:
    """(E[h], E[h x], E[h x xᵀ]) per output → E[h φ] for the features φ = (1, x, x_i x_j for i ≤ j)."""
    return torch.cat([r[0][:, None], r[1], r[2][:, iu, ju]], 1)


def _direct_whitened(model, mix, plan):
    """The float64 direct solution of E[φ φᵀ] c = E[f φ] in the plan's whitened coordinates."""
    wmix = plan.whiten(mix)
    W = plan.whitening
    units, iu, ju = _unit_quadratics(wmix.d)
    gram = _moments(GramOperator(wmix)(units), iu, ju)  # row p: E[φ_p φ]
    gram = 0.5 * (gram + gram.T)
    rhs = _moments(monomial_rhs(model.affine(W.M, W.shift), wmix), iu, ju)
    return torch.linalg.solve(gram, rhs.T).T, iu, ju  # [o, N]


def _pcg_whitened(quad, plan, iu, ju):
    W = plan.whitening
    q = quad.quadratic().compose(W.M, W.shift)
    return _coordinates((q.alpha, q.beta, q.gamma), iu, ju)


@pytest.mark.parametrize("ridge", RIDGES)
@pytest.mark.parametrize("inner", ["float64", "float32"])
@pytest.mark.parametrize("basis,logdet_sweeps,coarse_ritz", [("jacobi", 0, 0), ("jacobi", 3, 0), ("jacobi", 3, 6),
                                                         ("newton", 0, 0), ("newton", 0, 6)])
def test_pcg_equals_the_direct_solve_at_every_ridge(pooled, ridge, inner, basis, logdet_sweeps, coarse_ritz):
    """Every basis of the plan (Jacobi: Frobenius sweeps only, or followed by log-det sweeps; the Newton
    steps on the log-det criterion), with and without a coarse space (on ≤ 19 of the 50 directions, so
    that PCG still has work to do)."""
    mix = _mixture(pooled, ridge)
    plan = SolverPlan.build(mix, sweeps=2, lanczos_steps=60, logdet_sweeps=logdet_sweeps, coarse_ritz=coarse_ritz,
                            coarse_rank=3, basis=basis)
    assert plan.basis_method == basis and plan.logdet_sweeps == logdet_sweeps
    assert (plan.coarse_basis is None) == (coarse_ritz == 0)
    model = _model(mix.d)
    direct, iu, ju = _direct_whitened(model, mix, plan)
    quad = quadratic_approximant(model, mix, tol=1e-12, max_iter=2000, plan=plan, inner_dtype=inner)
    assert quad.fit_info["converged"], quad.fit_info
    got = _pcg_whitened(quad, plan, iu, ju)
    err = float((got - direct).abs().max() / direct.abs().max())
    assert err <= 1e-8, (ridge, inner, basis, logdet_sweeps, coarse_ritz, err, quad.fit_info["iterations"])
    if coarse_ritz:
        assert quad.fit_info["coarse_dimension"] == plan.coarse_basis.shape[1] * (plan.coarse_basis.shape[1] + 1) // 2


def test_solution_does_not_depend_on_threads(pooled):
    """Thread counts 1 and 2 give the same solution to the solve's own accuracy: parallel reductions
    round differently with another thread count, so agreement is to round-off, not bit for bit
    (whitened coordinates, relative to the largest coefficient; tol 1e-12)."""
    mix = _mixture(pooled, 1e-3)
    plan = SolverPlan.build(mix, sweeps=2, lanczos_steps=60, coarse_ritz=6, coarse_rank=3)
    model = _model(mix.d)
    _, iu, ju = _unit_quadratics(mix.d)
    before = torch.get_num_threads()
    out = {}
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            out[threads] = quadratic_approximant(model, mix, tol=1e-12, max_iter=2000, plan=plan, inner_dtype="float64")
    finally:
        torch.set_num_threads(before)
    ref = _pcg_whitened(out[1], plan, iu, ju)
    diff = float((_pcg_whitened(out[2], plan, iu, ju) - ref).abs().max() / ref.abs().max())
    assert diff <= 1e-12, diff
