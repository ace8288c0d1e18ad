"""Deflation of isolated eigenvalues and mixed-precision block PCG, against independent routes: an
operator with a known eigendecomposition, a direct solve, the float64 solution."""

from __future__ import annotations

import pytest
import torch

from polyinterp.approx import SolverPlan, quadratic_approximant
from polyinterp.approx.solvers.block_pcg import block_pcg
from polyinterp.approx.solvers.deflation import Deflation, LanczosRun, outlier_eigenvectors
from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.solvers.gram_operator import GramOperator, block_inner, inner, sym
from polyinterp.approx.solvers.form_operator import theta_to_form
from polyinterp.approx.solvers.mixture_preconditioner import MixturePreconditioner

from dense_operators import combine, operator_matrix, theta_basis

DT = torch.float64
D = 6


def _diagonal_operator(seed: int = 0):
    """θ ↦ (λ_α α, λ_β ⊙ β, Λ ⊙ Γ) with Λ symmetric: self-adjoint in the Frobenius inner product, its
    eigenvectors are the unit coordinate directions. Spectrum: a cluster in [1, 2] plus an isolated
    0.01 (the α direction) and 50 (β₂)."""
    g = torch.Generator().manual_seed(seed)
    lam_a = torch.tensor(0.01, dtype=DT)
    lam_b = 1 + torch.rand(D, generator=g, dtype=DT)
    lam_b[2] = 50.0
    L = 1 + torch.rand(D, D, generator=g, dtype=DT)
    L = sym(L)
    op = lambda th: (lam_a * th[0], lam_b * th[1], L * th[2])  # noqa: E731
    inv = lambda th: (th[0] / lam_a, th[1] / lam_b, th[2] / L)  # noqa: E731
    return op, inv


def _unit(part: int, index) -> tuple:
    th = (torch.zeros(1, dtype=DT), torch.zeros(1, D, dtype=DT), torch.zeros(1, D, D, dtype=DT))
    th[part][(0, *index)] = 1.0
    return th


def test_lanczos_finds_exactly_the_isolated_eigenvectors():
    op, _ = _diagonal_operator()
    info = {}
    W = outlier_eigenvectors(op, lambda r: r, D, steps=14, info=info)
    assert W[0].shape[0] == 2, info
    # the span of W is the span of the two isolated eigenvectors: projecting them onto W loses nothing
    for e in (_unit(0, ()), _unit(1, (2,))):
        c = block_inner(W, e)[:, 0]
        assert float(c.square().sum()) == pytest.approx(1.0, abs=1e-8)
    # and W is orthonormal
    torch.testing.assert_close(block_inner(W, W), torch.eye(2, dtype=DT), rtol=0, atol=1e-10)


def test_lanczos_takes_nothing_from_a_spectrum_without_outliers():
    op = lambda th: (1.5 * th[0], (1 + torch.linspace(0, 1, D, dtype=DT)) * th[1], 1.3 * th[2])  # noqa: E731
    W = outlier_eigenvectors(op, lambda r: r, D, steps=10)
    assert W[0].shape[0] == 0


def test_deflated_block_pcg_gives_the_direct_solution_in_fewer_iterations():
    op, inv = _diagonal_operator()
    g = torch.Generator().manual_seed(5)
    rhs = (torch.randn(3, generator=g, dtype=DT), torch.randn(3, D, generator=g, dtype=DT),
           sym(torch.randn(3, D, D, generator=g, dtype=DT)))
    exact = inv(rhs)
    zero = tuple(torch.zeros_like(t) for t in rhs)
    ident = lambda r: r  # noqa: E731
    plain = block_pcg(op, op, ident, rhs, zero, 1e-12, 200)
    W = outlier_eigenvectors(op, ident, D, steps=14)
    defl = block_pcg(op, op, ident, rhs, zero, 1e-12, 200, deflation=Deflation(W, op))
    for x, it, rel, _ in (plain, defl):
        assert float(rel.max()) <= 1e-12
        for a, b in zip(x, exact):
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10)
    assert defl[1] < plain[1], (defl[1], plain[1])


