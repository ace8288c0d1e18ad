"""The least-squares polynomial of any degree n of an MLP or GLU under one Gaussian, exactly, in
factored Hermite form (no dⁿ tensor).

Let x ~ N(μ, Σ) and y_i = w_iᵀx + b_i, m_i = w_iᵀμ + b_i, σ_i² = w_iᵀΣw_i, t_i = (y_i − m_i)/σ_i
~ N(0, 1). In whitened coordinates (x = μ + A z, AAᵀ = Σ) the multivariate probabilists' Hermite
polynomials He_α(z) are an orthogonal basis of L²(N(μ, Σ)) graded by degree, and t_i = uᵢᵀz with a unit
vector uᵢ. A ridge function φ(y_i) depends on z only along uᵢ, so after a rotation taking uᵢ to the
first axis its only non-zero Hermite coefficients are those of He_k(t_i). Its orthogonal projection
onto polynomials of degree ≤ n is therefore the univariate truncation

    P_n φ(y_i) = Σ_{k≤n} c_{i,k} He_k(t_i),   c_{i,k} = E[φ(y_i) He_k(t_i)] / k!,

and, projection being linear, an MLP f = W2 φ(W1 x + b1) + b2 has g_n = b2 + W2 [P_n φ(y_i)]_i.

A GLU unit φ(y_i) z_i (z_i = v_iᵀx + c_i) depends on the two directions of y_i and z_i. Write
z_i = m_{z,i} + a_i t_i + r_i with a_i = Cov(y_i, z_i)/σ_i and r_i = z_i − m_{z,i} − a_i t_i, a
centred Gaussian independent of t_i. With t He_k(t) = He_{k+1}(t) + k He_{k−1}(t),

    φ(y) z = Σ_k e_k He_k(t) + r Σ_k c_k He_k(t),   e_k = m_z c_k + a (c_{k−1} + (k + 1) c_{k+1}),

where r He_k(t) = ‖r‖ He_1(s) He_k(t) (s = r/‖r‖ ⊥ t) has degree k + 1. The projection keeps e_k for
k ≤ n and c_k for k ≤ n − 1: two-direction Hermite coefficients, e_k and q_k = c_k, O(n·h) numbers.

What is stored: ``directions`` D = W1/σ (rows [h, d]; t = (x − μ)Dᵀ), ``coef`` [h, n+1] (c or e),
for a GLU ``gate`` G = V − a D (r = (x − μ)Gᵀ) and ``gate_coef`` [h, n] (q), and W2, b2. g(x) costs
O(h·d + n·h + o·h) per input. Dead directions: a unit with σ_i² ≤ ``rcond``·(Σ_j |w_ij| Σ_jj^½)²
(an upper bound of |w_i|ᵀ|Σ||w_i|, the scale of the round-off in the computed σ_i²), i.e. w_i = 0 or
Σ singular along w_i, is treated as σ_i = 0: the ridge is the constant φ(m_i) on the support of
N(μ, Σ), so c_{i,0} = φ(m_i), c_{i,k≥1} = 0, D_i = 0 (the exact limit σ → 0 of the formulas). When Σ is singular the result is still a least-squares solution (the
polynomial is unique only on the support).

FVU, analytically (:meth:`HermiteRidgeApproximant.fvu`): g_n is the orthogonal projection of every
output f_o, so E(f_o − g_o)² = E f_o² − E g_o². E f_o² comes from
:func:`polyinterp.approx.moments.output_moments.output_moments` under the one-component mixture (bivariate
Gaussian moments of the hidden layer: closed form for ReLU MLPs, one-dimensional quadrature
otherwise). E g_o² comes from E[He_j(t_i) He_k(t_l)] = δ_jk k! ρ_ilᵏ (ρ_il = Corr(t_i, t_l)) and,
for GLUs, Gaussian integration by parts (Cov(r_i, t_i) = 0):

    E[He_j(t_i) r_l He_k(t_l)]     = δ_{j,k+1} (k + 1)! ρ_ilᵏ Cov(r_l, t_i),
    E[r_i He_j(t_i) r_l He_k(t_l)] = δ_jk k! (Cov(r_i, r_l) ρ_ilᵏ + k Cov(r_i, t_l) Cov(r_l, t_i) ρ_ilᵏ⁻¹).

Both are computed in float64 from the stored coefficients (O(n·h² + h·d²)); for a float32
approximant the float32 round-off of its coefficients enters E g² at first order, i.e. the FVU is
then good to about 1e-7·E g²/E‖f − g‖² relative.

Guarantees: for degree 1 and 2 the polynomial equals :func:`~polyinterp.approx.linear_approximant`
and :func:`~polyinterp.approx.fits.quadratic_gaussian` under the same Gaussian (the tests check 1e-10
relative); for degree 3 and 4 it equals the least-squares fit on explicit monomial features (exact
Gram by Isserlis; tests at d ≤ 5). The coefficients are as accurate as the univariate Hermite moments
(:func:`~polyinterp.approx.moments.univariate.hermite_moments`: closed form for ReLU at any order and for
GELU up to order 4, otherwise quadrature of derivatives by autograd, which needs a smooth φ).
Pure functions of tensors on any device, float32 or float64; no I/O.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from polyinterp.approx.core.approximant import Approximant
from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.core.fitted_polynomial import FittedPolynomial, chunk_rows, fvu_from_moments
from polyinterp.approx.core.mixture import GaussianMixture
from polyinterp.approx.core.mlp import GLU, check_model
from polyinterp.approx.moments.univariate import hermite_moments
from polyinterp.approx.moments.output_moments import output_moments

_CHUNK_BYTES = 64 * 2**20


def _hermite_sum(t: torch.Tensor, coef: torch.Tensor) -> torch.Tensor:
    """Σ_k coef[:, k] He_k(t) for t [n, h], coef [h, K] (K ≥ 1), by the three-term recurrence."""
    out = coef[:, 0].expand_as(t).clone()
    if coef.shape[1] == 1:
        return out
    prev, cur = torch.ones_like(t), t
    out = out + coef[:, 1] * cur
    for k in range(1, coef.shape[1] - 1):
        prev, cur = cur, t * cur - k * prev  # He_{k+1} = t He_k − k He_{k−1}
        out = out + coef[:, k + 1] * cur
    return out


@dataclass(frozen=True)
class HermiteRidgeApproximant(FittedPolynomial):
    """g(x) = b2 + W2 u(x), u_i = Σ_{k≤n} coef[i, k] He_k(t_i) [+ r_i Σ_{k<n} gate_coef[i, k] He_k(t_i)],
    t = (x − mean) directionsᵀ, r = (x − mean) gateᵀ (GLU only). See the module docstring.

    ``degree`` n; ``directions`` [h, d]; ``coef`` [h, n+1]; ``gate`` [h, d] and ``gate_coef`` [h, n]
    (``None`` for an MLP); ``out_weight`` [o, h] = W2; ``out_bias`` [o] = b2; ``scale`` [h] = σ_i
    (0 for dead directions); ``fit_info`` (method, degree, seconds, dead, rcond). Frozen: no field can
    be reassigned. :meth:`fvu` needs the source model and covariance, which a fit attaches and
    :meth:`to` keeps; a state dict does not hold the model (:class:`~polyinterp.approx.evaluate.approximate.Approximation`
    keeps the FVU's moments across a save and load).
    """

    degree: int
    mean: torch.Tensor
    directions: torch.Tensor
    coef: torch.Tensor
    out_weight: torch.Tensor
    out_bias: torch.Tensor
    scale: torch.Tensor
    gate: torch.Tensor | None = None
    gate_coef: torch.Tensor | None = None
    fit_info: dict[str, Any] = field(default_factory=dict)
    _model: Any = field(default=None, repr=False, compare=False)
    _cov: torch.Tensor | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "fit_info", dict(self.fit_info))

    o = property(lambda self: self.out_weight.shape[0])
    d = property(lambda self: self.directions.shape[1])
    h = property(lambda self: self.directions.shape[0])
    dtype = property(lambda self: self.directions.dtype)
    device = property(lambda self: self.directions.device)

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        """The projected hidden units u(x) [n, h] for x [n, d]."""
        xc = x.to(self.dtype) - self.mean
        t = xc @ self.directions.T
        u = _hermite_sum(t, self.coef)
        if self.gate is not None and self.degree >= 1:
            u = u + (xc @ self.gate.T) * _hermite_sum(t, self.gate_coef)
        return u

    def __call__(self, x: torch.Tensor, chunk_size: int | None = None) -> torch.Tensor:
        """g(x) for x [n, d] (or [d]) → [n, o] (or [o]), in chunks of inputs (memory O(chunk·h))."""
        rows = chunk_rows(_CHUNK_BYTES, self.dtype.itemsize * 4 * max(self.h, self.d))
        return self._evaluate(x, chunk_size or rows, lambda xc: self.hidden(xc) @ self.out_weight.T + self.out_bias)

    def to(self, device=None, dtype: torch.dtype | None = None) -> "HermiteRidgeApproximant":
        """A copy on ``device`` in ``dtype``."""
        f = lambda t: None if t is None else t.to(device=device or t.device, dtype=dtype or t.dtype)  # noqa: E731
        return HermiteRidgeApproximant(self.degree, f(self.mean), f(self.directions), f(self.coef),
                                       f(self.out_weight), f(self.out_bias), f(self.scale), f(self.gate),
                                       f(self.gate_coef), dict(self.fit_info),
                                       None if self._model is None else self._model.to(device=device),
                                       None if self._cov is None else self._cov.to(device=device or self._cov.device))

    # -- exact moments -----------------------------------------------------------------------------
    def _hidden_gram(self) -> torch.Tensor:
        """E[u_i u_l] [h, h] under the Gaussian (second moments, not centred), float64."""
        f64 = lambda t: t.to(torch.float64)  # noqa: E731
        S = f64(self._cov).to(self.device)
        D, c = f64(self.directions), f64(self.coef)
        DS = D @ S
        rho = (DS @ D.T).clamp(-1.0, 1.0)
        rho.diagonal().fill_(1.0)  # exact for live units; for dead ones only ρ⁰ = 1 enters
        M = torch.zeros(self.h, self.h, dtype=torch.float64, device=self.device)
        rho_k = torch.ones_like(rho)
        powers = [rho_k]
        for k in range(self.degree + 1):
            if k:
                rho_k = rho_k * rho
                powers.append(rho_k)
            M = M + math.factorial(k) * torch.outer(c[:, k], c[:, k]) * rho_k
        if self.gate is None or self.degree == 0:
            return M
        G, q = f64(self.gate), f64(self.gate_coef)
        Crt = G @ S @ D.T  # Cov(r_i, t_l)
        Crt.diagonal().fill_(0.0)  # Cov(r_i, t_i) = 0 by construction
        Crr = G @ S @ G.T
        cross = torch.zeros_like(M)
        for k in range(self.degree):  # E[He_{k+1}(t_i) r_l He_k(t_l)]
            cross = cross + math.factorial(k + 1) * powers[k] * torch.outer(c[:, k + 1], q[:, k]) * Crt.T
        M = M + cross + cross.T
        both = Crt * Crt.T
        for k in range(self.degree):
            inner = Crr * powers[k]
            if k:
                inner = inner + k * both * powers[k - 1]
            M = M + math.factorial(k) * torch.outer(q[:, k], q[:, k]) * inner
        return M

    def expected_moments(self) -> dict[str, torch.Tensor]:
        """Exact per-output moments under the Gaussian, float64 [o]: ``ef`` = E f, ``ef2`` = E f²,
        ``eg`` = E g (= E f: the constants are in the span), ``eg2`` = E g²."""
        if self._model is None or self._cov is None:
            raise ApproxInputError("this approximant has no source model and covariance; build it with "
                                   "gaussian_polynomial_approximant to get its FVU")

        mix = GaussianMixture.single(self.mean.to(torch.float64), self._cov.to(torch.float64), dtype=torch.float64,
                                     device=self.device, validate=False)
        ef, ef2 = output_moments(self._model.to(dtype=torch.float64), mix)
        W2, b2 = self.out_weight.to(torch.float64), self.out_bias.to(torch.float64)
        eu = self.coef[:, 0].to(torch.float64)
        M = self._hidden_gram()
        eg = W2 @ eu + b2
        eg2 = torch.einsum("oi,ij,oj->o", W2, M, W2) + 2 * b2 * (W2 @ eu) + b2 * b2
        return {"ef": ef, "ef2": ef2, "eg": eg, "eg2": eg2}

    def fvu(self, per_output: bool = False):
        """E‖f − g‖² / Σ_o Var f_o under the Gaussian, without samples (``per_output``: a float64
        tensor [o] of E(f_o − g_o)²/Var f_o instead). Route: E(f_o − g_o)² = E f_o² − E g_o² (g is
        the orthogonal projection of f_o), see the module docstring (float32 coefficients: accuracy
        there)."""
        m = self.expected_moments()
        return fvu_from_moments(m["ef2"] - m["eg2"], m["ef2"] - m["ef"] ** 2, per_output, "Gaussian")

    # -- storage -----------------------------------------------------------------------------------
    _STATE = ("mean", "directions", "coef", "out_weight", "out_bias", "scale", "gate", "gate_coef")

    def state_dict(self) -> dict[str, Any]:
        """Plain tensors and the fit info (``torch.save``-able). The source model and covariance are
        not kept: a loaded approximant evaluates g(x), but has no :meth:`fvu`."""
        return {"degree": self.degree, **{k: getattr(self, k) for k in self._STATE}, "fit_info": dict(self.fit_info)}

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> "HermiteRidgeApproximant":
        missing = [k for k in ("degree", *cls._STATE) if k not in state]
        if missing:
            raise ApproxInputError(f"state dict lacks {missing}; it must come from HermiteRidgeApproximant.state_dict()")
        return cls(int(state["degree"]), *(state[k] for k in cls._STATE), dict(state.get("fit_info", {})))

    # -- monomial form -----------------------------------------------------------------------------
    def to_approximant(self) -> Approximant:
        """The same polynomial as an :class:`Approximant` (α, β, Γ in the monomials of x); degree ≤ 2 only
        (higher degrees would need the dⁿ tensors this form avoids)."""
        if self.degree > 2:
            raise ApproxInputError(f"to_approximant needs degree <= 2, this approximant has degree {self.degree}; "
                                   "evaluate it directly instead")
        n = self.degree
        c = torch.nn.functional.pad(self.coef, (0, 2 - n))  # [h, 3]
        D, W2 = self.directions, self.out_weight
        const = c[:, 0] - c[:, 2]  # He_2(t) = t² − 1
        lin = c[:, 1, None] * D
        Gam = torch.einsum("oh,hi,hj->oij", W2 * c[:, 2], D, D)
        if self.gate is not None and n >= 1:
            q = torch.nn.functional.pad(self.gate_coef, (0, 2 - n))  # [h, 2]
            lin = lin + q[:, 0, None] * self.gate
            M = torch.einsum("oh,hi,hj->oij", W2 * q[:, 1], D, self.gate)
            Gam = Gam + 0.5 * (M + M.transpose(1, 2))
        alpha = W2 @ const + self.out_bias
        beta = W2 @ lin
        centred = Approximant(alpha, beta, Gam if n == 2 else None, dict(self.fit_info))
        eye = torch.eye(self.d, dtype=self.dtype, device=self.device)
        return centred.compose(eye, -self.mean)


def _gaussian(mean, cov, dtype):
    if isinstance(mean, GaussianMixture):
        if cov is not None:
            raise ApproxInputError("pass either a GaussianMixture (K = 1) or mean and cov, not both")
        if mean.K != 1:
            raise ApproxInputError(f"gaussian_polynomial_approximant needs one Gaussian, the mixture has K = {mean.K}; "
                                   "use mixture.moment_matched() or one component")
        mean, cov = mean.means[0], mean.covs[0]
    if cov is None:
        raise ApproxInputError("cov is missing: pass mean [d] and cov [d, d] (or a K = 1 GaussianMixture)")
    mean = torch.as_tensor(mean)
    if mean.dim() != 1:
        raise ApproxInputError(f"mean must be [d], got shape {tuple(mean.shape)}")
    dtype = dtype or (mean.dtype if mean.is_floating_point() else torch.float64)
    mix = GaussianMixture.single(mean, cov, dtype=dtype, device=mean.device)  # validates symmetry and PSD
    return mix.means[0], mix.covs[0]


def gaussian_polynomial_approximant(model, mean, cov=None, degree: int = 2, *, rcond: float | None = None,
                                    dtype: torch.dtype | None = None) -> HermiteRidgeApproximant:
    """The L²(N(mean, cov))-optimal polynomial of degree ≤ ``degree`` of an :class:`MLP` or
    :class:`GLU`, exact, in factored Hermite form (see the module docstring).

    ``mean`` [d] and ``cov`` [d, d] (symmetric PSD, may be singular), or a K = 1
    :class:`GaussianMixture` as ``mean``. ``dtype``: of the result and the computation (default: the
    mean's; float32 or float64). ``rcond``: relative threshold below which a direction's variance
    counts as 0 (default 1e-12 in float64, 1e-6 in float32). The result lives on the mean's device;
    the model must be there too. Cost O(h·d² + n·h) to fit, O(h·d + n·h + o·h) per input to evaluate.
    """
    if isinstance(degree, bool) or not isinstance(degree, int) or degree < 0:
        raise ApproxInputError(f"degree must be a non-negative int, got {degree!r}")
    t0 = time.perf_counter()
    mu, S = _gaussian(mean, cov, dtype)
    dtype = mu.dtype
    check_model(model, mu.shape[0], mu.device)
    model = model.to(dtype=dtype)
    if rcond is None:
        rcond = 1e-12 if dtype == torch.float64 else 1e-6
    glu = isinstance(model, GLU)
    W, b = (model.W, model.b) if glu else (model.W1, model.b1)
    WS = W @ S
    var = (WS * W).sum(1)
    bound = (W.abs() @ S.diagonal().clamp_min(0).sqrt()) ** 2  # ≥ |w|ᵀ|Σ||w| (Cauchy–Schwarz), O(h·d)
    live = var > rcond * bound
    sigma = torch.where(live, var.clamp_min(0).sqrt(), torch.zeros_like(var))
    safe = torch.where(live, sigma, torch.ones_like(sigma))
    D = torch.where(live[:, None], W / safe[:, None], torch.zeros_like(W))
    m = W @ mu + b
    kmax = degree + 1 if glu else degree
    c = hermite_moments(model.activation, m, sigma, kmax=kmax)  # E[φ He_k(t)]; φ(m)·[k = 0] at σ = 0
    c = c / torch.tensor([math.factorial(k) for k in range(kmax + 1)], dtype=dtype, device=mu.device)
    gate = gate_coef = None
    if glu:
        mz = model.V @ mu + model.c
        a = torch.where(live, (WS * model.V).sum(1) / safe, torch.zeros_like(var))  # Cov(y, z)/σ
        cm1 = torch.nn.functional.pad(c[:, :-1], (1, 0))  # c_{k−1}
        ks = torch.arange(1, kmax + 1, dtype=dtype, device=mu.device)
        cp1 = torch.nn.functional.pad(c[:, 1:] * ks, (0, 1))  # (k + 1) c_{k+1}
        coef = (mz[:, None] * c + a[:, None] * (cm1 + cp1))[:, :degree + 1]
        gate = model.V - a[:, None] * D
        gate_coef = c[:, :degree]
    else:
        coef = c
    info = {"method": "hermite", "degree": degree, "dead": int((~live).sum()), "rcond": rcond,
            "iterations": 0, "residual": 0.0, "seconds": time.perf_counter() - t0}
    return HermiteRidgeApproximant(degree, mu, D, coef, model.W2, model.b2, sigma, gate, gate_coef, info, model, S)
