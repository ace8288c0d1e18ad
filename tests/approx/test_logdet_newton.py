"""The all-pairs quasi-Newton joint diagonaliser of the log-det criterion (approx/solvers/logdet_newton.py):
against matrices with a known joint diagonaliser, the criterion recomputed independently
(joint_diagonal.logdet_divergence), and finite differences of the criterion at its result."""

from __future__ import annotations

import pytest
import torch

from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.solvers.joint_diagonal import logdet_divergence
from polyinterp.approx.solvers.logdet_newton import combination_eigenbasis, logdet_newton

DT = torch.float64


def _orthogonal(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.linalg.qr(torch.randn(n, n, generator=g, dtype=DT))[0]


def _rotation(n: int, scale: float, seed: int) -> torch.Tensor:
    """exp(scale·S) for a random skew-symmetric S (an orthogonal matrix near I)."""
    g = torch.Generator().manual_seed(seed)
    S = torch.randn(n, n, generator=g, dtype=DT)
    return torch.linalg.matrix_exp(scale * (S - S.T))


def _diagonalisable(n: int, K: int, seed: int):
    """M_k = V D_k Vᵀ with a random orthogonal V and positive D_k spread over two decades."""
    g = torch.Generator().manual_seed(seed)
    V = _orthogonal(n, seed + 1)
    D = 10 ** (2 * torch.rand(K, n, generator=g, dtype=DT) - 1)
    w = torch.rand(K, generator=g, dtype=DT) + 0.5
    return V @ torch.diag_embed(D) @ V.T, w / w.sum(), V


def _generic(n: int, K: int, seed: int):
    """Random positive definite M_k with no common eigenbasis."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(K, n, 3 * n, generator=g, dtype=DT)
    M = X @ X.transpose(1, 2) / (3 * n) + 0.05 * torch.eye(n, dtype=DT)
    w = torch.rand(K, generator=g, dtype=DT) + 0.5
    return M, w / w.sum()


def test_the_combination_eigenbasis_diagonalises_commuting_matrices():
    M, w, _ = _diagonalisable(9, 4, seed=1)
    Q = combination_eigenbasis(M)
    assert logdet_divergence(M, w, Q) < 1e-12
    off = Q.T @ M @ Q - torch.diag_embed(torch.diagonal(Q.T @ M @ Q, dim1=1, dim2=2))
    assert float(off.abs().max()) < 1e-10


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,bound", [(torch.float64, 1e-11), (torch.float32, 1e-4)])
def test_the_steps_find_a_known_joint_diagonaliser(dtype, bound, device):
    """From the true basis turned by a rotation of angle ≈ 0.1, the criterion falls from ≈ 0.1 to round-off:
    float64 steps reach 1e-11 of the start, float32 steps 1e-4 (their floor); on each device."""
    M, w, V = _diagonalisable(12, 5, seed=2)
    start = V @ _rotation(12, 0.03, seed=3)
    before = logdet_divergence(M, w, start)
    info = {}
    Q = logdet_newton(M.to(device), w.to(device), start=start.to(device), iterations=200, rtol=0.0, dtype=dtype,
                      info=info)
    assert Q.device.type == device and Q.dtype == DT
    Q = Q.cpu()
    assert before > 1e-2
    assert logdet_divergence(M, w, Q) <= bound * before, (before, logdet_divergence(M, w, Q), info["iterations"])
    torch.testing.assert_close(Q.T @ Q, torch.eye(12, dtype=DT), rtol=0, atol=1e-13)


def test_the_criterion_never_rises_and_is_reported_as_recomputed():
    M, w = _generic(10, 3, seed=4)
    start = combination_eigenbasis(M)
    info = {}
    Q = logdet_newton(M, w, iterations=60, rtol=0.0, dtype=torch.float64, info=info)
    crit = info["criterion"]
    assert info["dtype"] == "float64" and len(crit) == info["iterations"] + 1 >= 2
    assert all(b <= a + 1e-12 * abs(a) for a, b in zip(crit, crit[1:])), crit
    torch.testing.assert_close(torch.tensor(crit[0]), torch.tensor(logdet_divergence(M, w, start)), rtol=1e-10, atol=0)
    torch.testing.assert_close(torch.tensor(crit[-1]), torch.tensor(logdet_divergence(M, w, Q)), rtol=1e-10, atol=0)
    torch.testing.assert_close(torch.tensor(info["divergence"]), torch.tensor(logdet_divergence(M, w, Q)), rtol=1e-12,
                               atol=0)
    assert crit[-1] < 0.9 * crit[0]


def test_the_result_is_a_stationary_point_of_the_criterion():
    """Central differences of D(Q exp(tE)) along random skew directions E: at the start they are of the
    order of the criterion's slope, at the result (many float64 steps) a thousand times smaller."""
    M, w = _generic(8, 4, seed=5)
    start = combination_eigenbasis(M)
    Q = logdet_newton(M, w, iterations=2000, rtol=0.0, dtype=torch.float64)

    def slope(B: torch.Tensor, seed: int, t: float = 1e-5) -> float:
        g = torch.Generator().manual_seed(seed)
        S = torch.randn(8, 8, generator=g, dtype=DT)
        E = (S - S.T) / (S - S.T).norm()
        up, down = torch.linalg.matrix_exp(t * E), torch.linalg.matrix_exp(-t * E)
        return (logdet_divergence(M, w, B @ up) - logdet_divergence(M, w, B @ down)) / (2 * t)

    at_start = max(abs(slope(start, s)) for s in range(6))
    at_end = max(abs(slope(Q, s)) for s in range(6))
    assert at_start > 1e-3
    assert at_end < 1e-3 * at_start, (at_start, at_end)


def test_float32_steps_land_near_the_float64_criterion():
    M, w = _generic(10, 3, seed=6)
    q64 = logdet_newton(M, w, dtype=torch.float64)
    info = {}
    q32 = logdet_newton(M, w, dtype=torch.float32, info=info)
    assert info["dtype"] == "float32" and q32.dtype == DT
    d64, d32 = logdet_divergence(M, w, q64), logdet_divergence(M, w, q32)
    start = logdet_divergence(M, w, combination_eigenbasis(M))
    # both steps lower the criterion by most of what they can; float32 ends within 2 % of that decrease
    assert d64 < start and abs(d32 - d64) <= 0.02 * (start - d64), (start, d64, d32)


def test_zero_iterations_return_the_start_orthonormalised():
    M, w = _generic(6, 2, seed=7)
    start = _orthogonal(6, 8)
    torch.testing.assert_close(logdet_newton(M, w, start=start, iterations=0), start, rtol=0, atol=1e-14)
    rough = start.float().double() + 1e-4 * _rotation(6, 1.0, seed=9)  # not orthogonal
    Q = logdet_newton(M, w, start=rough, iterations=0)
    torch.testing.assert_close(Q.T @ Q, torch.eye(6, dtype=DT), rtol=0, atol=1e-14)
    torch.testing.assert_close(Q, start, rtol=0, atol=1e-3)


def test_float32_steps_fall_back_to_float64_when_a_diagonal_underflows():
    """A variance of 1e-50 is positive in float64 and 0 in float32, where its log is −inf: the steps run
    in float64 instead, and still reach the known diagonaliser."""
    g = torch.Generator().manual_seed(10)
    D = 10 ** (2 * torch.rand(3, 6, generator=g, dtype=DT) - 1)
    D[:, 0] = 1e-50 * torch.tensor([1.0, 3.0, 9.0], dtype=DT)
    M, w = torch.diag_embed(D), torch.tensor([0.2, 0.3, 0.5], dtype=DT)
    start = torch.eye(6, dtype=DT)
    start[1:, 1:] = _rotation(5, 0.03, seed=11)  # turns the other five directions only
    info = {}
    Q = logdet_newton(M, w, start=start, iterations=100, rtol=0.0, dtype=torch.float32, info=info)
    assert info["dtype"] == "float64"
    assert info["divergence"] < 1e-8, info["divergence"]


def test_bad_input_is_named():
    M, w = _generic(5, 2, seed=9)
    bad = M.clone()
    bad[1] = -torch.eye(5, dtype=DT)
    with pytest.raises(ApproxInputError, match="matrix 1 is not positive definite"):
        logdet_newton(bad, w)
    with pytest.raises(ApproxInputError, match=r"mats \[K, n, n\] \(K ≥ 1\) and weights \[K\]"):
        logdet_newton(M, w[:1])
    with pytest.raises(ApproxInputError, match="iterations"):
        logdet_newton(M, w, iterations=-1)
    with pytest.raises(ApproxInputError, match="finite weights ≥ 0"):
        logdet_newton(M, torch.tensor([0.5, -0.1], dtype=DT))
    with pytest.raises(ApproxInputError, match=r"start must be an orthogonal \[n, n\] = \[5, 5\]"):
        logdet_newton(M, w, start=torch.eye(4, dtype=DT))