@pytest.mark.parametrize("anchored", [False, True])
def test_block_pcg_updates_in_place_only_its_own_states(anchored):
    """The iteration updates its iterate and residual in place: the states it was given (start, its residual,
    the right-hand side) come back unchanged, with an identity preconditioner (which returns the residual
    itself) and with anchored updates (whose anchor must stay as it was), and the solution is the direct one."""
    op, inv = _diagonal_operator()
    g = torch.Generator().manual_seed(6)
    rhs = (torch.randn(3, generator=g, dtype=DT), torch.randn(3, D, generator=g, dtype=DT),
           sym(torch.randn(3, D, D, generator=g, dtype=DT)))
    x0 = tuple(0.1 * torch.randn(t.shape, generator=g, dtype=DT) for t in rhs)
    x0 = (x0[0], x0[1], sym(x0[2]))
    r0 = tuple(b - a for a, b in zip(op(x0), rhs))
    given = [tuple(t.clone() for t in s) for s in (rhs, x0, r0)]
    ident = lambda r: r  # noqa: E731
    x, it, rel, info = block_pcg(op, op, ident, rhs, x0, 1e-12, 200, r0=r0, replace_factor=0.1,
                                 op_mid=op if anchored else None)
    for state, before in zip((rhs, x0, r0), given):
        for t, t0 in zip(state, before):
            assert torch.equal(t, t0)
    assert float(rel.max()) <= 1e-12
    assert info["anchored_residuals" if anchored else "true_residuals"] >= 2
    for a, b in zip(x, inv(rhs)):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10)


def test_deflation_correct_and_project():
    """After ``correct`` the residual is orthogonal to W and x + Δx, r − AΔx stay consistent; after
    ``project`` a direction is A-orthogonal to W."""
    op, _ = _diagonal_operator()
    g = torch.Generator().manual_seed(6)
    W = tuple(t[:2] for t in (torch.randn(3, generator=g, dtype=DT), torch.randn(3, D, generator=g, dtype=DT),
                              sym(torch.randn(3, D, D, generator=g, dtype=DT))))
    defl = Deflation(W, op)
    rhs = (torch.randn(2, generator=g, dtype=DT), torch.randn(2, D, generator=g, dtype=DT),
           sym(torch.randn(2, D, D, generator=g, dtype=DT)))
    x = tuple(torch.zeros_like(t) for t in rhs)
    x2, r2 = defl.correct(x, rhs)
    assert float(block_inner(W, r2).abs().max()) < 1e-12
    true = tuple(b - a for b, a in zip(rhs, op(x2)))
    for a, b in zip(r2, true):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    for a, b in zip(defl.correct_solution(x, rhs), x2):  # the iterate alone
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12 * float(b.abs().max()))
    z = defl.project(rhs)
    assert float(block_inner(W, op(z)).abs().max()) < 1e-12


def _true_relative_residuals(plan, mix) -> list[float]:
    """‖B v − λ v‖ / |λ| for every deflation vector v (unit norm) of ``plan``, B = P·A in float64
    (the test's own operators, independent of the float32 ones the plan was built with)."""
    W = plan.deflation
    wmix = plan.whiten(mix)
    op, P = GramOperator(wmix), MixturePreconditioner(wmix, plan.basis, dtype=DT)
    out = []
    for i in range(W[0].shape[0]):
        v = tuple(t[i:i + 1] for t in W)
        assert float(inner(v, v)) == pytest.approx(1.0, abs=1e-10)
        Mv = P(op(v))
        lam = float(inner(v, Mv))
        res = tuple(a - lam * b for a, b in zip(Mv, v))
        out.append(float(inner(res, res).sqrt()) / abs(lam))
    return out


@pytest.mark.parametrize("d,K,seed,spread", [(8, 3, 21, 3.0), (8, 3, 3, 3.0), (10, 4, 4, 2.0), (6, 2, 5, 3.0),
                                             (12, 3, 6, 3.0)])
def test_plan_deflates_eigenvectors_of_the_preconditioned_operator(random_mixture, d, K, seed, spread):
    mix = random_mixture(d, K, seed=seed, spread=spread)
    plan = SolverPlan.build(mix, sweeps=2, lanczos_steps=25)
    W, info = plan.deflation, plan.deflation_info
    # every kept vector is an eigenvector (the criterion the plan promises), whatever the round-off
    assert all(r <= 0.05 for r in _true_relative_residuals(plan, mix))
    assert info["kept"] == W[0].shape[0] and info["kept"] + info["rejected"] == info["candidates"]
    assert len(info["candidate_residuals"]) == info["candidates"]
    # the deflation travels with the plan, and a mismatched one is refused
    again = SolverPlan.from_state_dict(plan.state_dict())
    assert again.deflation_info == info
    for a, b in zip(again.deflation, W):
        torch.testing.assert_close(a, b)
    if W[0].shape[0]:
        state = plan.state_dict()
        state["deflation"] = tuple(t[..., :-1] if t.dim() > 1 else t for t in W)
        with pytest.raises(ApproxInputError, match="deflation"):
            SolverPlan.from_state_dict(state)


