"""Joint diagonalisation and the mixture preconditioner, each against an independent route:
a known common eigenbasis, the eigendecomposition, a densely assembled operator."""

from __future__ import annotations

import math

import pytest
import torch

from polyinterp.approx import GaussianMixture, SolverPlan, quadratic_approximant
from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.solvers.joint_diagonal import joint_diagonalize, logdet_divergence, off_diagonal_mass
from polyinterp.approx.solvers.mixture_preconditioner import MixturePreconditioner, from_form, second_moments, to_form
from polyinterp.approx.solvers.gram_operator import GramOperator
from polyinterp.approx.fits.quadratic_mixture import standard_gaussian_inverse
from polyinterp.approx.solvers.whitening import whiten_mixture, whitening

from dense_operators import operator_matrix, theta_basis

DT = torch.float64


def _orthogonal(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    q, r = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=DT))
    return q * torch.sign(torch.diagonal(r))


@pytest.mark.parametrize("n,block", [(13, 4), (10, 64), (7, 1)])
def test_joint_diagonalize_recovers_a_common_eigenbasis(n, block):
    """M_k = V diag(λ_k) Vᵀ share V: Jacobi sweeps make every QᵀM_kQ diagonal (any n, any block)."""
    g = torch.Generator().manual_seed(n)
    V = _orthogonal(n, seed=1)
    lam = torch.rand(4, n, generator=g, dtype=DT) * 3 + 0.1
    mats = V @ torch.diag_embed(lam) @ V.T
    w = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=DT)
    Q = joint_diagonalize(mats, w, sweeps=10, block=block)
    torch.testing.assert_close(Q.T @ Q, torch.eye(n, dtype=DT), rtol=0, atol=1e-12)
    assert off_diagonal_mass(mats, w, Q) <= 1e-20 * off_diagonal_mass(mats, w)
    # the diagonal values are the λ_k up to a common permutation of the basis
    D = torch.diagonal(Q.T @ mats @ Q, dim1=1, dim2=2)
    order = torch.argsort(D[0])
    torch.testing.assert_close(D[:, order], lam[:, torch.argsort(lam[0])], rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("n,block", [(13, 4), (10, 64), (7, 1)])
def test_logdet_joint_diagonalize_recovers_a_common_eigenbasis(n, block):
    """The log-det criterion's rotations also find a common eigenbasis (the criterion is 0 there;
    round-off leaves ~1e-16 of it)."""
    g = torch.Generator().manual_seed(n)
    V = _orthogonal(n, seed=1)
    lam = torch.rand(4, n, generator=g, dtype=DT) * 3 + 0.1
    mats = V @ torch.diag_embed(lam) @ V.T
    w = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=DT)
    Q = joint_diagonalize(mats, w, sweeps=20, block=block, criterion="logdet")
    torch.testing.assert_close(Q.T @ Q, torch.eye(n, dtype=DT), rtol=0, atol=1e-12)
    assert off_diagonal_mass(mats, w, Q) <= 1e-12 * off_diagonal_mass(mats, w)
    assert abs(logdet_divergence(mats, w, Q)) <= 1e-12


def test_logdet_rotation_of_a_pair_is_the_brute_force_optimum():
    """n = 2, three classes: one sweep (one rotation) reaches the criterion's minimum over 200 001
    angles; and no rotation at all is chosen when the matrices are already diagonal."""
    g = torch.Generator().manual_seed(5)
    A = torch.randn(3, 2, 2, generator=g, dtype=DT)
    mats = A @ A.transpose(1, 2) + 0.05 * torch.eye(2, dtype=DT)
    w = torch.tensor([0.5, 0.3, 0.2], dtype=DT)
    Q = joint_diagonalize(mats, w, sweeps=1, block=1, criterion="logdet")
    th = torch.linspace(0, math.pi, 200001, dtype=DT)
    c, s = torch.cos(th), torch.sin(th)
    a, b, m = mats[:, 0, 0, None], mats[:, 1, 1, None], mats[:, 0, 1, None]
    lp, lq = c * c * a + 2 * c * s * m + s * s * b, s * s * a - 2 * c * s * m + c * c * b
    brute = (w[:, None] * (lp.log() + lq.log() - torch.logdet(mats)[:, None])).sum(0).min()
    got = logdet_divergence(mats, w, Q)
    assert got <= float(brute) + 1e-12, (got, float(brute))
    assert got >= float(brute) - 1e-9  # the brute force's grid is fine enough to be near the optimum
    D = torch.diag_embed(torch.diagonal(mats, dim1=1, dim2=2))
    torch.testing.assert_close(joint_diagonalize(D, w, sweeps=1, block=1, criterion="logdet"),
                               torch.eye(2, dtype=DT), rtol=0, atol=0)


