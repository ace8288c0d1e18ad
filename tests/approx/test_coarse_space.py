"""The coarse space of subspace forms W S Wᵀ (``approx/solvers/coarse_space.py``) against brute force: the
Gram operator applied to every coarse basis form one by one, exact orthogonality after ``correct`` and
A-orthogonality after ``project``, a hand-built case for the Ritz subspace, and block PCG with the
coarse space against the direct solve."""

from __future__ import annotations

import pytest
import torch

from polyinterp.approx import GaussianMixture, SolverPlan
from polyinterp.approx.solvers.block_pcg import block_pcg
from polyinterp.approx.solvers.coarse_space import SubspaceDeflation, ritz_subspace
from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.solvers.form_operator import FormGramOperator
from polyinterp.approx.solvers.gram_operator import sym

DT = torch.float64


def _mixture(d: int = 6, K: int = 3, seed: int = 0) -> GaussianMixture:
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(K, d, d, generator=g, dtype=DT)
    covs = A @ A.transpose(1, 2) / d + 0.1 * torch.eye(d, dtype=DT)
    w = torch.rand(K, generator=g, dtype=DT) + 0.5
    return GaussianMixture(w / w.sum(), torch.randn(K, d, generator=g, dtype=DT), covs)


def _forms(o: int, n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return sym(torch.randn(o, n, n, generator=g, dtype=DT))


def _coarse_forms(cs: SubspaceDeflation) -> torch.Tensor:
    """Every basis form of the subspace part, [m, n, n], built from the definition Z_a = W Ẑ_a Wᵀ."""
    p = cs.W.shape[1]
    out = []
    for a, b in zip(cs.ia.tolist(), cs.ib.tolist()):
        S = torch.zeros(p, p, dtype=DT)
        if a == b:
            S[a, a] = 1.0
        else:
            S[a, b] = S[b, a] = 2 ** -0.5
        out.append(cs.W @ S @ cs.W.T)
    return torch.stack(out)


@pytest.mark.parametrize("p,explicit,rows", [(3, 0, 1024), (4, 2, 1024), (5, 1, 4)])
def test_galerkin_matrix_equals_the_operator_on_each_basis_form(p, explicit, rows, monkeypatch):
    """(rows = 4: the Galerkin matrix formed 4 rows at a time, as a large p is at d = 784)"""
    monkeypatch.setattr(SubspaceDeflation, "GALERKIN_ROWS", rows)
    mix = _mixture()
    op = FormGramOperator(mix)
    n = mix.d + 1
    W = torch.randn(n, p, generator=torch.Generator().manual_seed(1), dtype=DT)
    V = (_forms(explicit, n, 2),) if explicit else None
    cs = SubspaceDeflation(op, W, V)
    Z = _coarse_forms(cs)
    if explicit:
        Z = torch.cat([Z, cs.V])
    assert cs.k == Z.shape[0] == p * (p + 1) // 2 + explicit
    AZ = op((Z,))[0]
    brute = Z.reshape(len(Z), -1) @ AZ.reshape(len(Z), -1).T
    E = cs.E_chol @ cs.E_chol.T
    torch.testing.assert_close(E, brute, rtol=0, atol=1e-12 * float(brute.abs().max()))
    # the basis is orthonormal in the Frobenius inner product (the subspace part; V is normalised)
    G = Z.reshape(len(Z), -1) @ Z.reshape(len(Z), -1).T
    torch.testing.assert_close(torch.diagonal(G), torch.ones(len(Z), dtype=DT), rtol=0, atol=1e-12)


def test_correct_and_project_against_the_operator():
    """After ``correct`` the residual is orthogonal to every coarse form and still equals b − A x;
    after ``project`` a direction is A-orthogonal to every coarse form (checked with full products)."""
    mix = _mixture(seed=3)
    op = FormGramOperator(mix)
    n = mix.d + 1
    cs = SubspaceDeflation(op, torch.randn(n, 3, generator=torch.Generator().manual_seed(4), dtype=DT),
                           (_forms(1, n, 5),))
    Z = torch.cat([_coarse_forms(cs), cs.V])
    rhs, x0 = _forms(2, n, 6), _forms(2, n, 7)
    r0 = rhs - op((x0,))[0]
    (x,), (r,) = cs.correct((x0,), (r0,))
    scale = float(r0.abs().max())
    assert float((Z.reshape(len(Z), -1) @ r.reshape(2, -1).T).abs().max()) < 1e-12 * scale
    torch.testing.assert_close(r, rhs - op((x,))[0], rtol=0, atol=1e-12 * scale)
    # the iterate alone (block PCG recomputes the residual): the same x, whose fresh residual is orthogonal too
    (xs,) = cs.correct_solution((x0,), (r0,))
    torch.testing.assert_close(xs, x, rtol=0, atol=1e-14 * float(x.abs().max()))
    assert float((Z.reshape(len(Z), -1) @ (rhs - op((xs,))[0]).reshape(2, -1).T).abs().max()) < 1e-12 * scale
    (z,) = cs.project((rhs,))
    Az = op((z,))[0]
    assert float((Z.reshape(len(Z), -1) @ Az.reshape(2, -1).T).abs().max()) < 1e-12 * float(op((rhs,))[0].abs().max())


def test_an_explicit_vector_inside_the_subspace_is_dropped():
    mix = _mixture(seed=8)
    op = FormGramOperator(mix)
    n = mix.d + 1
    W = torch.linalg.qr(torch.randn(n, 3, generator=torch.Generator().manual_seed(9), dtype=DT))[0]
    inside = W @ sym(torch.randn(3, 3, generator=torch.Generator().manual_seed(10), dtype=DT)) @ W.T
    cs = SubspaceDeflation(op, W, (torch.stack([inside, _forms(1, n, 11)[0]]),))
    assert cs.explicit == 1 and cs.k == 6 + 1  # E stays positive definite (its Cholesky factor exists)


def test_ritz_subspace_spans_the_leading_directions_of_each_form():
    """Forms u uᵀ − 3 v vᵀ + 0.01 t tᵀ (twice, so the second copy adds nothing): rank 2 keeps u and v,
    not t; the extra column is kept; the basis is orthonormal."""
    g = torch.Generator().manual_seed(12)
    n = 9
    u, v, t, e = torch.linalg.qr(torch.randn(n, 4, generator=g, dtype=DT))[0].T
    form = torch.outer(u, u) - 3 * torch.outer(v, v) + 0.01 * torch.outer(t, t)
    W = ritz_subspace(torch.stack([form, 2 * form]), 2, e[:, None])
    assert W.shape == (n, 3)
    torch.testing.assert_close(W.T @ W, torch.eye(3, dtype=DT), rtol=0, atol=1e-12)
    for x, inside in ((u, True), (v, True), (e, True), (t, False)):
        assert float((W.T @ x).norm()) == pytest.approx(1.0 if inside else 0.0, abs=1e-10)


def test_block_pcg_with_the_coarse_space_gives_the_direct_solution():
    """The coarse space changes the path, not the solution: the same residual tolerance as without it, and
    the float64 direct solve of the form equations (the operator assembled densely) to 1e-9."""
    mix = _mixture(d=7, K=4, seed=13)
    op = FormGramOperator(mix)
    n = mix.d + 1
    rhs = _forms(3, n, 14)
    basis = torch.eye(n * n, dtype=DT).reshape(n * n, n, n)
    A = op((basis,))[0].reshape(n * n, -1)  # column j: A applied to the j-th unit (non-symmetric) form
    exact = torch.linalg.lstsq(A, rhs.reshape(3, -1).T).solution.T.reshape(3, n, n)
    exact = sym(exact)
    cs = SubspaceDeflation(op, torch.randn(n, 3, generator=torch.Generator().manual_seed(15), dtype=DT))
    ident = lambda r: r  # noqa: E731
    zero = (torch.zeros_like(rhs),)
    for defl in (None, cs):
        (x,), it, rel, _ = block_pcg(op, op, ident, (rhs,), zero, 1e-12, 500, deflation=defl)
        assert float(rel.max()) <= 1e-12
        torch.testing.assert_close(x, exact, rtol=0, atol=1e-9 * float(exact.abs().max()))


def test_plan_carries_its_coarse_basis(random_mixture):
    mix = random_mixture(8, 3, seed=21, spread=3.0)
    plan = SolverPlan.build(mix, sweeps=2, lanczos_steps=25, coarse_ritz=3, coarse_rank=2)
    W = plan.coarse_basis
    assert W is not None and W.shape[0] == plan.whitening.rank + 1 and W.shape[1] <= 3 * 2 + 1
    assert plan.deflation_info["coarse_dimension"] == W.shape[1]
    torch.testing.assert_close(W.T @ W, torch.eye(W.shape[1], dtype=W.dtype), rtol=0, atol=1e-10)
    again = SolverPlan.from_state_dict(plan.state_dict())
    torch.testing.assert_close(again.coarse_basis, W, rtol=0, atol=0)
    parts = plan.seconds_by_part
    assert list(parts) == ["whitening", "newton", "lanczos", "deflation", "coarse", "coarse_factor"]
    assert min(parts.values()) >= 0 and sum(parts.values()) <= plan.seconds and again.seconds_by_part == parts
    jacobi = SolverPlan.build(mix, sweeps=2, lanczos_steps=25, coarse_ritz=3, coarse_rank=2, basis="jacobi")
    assert list(jacobi.seconds_by_part) == ["whitening", "frobenius_sweeps", "logdet_sweeps", "lanczos", "deflation",
                                            "coarse", "coarse_factor"]
    without = SolverPlan.build(mix, sweeps=2, lanczos_steps=25, coarse_ritz=0)
    assert without.coarse_basis is None and without.coarse_factor is None
    with pytest.raises(ApproxInputError, match="coarse_ritz"):
        SolverPlan.build(mix, sweeps=2, lanczos_steps=25, coarse_ritz=100, coarse_rank=4)
    state = plan.state_dict()
    state["coarse_basis"] = W[:-1]
    with pytest.raises(ApproxInputError, match="coarse basis"):
        SolverPlan.from_state_dict(state)


@pytest.mark.parametrize("explicit", [0, 2])
def test_a_coarse_space_rebuilt_from_its_factor_is_the_same_to_the_bit(explicit):
    """``from_factor`` skips the Galerkin matrix and the Cholesky factor, and gives the same E, the same
    explicit vectors and the same corrections and projections, bit for bit; a factor of another size is
    refused, naming the shapes."""
    mix = _mixture(d=6, K=3, seed=40)
    op = FormGramOperator(mix)
    n = mix.d + 1
    W = torch.randn(n, 3, generator=torch.Generator().manual_seed(41), dtype=DT)
    cs = SubspaceDeflation(op, W, (_forms(explicit, n, 42),) if explicit else None, product_dtype=torch.float32)
    again = SubspaceDeflation.from_factor(op, _saved_and_loaded(cs.factor()), product_dtype=torch.float32)
    assert (again.m, again.k, again.explicit) == (cs.m, cs.k, cs.explicit) == (6, 6 + explicit, explicit)
    for name in ("E_chol", "W", "B", "Bw", "Bw_lo", "N", "nu"):
        assert torch.equal(getattr(again, name), getattr(cs, name)), name
    x, r, z = _forms(2, n, 43), _forms(2, n, 44), _forms(2, n, 45)
    for u, v in zip(cs.correct((x,), (r,)) + cs.project((z.float(),)),
                    again.correct((x,), (r,)) + again.project((z.float(),))):
        assert torch.equal(u[0] if isinstance(u, tuple) else u, v[0] if isinstance(v, tuple) else v)
    with pytest.raises(ApproxInputError, match=r"expected W \[6, p\]"):
        SubspaceDeflation.from_factor(FormGramOperator(_mixture(d=5, K=3, seed=40)), cs.factor())
    with pytest.raises(ApproxInputError, match="lacks"):
        SubspaceDeflation.from_factor(op, {k: v for k, v in cs.factor().items() if k != "E_chol"})


def _saved_and_loaded(obj):
    """``obj`` written with torch.save and read back (weights only), as a plan file is."""
    import io

    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def test_a_plan_with_its_coarse_factor_gives_the_fit_of_a_plan_without(random_model, random_mixture):
    """The plan factors its coarse space once; a fit with that plan, saved and loaded, is the same to the
    bit as a fit with the same plan less its factor (which factors it in the fit). A factor that does not
    match the plan's coarse basis is refused on load."""
    from polyinterp.approx import quadratic_approximant

    mix, model = random_mixture(10, 3, seed=46, spread=2.0), random_model("mlp", 10, 12, 2, 1)
    plan = SolverPlan.build(mix, sweeps=2, lanczos_steps=30, coarse_ritz=3, coarse_rank=2)
    assert plan.coarse_factor is not None and plan.coarse_factor["W"].shape == plan.coarse_basis.shape
    loaded = SolverPlan.from_state_dict(_saved_and_loaded(plan.state_dict()))
    # a plan saved before the factor existed has no such key: each fit factors the coarse space
    bare = SolverPlan.from_state_dict(_saved_and_loaded({k: v for k, v in plan.state_dict().items()
                                                         if k != "coarse_factor"}))
    assert bare.coarse_factor is None
    for inner in ("float64", "bfloat16"):
        a, b = (quadratic_approximant(model, mix, tol=1e-10, max_iter=500, plan=p, inner_dtype=inner)
                for p in (loaded, bare))
        assert a.fit_info["iterations"] == b.fit_info["iterations"] > 0
        assert a.fit_info["coarse_dimension"] == b.fit_info["coarse_dimension"] > 0
        for name in ("alpha", "beta", "gamma"):
            assert torch.equal(getattr(a, name), getattr(b, name)), (inner, name)
    state = plan.state_dict()
    state["coarse_factor"] = {**state["coarse_factor"], "W": state["coarse_factor"]["W"][:, :-1]}
    with pytest.raises(ApproxInputError, match="coarse-space factor with W"):
        SolverPlan.from_state_dict(state)
    # a coarse basis changed after the plan was built no longer matches the factor: refused, not ignored
    changed = SolverPlan.from_state_dict(plan.state_dict())
    changed.coarse_basis = torch.linalg.qr(changed.coarse_basis + 0.1 * torch.randn(
        changed.coarse_basis.shape, generator=torch.Generator().manual_seed(47), dtype=DT))[0]
    with pytest.raises(ApproxInputError, match="coarse_factor = None"):
        quadratic_approximant(model, mix, tol=1e-8, plan=changed)
    changed.coarse_factor = None
    assert quadratic_approximant(model, mix, tol=1e-8, plan=changed).fit_info["converged"]
    # cast to float32, the plan drops its factor (a rounded factor would not deflate its space exactly)
    assert plan.to(dtype=torch.float32).coarse_factor is None and plan.to(dtype=DT).coarse_factor is not None


def test_a_coarse_space_of_the_whole_problem_solves_it_on_a_true_residual():
    """W = I (every form is coarse): the start's coarse correction is the solution; its residual update ran
    in float32, so the solver confirms it with a float64 residual (0 iterations, 2 true residuals)."""
    mix = _mixture(d=5, K=3, seed=16)
    op = FormGramOperator(mix)
    n = mix.d + 1
    rhs = _forms(2, n, 17)
    cs = SubspaceDeflation(op, torch.eye(n, dtype=DT), product_dtype=torch.float32)
    (x,), it, rel, info = block_pcg(op, op, lambda r: r, (rhs,), (torch.zeros_like(rhs),), 1e-11, 50, deflation=cs)
    assert it == 0 and info["true_residuals"] == 2
    true = (rhs - op((x,))[0]).flatten(1).norm(dim=1) / rhs.flatten(1).norm(dim=1)
    assert float(rel.max()) <= 1e-11 and float(true.max()) <= 1e-11
    torch.testing.assert_close(rel, true, rtol=1e-10, atol=1e-16)


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"))]


@pytest.mark.parametrize("device", DEVICES)
def test_plan_and_solve_with_a_coarse_space_on_the_device(device, random_model, random_mixture):
    """The plan built on the device has its coarse space there, and the solve on the device with float32
    and bfloat16 products (tensor cores on a GPU) takes the coarse-space path and meets the float64
    tolerance: the solution equals the CPU's all-float64 solution without a coarse space."""
    from polyinterp.approx import quadratic_approximant

    mix, model = random_mixture(12, 3, seed=31, spread=2.0), random_model("mlp", 12, 16, 2, 0)
    ref = quadratic_approximant(model, mix, tol=1e-12, max_iter=2000, inner_dtype="float64",
                                plan=SolverPlan.build(mix, sweeps=2, lanczos_steps=30, coarse_ritz=0))
    dmix, dmodel = mix.to(device), model.to(device)
    plan = SolverPlan.build(dmix, sweeps=2, lanczos_steps=30, coarse_ritz=3, coarse_rank=2)
    p = plan.coarse_basis.shape[1]
    assert plan.coarse_basis.device.type == device and 1 < p <= 7
    for inner in ("float32", "bfloat16"):
        q = quadratic_approximant(dmodel, dmix, tol=1e-11, max_iter=2000, plan=plan, inner_dtype=inner)
        info = q.fit_info
        assert info["converged"] and info["inner_dtype"] == inner and info["iterations"] > 0, info
        assert info["coarse_dimension"] == p * (p + 1) // 2 and q.gamma.device.type == device
        # the time by part: each part timed once the device finished it, disjoint, within the whole
        parts = info["seconds_by_part"]
        assert min(parts.values()) >= 0 and parts["coarse_setup"] <= parts["setup"]
        assert sum(v for k, v in parts.items() if k != "coarse_setup") <= info["seconds"]
        for got, want in zip((q.alpha, q.beta, q.gamma), (ref.alpha, ref.beta, ref.gamma)):
            torch.testing.assert_close(got.cpu(), want, rtol=0, atol=1e-8 * float(want.abs().max()))


def test_project_of_float32_directions_matches_float64():
    """Block PCG with float32 search directions projects them in float32: the same projection as in float64
    to float32 round-off, returned in float32, and A-orthogonal to every coarse form (subspace part and
    explicit vectors) to that round-off, checked with float64 products; the float64 path is unchanged."""
    mix = _mixture(seed=23)
    op = FormGramOperator(mix)
    n = mix.d + 1
    cs = SubspaceDeflation(op, torch.randn(n, 3, generator=torch.Generator().manual_seed(24), dtype=DT),
                           (_forms(2, n, 25),), product_dtype=torch.float32)
    Z = torch.cat([_coarse_forms(cs), cs.V])
    rhs = _forms(3, n, 26)
    (z64,) = cs.project((rhs,))
    (z32,) = cs.project((rhs.float(),))
    assert z64.dtype == DT and z32.dtype == torch.float32
    scale = float(z64.abs().max())
    torch.testing.assert_close(z32.double(), z64, rtol=0, atol=1e-5 * scale)
    assert float((z32.double() - z64).abs().max()) > 0  # it did run in float32
    Az = op((z32.double(),))[0]
    orth = float((Z.reshape(len(Z), -1) @ Az.reshape(3, -1).T).abs().max())
    assert orth < 1e-5 * float(op((rhs,))[0].abs().max())
    (again,) = cs.project((rhs.float(),))  # the float32 copies are kept, not rebuilt differently
    torch.testing.assert_close(again, z32, rtol=0, atol=0)


def _pcg_problem(seed: int = 31):
    """A d = 7, K = 4 mixture's form operator, 3 symmetric right-hand sides (seed + 1) and their solution
    by a dense least-squares solve of the assembled operator (the independent route)."""
    mix = _mixture(d=7, K=4, seed=seed)
    op = FormGramOperator(mix)
    n = mix.d + 1
    rhs = _forms(3, n, seed + 1)
    basis = torch.eye(n * n, dtype=DT).reshape(n * n, n, n)
    A = op((basis,))[0].reshape(n * n, -1)
    exact = sym(torch.linalg.lstsq(A, rhs.reshape(3, -1).T).solution.T.reshape(3, n, n))
    return mix, op, n, rhs, exact


def test_block_pcg_with_float32_directions_gives_the_direct_solution():
    """float32 search directions (with float32 products inside the iteration) change neither the solution
    (an exactly symmetric iterate: the operator cannot see an antisymmetric part, so one left by float32
    round-off would never be removed) nor, on this problem, the iteration count by more than half (their
    round-off costs a few iterations at tol 1e-10: 55 against 58 and 54 against 55 measured with two
    orders of summation): the float64 residuals decide convergence; the iterate and residual stay float64,
    and the operator inside the iteration, the preconditioner and the projection see float32 states only."""
    mix, op, n, rhs, exact = _pcg_problem(seed=27)
    lo = op.to(torch.float32)
    seen = []

    def op_lo(state):
        seen.append(("op_lo", state[0].dtype))
        return lo((state[0].float(),))

    def precond(state):
        seen.append(("precond", state[0].dtype))
        return state

    results = {}
    for ddt in (None, torch.float32):
        cs = SubspaceDeflation(op, torch.randn(n, 3, generator=torch.Generator().manual_seed(29), dtype=DT),
                               product_dtype=torch.float32)
        project = cs.project
        cs.project = lambda Z: (seen.append(("project", Z[0].dtype)), project(Z))[1]  # noqa: E731
        seen.clear()
        (x,), it, rel, info = block_pcg(op, op_lo, precond, (rhs,), (torch.zeros_like(rhs),), 1e-10, 500,
                                        deflation=cs, replace_factor=1e-4, direction_dtype=ddt)
        assert x.dtype == DT and float(rel.max()) <= 1e-10
        # exactly symmetric up to the recombinations' round-off (without the fix: 3e-8 of the largest entry)
        torch.testing.assert_close(x, x.transpose(1, 2), rtol=0, atol=1e-12 * float(x.abs().max()))
        torch.testing.assert_close(x, exact, rtol=0, atol=1e-8 * float(exact.abs().max()))
        want = DT if ddt is None else torch.float32
        assert {dt for name, dt in seen} == {want}
        results[ddt] = it
    assert results[torch.float32] <= 1.5 * results[None], results


def test_anchored_updates_with_exact_products_are_the_float64_residuals():
    """An update anchored at the last float64 pair, R_t − A(X − X_t), is rhs − A X up to round-off; with
    float64 products for ``op_mid`` block PCG reaches the same solution in the same number of iterations as
    with float64 residuals (to the one or two that the round-off of its float32 inner products decides:
    47 against 46 measured), and counts the intermediate updates as anchored, not as float64 residuals."""
    mix, op, n, rhs, exact = _pcg_problem()
    lo = op.to(torch.float32)
    op_lo = lambda s: lo((s[0].float(),))  # noqa: E731
    runs = {}
    for name, mid in (("float64", None), ("anchored", op)):
        cs = SubspaceDeflation(op, torch.randn(n, 3, generator=torch.Generator().manual_seed(33), dtype=DT),
                               product_dtype=torch.float32)
        (x,), it, rel, info = block_pcg(op, op_lo, lambda r: r, (rhs,), (torch.zeros_like(rhs),), 1e-10, 500,
                                        deflation=cs, replace_factor=0.1, direction_dtype=torch.float32,
                                        op_mid=mid)
        assert float(rel.max()) <= 1e-10
        runs[name] = (x, it, info)
    (x64, it64, info64), (xa, ita, infoa) = runs["float64"], runs["anchored"]
    assert abs(ita - it64) <= 2, (ita, it64)
    assert info64["anchored_residuals"] == 0 and infoa["anchored_residuals"] > 0
    assert infoa["true_residuals"] < info64["true_residuals"]
    torch.testing.assert_close(xa, x64, rtol=0, atol=1e-9 * float(exact.abs().max()))


def test_bfloat16_products_with_float32_anchored_updates_reach_the_direct_solution():
    """bfloat16 products inside the iteration (the recursive residual drifts within a decade), float32
    products for the updates anchored at the last float64 residual: the solution is the direct one, the
    tolerance holds on a float64 residual recomputed here, and fewer float64 residuals were taken than
    with float64 replacements (measured: 85 iterations either way, 15 float64 residuals against 10 and 3
    anchored updates; most of the rest are stall restarts, which stay float64)."""
    mix, op, n, rhs, exact = _pcg_problem(seed=41)
    lo = op.to(torch.float32, product_dtype=torch.bfloat16)
    mid = op.to(torch.float32)
    op_lo = lambda s: lo((s[0].float(),))  # noqa: E731
    op_mid = lambda s: mid((s[0].float(),))  # noqa: E731
    tol = 1e-9
    runs = {}
    for name, m in (("float64", None), ("anchored", op_mid)):
        cs = SubspaceDeflation(op, torch.randn(n, 3, generator=torch.Generator().manual_seed(43), dtype=DT),
                               product_dtype=torch.float32)
        (x,), it, rel, info = block_pcg(op, op_lo, lambda r: r, (rhs,), (torch.zeros_like(rhs),), tol, 2000,
                                        deflation=cs, replace_factor=0.1, direction_dtype=torch.float32,
                                        op_mid=m)
        runs[name] = info
        # independent of the solver's bookkeeping: the residual recomputed in float64
        r = rhs - op((x,))[0]
        assert float((r.flatten(1).norm(dim=1) / rhs.flatten(1).norm(dim=1)).max()) <= tol
        torch.testing.assert_close(x, exact, rtol=0, atol=1e-6 * float(exact.abs().max()))
    assert runs["anchored"]["anchored_residuals"] > 0
    assert runs["anchored"]["true_residuals"] < runs["float64"]["true_residuals"], runs