def _dense_preconditioned_eigenpairs(wmix, basis):
    """Eigenvalues of B = P·A (float64 coefficient operators, ascending), from B as a dense matrix in an
    orthonormal basis of θ, and the lowest eigenvalue's eigenvector as a block (α [1], β [1, d], Γ [1, d, d])."""
    op, P = GramOperator(wmix), MixturePreconditioner(wmix, basis, dtype=DT)
    E = theta_basis(wmix.d)
    lam, V = torch.linalg.eig(operator_matrix(lambda th: P(op(th)), E))
    order = lam.real.argsort()
    return lam.real[order], combine(E, V[:, order[0]].real)


@pytest.mark.parametrize("d,K,seed,spread", [(8, 3, 3, 3.0), (10, 4, 4, 2.0), (6, 2, 5, 3.0)])
def test_plan_ritz_values_are_eigenvalues_of_the_preconditioned_operator(random_mixture, d, K, seed, spread):
    """The plan's Lanczos run iterates on forms in its basis. Its candidates' Ritz values must be eigenvalues
    of the preconditioned operator in coefficients (dense, float64: another representation and route; 1e-3
    relative, well inside what the acceptance rule allows), the vectors it keeps must be eigenvectors in
    coefficients (a wrong conversion back from forms keeps none), and the coarse basis, from the lowest Ritz
    form's two leading directions and the constant, must hold the second leading direction of the lowest
    dense eigenvector's form (its first is the constant, always in the basis; a rotation of the Ritz forms
    the wrong way round misses the second)."""
    mix = random_mixture(d, K, seed=seed, spread=spread)
    plan = SolverPlan.build(mix, sweeps=2, lanczos_steps=25, coarse_ritz=1, coarse_rank=2)
    info = plan.deflation_info
    assert info["candidates"] >= 1 and info["kept"] >= 1, info
    assert all(r <= 0.05 for r in _true_relative_residuals(plan, mix))
    lam, vec = _dense_preconditioned_eigenpairs(plan.whiten(mix), plan.basis)
    for theta in info["candidate_ritz_values"]:
        assert float((lam - theta).abs().min()) <= 1e-3 * abs(theta), (theta, lam)
    ev, U = torch.linalg.eigh(theta_to_form(vec)[0])
    second = U[:, ev.abs().argsort(descending=True)[1]]
    assert float(second[0].abs()) < 0.5  # not the constant direction
    assert float((plan.coarse_basis.T @ second).norm()) >= 0.99


def test_plan_of_an_mnist_mixture_keeps_only_eigenvectors(mnist_wheel):
    """The real MNIST class mixture at d = 49 (7×7 pooling, the smoke config's), default ridge."""
    from polyinterp.mnist.data import load_wheel
    from polyinterp.mnist.mixture import fit_mixture
    from polyinterp.mnist.preprocess import apply_preprocess, make_preprocess
    from polyinterp.approx import GaussianMixture

    data = load_wheel(mnist_wheel)
    spec = make_preprocess(data.train_images, 4, False)
    x = apply_preprocess(data.train_images, spec, dtype=DT)
    m = fit_mixture(x, torch.as_tensor(data.train_labels), 1e-2)
    mix = GaussianMixture(m["weights"], m["means"], m["covs"])
    plan = SolverPlan.build(mix, sweeps=2, lanczos_steps=60)
    assert plan.deflation[0].shape[0] >= 1, plan.deflation_info
    assert all(r <= 0.05 for r in _true_relative_residuals(plan, mix)), plan.deflation_info


class _LowPrecisionLanczos:
    """The diagonal operator with relative noise 1e-2 on every product during the first ``steps``
    calls (the Lanczos run: round-off far beyond float32's, so its residual estimates are wrong) and
    exact products afterwards (the check)."""

    def __init__(self, seed: int, steps: int):
        self.op, _ = _diagonal_operator(seed)
        self.g = torch.Generator().manual_seed(100 + seed)
        self.calls, self.steps = 0, steps

    def __call__(self, th):
        self.calls += 1
        out = self.op(th)
        if self.calls > self.steps:
            return out
        return tuple(t * (1 + 1e-2 * torch.randn(t.shape, generator=self.g, dtype=DT)) for t in out)