def test_logdet_sweeps_never_raise_the_criterion_and_refine_a_frobenius_start():
    g = torch.Generator().manual_seed(6)
    A = torch.randn(5, 20, 20, generator=g, dtype=DT)
    mats = A @ A.transpose(1, 2) + 1e-3 * torch.eye(20, dtype=DT)
    w = torch.full((5,), 0.2, dtype=DT)
    values = [logdet_divergence(mats, w, joint_diagonalize(mats, w, sweeps=s, block=3, criterion="logdet"))
              for s in range(4)]
    assert values[0] == pytest.approx(logdet_divergence(mats, w))
    assert all(b <= a + 1e-12 for a, b in zip(values, values[1:])), values
    start = joint_diagonalize(mats, w, sweeps=2, block=3)
    refined = joint_diagonalize(mats, w, sweeps=2, block=3, criterion="logdet", start=start)
    torch.testing.assert_close(refined.T @ refined, torch.eye(20, dtype=DT), rtol=0, atol=1e-12)
    assert logdet_divergence(mats, w, refined) < logdet_divergence(mats, w, start)
    with pytest.raises(ValueError, match="criterion"):
        joint_diagonalize(mats, w, criterion="kl")


def test_logdet_divergence_by_hand_and_its_error_on_an_indefinite_matrix():
    """Two 2 × 2 classes, weights 1/4 and 3/4: [[2, 1], [1, 2]] has log det 3 and diagonal product 4,
    diag(1, 5) contributes 0; so the criterion is log(4/3)/4. An indefinite matrix is named."""
    mats = torch.tensor([[[2.0, 1.0], [1.0, 2.0]], [[1.0, 0.0], [0.0, 5.0]]], dtype=DT)
    w = torch.tensor([0.25, 0.75], dtype=DT)
    assert logdet_divergence(mats, w) == pytest.approx(0.25 * math.log(4 / 3), rel=1e-14)
    bad = mats.clone()
    bad[1, 1, 1] = -1.0
    with pytest.raises(ValueError, match="matrix 1 is not positive definite"):
        logdet_divergence(bad, w)


def test_joint_diagonalize_of_one_matrix_is_its_eigendecomposition():
    g = torch.Generator().manual_seed(3)
    A = torch.randn(9, 9, generator=g, dtype=DT)
    M = (A @ A.T)[None]
    Q = joint_diagonalize(M, torch.ones(1, dtype=DT), sweeps=8, block=2)
    got = torch.sort(torch.diagonal(Q.T @ M[0] @ Q)).values
    torch.testing.assert_close(got, torch.linalg.eigvalsh(M[0]), rtol=1e-10, atol=1e-10)


def test_joint_diagonalize_lowers_the_off_diagonal_mass_every_sweep():
    g = torch.Generator().manual_seed(4)
    A = torch.randn(5, 20, 20, generator=g, dtype=DT)
    mats = A @ A.transpose(1, 2)
    w = torch.full((5,), 0.2, dtype=DT)
    masses = [off_diagonal_mass(mats, w, joint_diagonalize(mats, w, sweeps=s, block=3)) for s in range(4)]
    assert masses[0] == pytest.approx(off_diagonal_mass(mats, w))
    assert all(b <= a * (1 + 1e-12) for a, b in zip(masses, masses[1:])), masses
    assert masses[-1] < 0.8 * masses[0]


def _whitened(d: int, K: int, seed: int) -> GaussianMixture:
    """A heteroscedastic mixture (each component has its own high-variance directions), whitened."""
    g = torch.Generator().manual_seed(seed)
    covs = []
    for k in range(K):
        scales = torch.exp(2 * torch.randn(d, generator=g, dtype=DT))
        V = _orthogonal(d, seed=seed * 10 + k)
        covs.append(V @ torch.diag(scales) @ V.T)
    means = torch.randn(K, d, generator=g, dtype=DT)
    w = torch.rand(K, generator=g, dtype=DT) + 0.3
    mix = GaussianMixture(w / w.sum(), means, torch.stack(covs))
    return whiten_mixture(mix, whitening(mix))


def _basis(mix: GaussianMixture, sweeps: int) -> torch.Tensor:
    return joint_diagonalize(second_moments(mix)[1], mix.weights, sweeps=sweeps, block=2)


def test_preconditioner_equals_the_inverse_of_its_assembled_operator():
    """P⁻¹ by Woodbury vs a dense solve of P = B + Σ_j s_j U_j⟨U_j, ·⟩ on all n × n matrices."""
    mix = _whitened(5, 3, seed=2)
    pc = MixturePreconditioner(mix, _basis(mix, sweeps=3), dtype=None)
    n = pc.n
    QQ = torch.kron(pc.Q, pc.Q)  # vec(Q X̂ Qᵀ) = (Q ⊗ Q) vec(X̂) (row-major vec)
    B = QQ @ torch.diag(pc.D.reshape(-1)) @ QQ.T
    K = mix.K
    signs = torch.cat([torch.ones(K, dtype=DT), torch.tensor([pc.e0_coefficient], dtype=DT)])
    Uv = pc.U.reshape(K + 1, -1)
    P = B + Uv.T @ torch.diag(signs) @ Uv
    g = torch.Generator().manual_seed(0)
    A = torch.randn(2, n, n, generator=g, dtype=DT)
    R = A + A.transpose(1, 2)
    r = (R[:, 0, 0], R[:, 1:, 0], R[:, 1:, 1:])
    want = torch.linalg.solve(P, R.reshape(2, -1).T).T.reshape(2, n, n)
    for x, y in zip(pc(r), from_form(want)):
        torch.testing.assert_close(x, y, rtol=1e-10, atol=1e-12)
    # the Gram operator in the x̃ form (module docstring) is what GramOperator computes
    mt, M = second_moments(mix)
    X = torch.randn(n, n, generator=g, dtype=DT)
    X = X + X.T
    GX = sum(mix.weights[k] * (2 * M[k] @ X @ M[k] + (M[k] * X).sum() * M[k]
                              - 2 * (mt[k] @ X @ mt[k]) * torch.outer(mt[k], mt[k])) for k in range(K))
    theta = from_form(X[None])
    for x, y in zip(GramOperator(mix)(theta), (GX[None, 0, 0], GX[None, 1:, 0], GX[None, 1:, 1:])):
        torch.testing.assert_close(x, y, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(to_form(from_form(X[None]))[0, 1:, 1:], X[1:, 1:])


def test_preconditioner_is_spd_and_lowers_the_condition_number():
    d = 6
    mix = _whitened(d, 3, seed=5)
    basis = theta_basis(d)
    G = operator_matrix(GramOperator(mix), basis)
    conds = {}
    for name, pc in [("moment_matched", standard_gaussian_inverse),
                     ("joint_diagonal", MixturePreconditioner(mix, _basis(mix, sweeps=4), dtype=None))]:
        Pinv = operator_matrix(pc, basis)
        torch.testing.assert_close(Pinv, Pinv.T, rtol=1e-10, atol=1e-12)
        assert float(torch.linalg.eigvalsh(Pinv)[0]) > 0, name
        L = torch.linalg.cholesky(Pinv)
        ev = torch.linalg.eigvalsh(L.T @ G @ L)
        conds[name] = float(ev[-1] / ev[0])
    assert conds["joint_diagonal"] < 0.6 * conds["moment_matched"], conds  # 23 vs 45 here


@pytest.mark.parametrize("sweeps", [0, 2])
def test_both_preconditioners_reach_the_same_solution(random_model, random_mixture, sweeps):
    model = random_model("mlp", 7, 12, 3, seed=31, activation="relu")
    mix = random_mixture(7, 4, seed=32, spread=1.5)
    jd = quadratic_approximant(model, mix, tol=1e-11, preconditioner="joint_diagonal", jd_sweeps=sweeps,
                               inner_dtype=None)
    mm = quadratic_approximant(model, mix, tol=1e-11, preconditioner="moment_matched", inner_dtype=None)
    assert jd.fit_info["converged"] and jd.fit_info["preconditioner"] == "joint_diagonal"
    for x, y in ((jd.alpha, mm.alpha), (jd.beta, mm.beta), (jd.gamma, mm.gamma)):
        torch.testing.assert_close(x, y, rtol=1e-8, atol=1e-9)


def test_unknown_preconditioner_is_named(random_model, random_mixture):
    with pytest.raises(ApproxInputError, match="preconditioner must be"):
        quadratic_approximant(random_model("mlp", 3, 4, 2, seed=1), random_mixture(3, 2, seed=2),
                              preconditioner="jacobi")


@pytest.mark.parametrize("basis", ["newton", "jacobi"])
def test_a_saved_plan_is_reused_and_checked(random_model, random_mixture, basis):
    """A plan built once (and round-tripped through its state dict) gives the same solution as
    building it inside the call (the default, Newton basis); a plan of another mixture is refused with a
    clear error."""
    model = random_model("glu", 5, 8, 2, seed=41, activation="gelu")
    mix = random_mixture(5, 3, seed=42)
    plan = SolverPlan.from_state_dict(SolverPlan.build(mix, sweeps=2, basis=basis).state_dict())
    assert plan.basis_method == basis and (plan.basis_info is not None) == (basis == "newton")
    a = quadratic_approximant(model, mix, tol=1e-11, plan=plan, inner_dtype=None)
    b = quadratic_approximant(model, mix, tol=1e-11, inner_dtype=None)
    assert a.fit_info["converged"] and b.fit_info["basis"] == "newton"
    assert a.fit_info["basis"] == basis and a.fit_info["jd_sweeps"] == (2 if basis == "jacobi" else 0)
    # a plan saved before the Newton basis (no basis_method) is read as Jacobi sweeps, or the identity without sweeps
    if basis == "jacobi":
        old = {k: v for k, v in plan.state_dict().items() if k not in ("basis_method", "basis_info")}
        assert SolverPlan.from_state_dict(old).basis_method == "jacobi"
        assert SolverPlan.from_state_dict({**old, "sweeps": 0}).basis_method == "identity"
    torch.testing.assert_close(a.gamma, b.gamma, rtol=1e-8, atol=1e-9)
    other = random_mixture(5, 3, seed=43)
    with pytest.raises(ApproxInputError, match="another mixture"):
        quadratic_approximant(model, other, plan=plan)
    with pytest.raises(ApproxInputError, match="d = 5"):
        quadratic_approximant(random_model("mlp", 4, 8, 2, seed=1), random_mixture(4, 2, seed=2), plan=plan)


def test_closed_form_corrected_warm_start(random_model, random_mixture):
    """Warm start from the previous model's solution, corrected by the change of the closed form:
    same solution as a cold solve, a smaller starting residual than either plain start, and a clear
    error when the previous model comes without the previous solution."""
    d = 6
    prev = random_model("mlp", d, 12, 3, seed=51)
    mix = random_mixture(d, 4, seed=52, spread=2.0)
    g = torch.Generator().manual_seed(53)
    bump = lambda t: t * (1 + 0.2 * torch.randn(t.shape, generator=g, dtype=DT))  # noqa: E731
    new = type(prev)(bump(prev.W1), prev.b1, bump(prev.W2), prev.b2, "relu")
    old = quadratic_approximant(prev, mix, tol=1e-10, inner_dtype=None)
    cold = quadratic_approximant(new, mix, tol=1e-10, inner_dtype=None)
    plain = quadratic_approximant(new, mix, tol=1e-10, inner_dtype=None, warm_start=old)
    corr = quadratic_approximant(new, mix, tol=1e-10, inner_dtype=None, warm_start=old, warm_start_model=prev)
    assert corr.fit_info["start"] == "warm_start (closed-form corrected)"
    start_residual = {name: r.fit_info["residual_history"][0] for name, r in
                      (("cold", cold), ("plain", plain), ("corrected", corr))}
    assert start_residual["corrected"] < 0.5 * min(start_residual["cold"], start_residual["plain"]), start_residual
    assert corr.fit_info["iterations"] <= cold.fit_info["iterations"]
    torch.testing.assert_close(corr.gamma, cold.gamma, rtol=1e-7, atol=1e-8)
    with pytest.raises(ApproxInputError, match="without warm_start"):
        quadratic_approximant(new, mix, warm_start_model=prev)