def test_a_converged_ghost_copy_is_merged_with_its_original():
    """Lanczos's loss of orthogonality can leave two converged copies of one eigenvalue that agree only
    to their error bounds (seen on the MNIST mixture: 0.003441795 and 0.003441821, estimates 1.7e-3 and
    3.3e-2): they are one eigenvalue, which stays isolated and is deflated. A run built by hand on the
    diagonal operator (Ritz vectors = its eigenvectors): α (0.01) twice, three unconverged Ritz values of
    the cluster, β₂ (50)."""
    op, _ = _diagonal_operator()
    vectors = [_unit(0, ()), _unit(0, ()), _unit(2, (0, 1)), _unit(2, (2, 3)), _unit(2, (4, 5)), _unit(1, (2,))]
    basis = tuple(torch.cat([v[c] for v in vectors]) for c in range(3))
    theta = torch.tensor([0.01, 0.01 * (1 + 8e-6), 1.2, 1.5, 1.8, 50.0], dtype=DT)
    estimates = torch.tensor([1.7e-3, 3.3e-2, 0.4, 0.4, 0.4, 1e-9], dtype=DT)
    run = LanczosRun(theta, torch.eye(6, dtype=DT), basis, estimates, 6)
    info: dict = {}
    W = outlier_eigenvectors(op, lambda r: r, D, run=run, info=info)
    assert info["candidate_ritz_values"] == pytest.approx([0.01, 50.0]) and info["kept"] == 2
    assert float(W[0][0].abs()) == pytest.approx(1.0) and float(W[1][1, 2].abs()) == pytest.approx(1.0)
    # converged values 5e-4 apart: more than the product of their estimates (5.6e-5), less than the smaller
    # one (1.7e-3), so they stay two eigenvalues and the lower is not isolated
    close = LanczosRun(torch.tensor([0.01, 0.01 * (1 + 5e-4), 1.2, 1.5, 1.8, 50.0], dtype=DT), torch.eye(6, dtype=DT),
                       basis, estimates, 6)
    info = {}
    outlier_eigenvectors(op, lambda r: r, D, run=close, info=info)
    assert info["candidate_ritz_values"] == pytest.approx([50.0])
    with pytest.raises(ApproxInputError, match="run="):
        outlier_eigenvectors(op, lambda r: r, D, steps=5, convert=lambda v: v)


def test_candidates_whose_true_residual_is_large_are_rejected():
    rejected = 0
    for seed in range(4):
        op = _LowPrecisionLanczos(seed, steps=14)
        info = {}
        W = outlier_eigenvectors(op, lambda r: r, D, steps=14, info=info)
        rejected += info["rejected"]
        exact, _ = _diagonal_operator(seed)
        for i in range(W[0].shape[0]):
            v = tuple(t[i:i + 1] for t in W)
            Av = exact(v)
            lam = float(inner(v, Av))
            res = tuple(a - lam * b for a, b in zip(Av, v))
            assert float(inner(res, res).sqrt()) <= 0.05 * abs(lam)
    # the noisy Lanczos run proposes Ritz pairs that its own estimate calls converged but are not
    assert rejected >= 1


def test_bfloat16_inner_products_still_reach_a_float64_tolerance(random_model, random_mixture):
    d = 7
    model = random_model("mlp", d, 16, 3, seed=8)
    mix = random_mixture(d, 4, seed=9, spread=2.0)
    ref = quadratic_approximant(model, mix, tol=1e-11, inner_dtype=None)
    bf = quadratic_approximant(model, mix, tol=1e-9, inner_dtype=torch.bfloat16)
    assert bf.fit_info["converged"] and bf.fit_info["residual"] <= 1e-9
    assert bf.fit_info["inner_dtype"] == "bfloat16"
    for a, b in ((bf.alpha, ref.alpha), (bf.beta, ref.beta), (bf.gamma, ref.gamma)):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
    # the bfloat16 product itself is only good to ~1e-2: the accuracy comes from the float64 residuals
    g = torch.Generator().manual_seed(3)
    th = (torch.randn(2, generator=g, dtype=DT), torch.randn(2, d, generator=g, dtype=DT),
          sym(torch.randn(2, d, d, generator=g, dtype=DT)))
    exact = GramOperator(mix)(th)
    low = GramOperator(mix.to(dtype=torch.float32), product_dtype=torch.bfloat16)(tuple(t.float() for t in th))
    err = float(sum(((a.double() - b) ** 2).sum() for a, b in zip(low, exact)).sqrt())
    size = float(sum((b ** 2).sum() for b in exact).sqrt())
    assert 1e-6 < err / size < 3e-2  # far above float32's ~1e-7, whichever bf16 kernel the CPU has


def test_unknown_inner_dtype_is_refused(random_model, random_mixture):
    model = random_model("mlp", 4, 5, 2, seed=1)
    mix = random_mixture(4, 2, seed=2)
    with pytest.raises(ApproxInputError, match="inner_dtype"):
        quadratic_approximant(model, mix, inner_dtype=torch.int32)
    with pytest.raises(ApproxInputError, match="float16"):
        quadratic_approximant(model, mix, inner_dtype="float16")
    # the config's names are accepted: "float64" is the all-float64 solve
    assert quadratic_approximant(model, mix, inner_dtype="float64").fit_info["inner_dtype"] == "float64"
