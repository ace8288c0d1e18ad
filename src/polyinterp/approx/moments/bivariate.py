"""Bivariate Gaussian moments of activations: E[φ(a)·φ(b)] (and, for GLUs, E[φ(a) z_a · φ(b) z_b])
for jointly Gaussian pre-activations, vectorised over all pairs of hidden units.

* :func:`bvn_upper` — P(U > h, V > k) for standard bivariate normal (U, V) with correlation ρ, by
  Plackett's identity ∂P/∂ρ = φ₂(h, k; ρ), integrated from the nearer end: from ρ = 0
  (P = Φ(−h)Φ(−k)) in θ = asin ρ by 20-point Gauss–Legendre when |ρ| ≤ 0.7; from ρ = 1
  (P = Φ(−max(h, k))) when ρ > 0.7, in s = √(1 − r²), where the integrand
  exp(−(h − k)²/(2s²) − hk/(1 + r))/(2πr) is smooth but has the scale |h − k| near s = 0, so the
  panels are graded geometrically towards 0; and through P(U > h, V > k; ρ) =
  Φ(−h) − P(U > h, V > −k; −ρ) when ρ < −0.7.
* :func:`relu_product_moment` — E[ReLU(a)·ReLU(b)] in closed form (Tallis' truncated moments of
  the bivariate normal); exact limits at σ = 0 and |ρ| = 1.
* :func:`product_moment` — any activation, and the GLU's E[φ(a) z_a φ(b) z_b]: the expectation is
  conditioned on a (a sinh-mapped Gauss–Legendre rule split at the activation's bend, as in
  :mod:`polyinterp.approx.moments.univariate`) and the inner expectation over (b, z) given a is the exact
  univariate one (:func:`~polyinterp.approx.moments.univariate.gaussian_moments`: closed form for ReLU and
  GELU, accurate quadrature otherwise).

Pure functions of tensors (any device, float64 recommended); no I/O.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch

from polyinterp.approx.core.activations import get_activation, normal_cdf, normal_pdf
from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.moments.univariate import _legendre, gaussian_moments

_RHO_SWITCH = 0.7
_GL_POINTS = 20
_HALF_WIDTH = 12.0  # standardised range of the outer variable
_SQRT2PI = math.sqrt(2.0 * math.pi)


def _plackett(h, k, th_lo, th_hi):
    """(1/2π) ∫_{θ_lo}^{θ_hi} exp(−(h² + k² − 2hk sin θ)/(2 cos² θ)) dθ, elementwise, by Gauss–Legendre."""
    x, w = _legendre(_GL_POINTS)
    x = torch.as_tensor(x, dtype=h.dtype, device=h.device)
    w = torch.as_tensor(w, dtype=h.dtype, device=h.device)
    half = 0.5 * (th_hi - th_lo)
    th = (0.5 * (th_hi + th_lo))[..., None] + half[..., None] * x
    sn, cs2 = torch.sin(th), torch.cos(th) ** 2
    hs, hk = (h * h + k * k)[..., None], (h * k)[..., None]
    # cos² θ > 0 strictly inside the interval (Gauss nodes avoid the end θ = ±π/2)
    f = torch.exp(-(hs - 2 * hk * sn) / (2 * cs2))
    return half * (f * w).sum(-1) / (2 * math.pi)


_GRADED_PANELS = 48  # [s_ρ 2^−(j+1), s_ρ 2^−j], j < 48, then [0, s_ρ 2^−48]


def _near_one(h, k, s_rho):
    """∫_{ρ}^{1} φ₂(h, k; r) dr with s_ρ = √(1 − ρ²) < 1, in s = √(1 − r²) on geometrically graded panels."""
    x, w = _legendre(10)
    x = torch.as_tensor(x, dtype=h.dtype, device=h.device)
    w = torch.as_tensor(w, dtype=h.dtype, device=h.device)
    j = torch.arange(_GRADED_PANELS + 1, dtype=h.dtype, device=h.device)
    hi = 2.0 ** -j
    lo = torch.cat([hi[1:], torch.zeros(1, dtype=h.dtype, device=h.device)])
    frac = (0.5 * (hi + lo))[:, None] + (0.5 * (hi - lo))[:, None] * x  # [P, 10] in (0, 1)
    wf = ((0.5 * (hi - lo))[:, None] * w).reshape(-1)
    sv = (s_rho[..., None] * frac.reshape(-1)).clamp_min(1e-150)  # [..., Q]; s_ρ = 0 gives 0 below
    r = torch.sqrt(1.0 - sv * sv)
    d2, hk = ((h - k) ** 2)[..., None], (h * k)[..., None]
    f = torch.exp(-d2 / (2 * sv * sv) - hk / (1 + r)) / (2 * math.pi * r)
    return s_rho * (f * wf).sum(-1)


def bvn_upper(h: torch.Tensor, k: torch.Tensor, rho: torch.Tensor) -> torch.Tensor:
    """P(U > h, V > k), (U, V) standard bivariate normal with correlation ``rho`` ∈ [−1, 1]
    (broadcast; float64 gives ~1e-15 absolute accuracy). Infinite h or k are allowed."""
    h, k, rho = torch.broadcast_tensors(*(v if torch.is_tensor(v) else torch.as_tensor(v, dtype=torch.float64)
                                          for v in (h, k, rho)))
    dtype = h.dtype if h.is_floating_point() else torch.float64
    h, k, rho = h.to(dtype), k.to(dtype), rho.to(dtype).clamp(-1.0, 1.0)
    # large finite stand-ins for ±∞ keep the algebra finite (Φ(±40) is 0/1 to double precision)
    hf, kf = h.clamp(-40.0, 40.0), k.clamp(-40.0, 40.0)
    mid = rho.abs() <= _RHO_SWITCH
    out = torch.empty_like(hf)
    # |ρ| ≤ 0.7: from ρ = 0
    hm, km, rm = hf[mid], kf[mid], rho[mid]
    out[mid] = normal_cdf(-hm) * normal_cdf(-km) + _plackett(hm, km, torch.zeros_like(rm), torch.asin(rm))
    # ρ > 0.7 (and, for ρ < −0.7, the same with (k, ρ) → (−k, −ρ)): from ρ = 1
    far = ~mid
    hh, kk, rr = hf[far], kf[far], rho[far]
    neg = rr < 0
    k2 = torch.where(neg, -kk, kk)
    s_rho = torch.sqrt((1.0 - rr * rr).clamp_min(0.0))
    p_hi = normal_cdf(-torch.maximum(hh, k2)) - _near_one(hh, k2, s_rho)
    out[far] = torch.where(neg, normal_cdf(-hh) - p_hi, p_hi)
    return out.clamp(0.0, 1.0)


def relu_product_moment(m1, m2, s1, s2, rho) -> torch.Tensor:
    """E[ReLU(a)·ReLU(b)] for (a, b) Gaussian with means m1, m2, standard deviations s1, s2 ≥ 0 and
    correlation rho (broadcast). Closed form: with α = m1/s1, β = m2/s2, s = √(1 − ρ²),
    L = P(U > −α, V > −β), and the truncated first and second moments of (U, V) (Tallis 1961),

        E = s1 s2 [E(UV 1) + β E(U 1) + α E(V 1) + αβ L].

    Limits: s1 = 0 or s2 = 0 factor (ReLU(m)·E[ReLU(other)]); |ρ| = 1 uses b = m2 ± s2 U exactly.
    """
    m1, m2, s1, s2, rho = torch.broadcast_tensors(*(torch.as_tensor(v, dtype=torch.float64) if not torch.is_tensor(v)
                                                     else v for v in (m1, m2, s1, s2, rho)))
    if bool((s1 < 0).any()) or bool((s2 < 0).any()):
        raise ApproxInputError("standard deviations must be >= 0")
    rho = rho.clamp(-1.0, 1.0)
    one = torch.ones_like(s1)
    pos1, pos2 = s1 > 0, s2 > 0
    a = torch.where(pos1, m1 / torch.where(pos1, s1, one), torch.zeros_like(m1))
    b = torch.where(pos2, m2 / torch.where(pos2, s2, one), torch.zeros_like(m2))
    # Φ, φ and the bivariate CDF saturate beyond ±40: clamped truncation points there only; the
    # polynomial coefficients a, b below stay exact (a unit with |m|/s ≫ 40 is linear, not clamped)
    h, k = (-a).clamp(-40.0, 40.0), (-b).clamp(-40.0, 40.0)
    deg = rho.abs() >= 1.0 - 1e-14
    r = torch.where(deg, torch.zeros_like(rho), rho)
    s = torch.sqrt((1.0 - r * r).clamp_min(0.0))
    L = bvn_upper(h, k, r)
    q1 = normal_cdf((r * h - k) / s)  # P(V > k | U = h)
    q2 = normal_cdf((r * k - h) / s)  # P(U > h | V = k)
    ph, pk = normal_pdf(h), normal_pdf(k)
    eu = ph * q1 + r * pk * q2
    ev = pk * q2 + r * ph * q1
    quad = (h * h - 2 * r * h * k + k * k) / (s * s)
    euv = r * L + r * h * ph * q1 + r * k * pk * q2 + s / _SQRT2PI * normal_pdf(torch.sqrt(quad))
    general = s1 * s2 * (euv + b * eu + a * ev + a * b * L)
    # |ρ| = 1: b = m2 + sign(ρ) s2 U, an expectation over U alone on the interval where both are > 0
    sign = torch.sign(rho)
    degenerate = _relu_line_moment(m1, s1, m2, sign * s2)
    both = torch.where(deg, degenerate, general)
    # σ = 0 limits
    e1 = gaussian_moments("relu", m1, s1, kmax=0)[..., 0]
    e2 = gaussian_moments("relu", m2, s2, kmax=0)[..., 0]
    out = torch.where(pos1 & pos2, both, torch.zeros_like(both))
    out = torch.where(~pos1, torch.clamp(m1, min=0) * e2, out)
    out = torch.where(pos1 & ~pos2, torch.clamp(m2, min=0) * e1, out)
    return out


def _relu_line_moment(m1, s1, m2, c2) -> torch.Tensor:
    """E[ReLU(m1 + s1 U)·ReLU(m2 + c2 U)], U ~ N(0, 1), s1 > 0, c2 ≠ 0 (either sign): the product of
    two lines integrated over the interval of U where both are positive."""
    one = torch.ones_like(s1)
    safe_s1 = torch.where(s1 > 0, s1, one)
    safe_c2 = torch.where(c2 != 0, c2, one)
    inf = torch.full_like(m1, math.inf)
    lo1 = -m1 / safe_s1  # U > lo1 makes the first positive
    t2 = -m2 / safe_c2
    lo = torch.where(c2 > 0, torch.maximum(lo1, t2), lo1)
    hi = torch.where(c2 > 0, inf, t2)
    lo, hi = lo.clamp(-40.0, 40.0), hi.clamp(-40.0, 40.0)
    hi = torch.maximum(hi, lo)
    # ∫_lo^hi (m1 + s1 u)(m2 + c2 u) φ(u) du with ∫φ = ΔΦ, ∫uφ = −Δφ, ∫u²φ = ΔΦ − Δ(uφ)
    P = normal_cdf(hi) - normal_cdf(lo)
    M1 = normal_pdf(lo) - normal_pdf(hi)
    M2 = P + lo * normal_pdf(lo) - hi * normal_pdf(hi)
    return m1 * m2 * P + (m1 * c2 + m2 * s1) * M1 + s1 * c2 * M2


@lru_cache(maxsize=None)
def _tanh_sinh(step: float = 0.05, half: int = 68) -> tuple[np.ndarray, np.ndarray]:
    """Tanh–sinh (double-exponential) nodes and weights on [−1, 1]: dense at both ends, so a kink or
    a sharp transition at an end of the interval costs no accuracy."""
    j = np.arange(-half, half + 1) * step
    u = 0.5 * np.pi * np.sinh(j)
    x = np.tanh(u)
    w = step * 0.5 * np.pi * np.cosh(j) / np.cosh(u) ** 2
    return x, w


def _outer_nodes(bends: list[torch.Tensor]):
    """Nodes t [N, Q] and weights (including ϕ(t)) [N, Q] on [−12, 12], tanh–sinh on each segment
    between the sorted ``bends`` (each [N]): where φ(a) bends, where the inner expectation does, and
    the centre of the Gaussian weight."""
    L = _HALF_WIDTH
    pts = torch.sort(torch.stack([b.clamp(-L, L) for b in bends], 1), 1).values
    n = pts.shape[0]
    edges = torch.cat([torch.full((n, 1), -L, dtype=pts.dtype, device=pts.device), pts,
                       torch.full((n, 1), L, dtype=pts.dtype, device=pts.device)], 1)
    x, w = _tanh_sinh()
    x = torch.as_tensor(x, dtype=pts.dtype, device=pts.device)
    w = torch.as_tensor(w, dtype=pts.dtype, device=pts.device)
    lo, hi = edges[:, :-1, None], edges[:, 1:, None]
    t = (0.5 * (lo + hi) + 0.5 * (hi - lo) * x).reshape(n, -1)
    wt = (0.5 * (hi - lo) * w).reshape(n, -1) * torch.exp(-0.5 * t * t) / _SQRT2PI
    return t, wt


def product_moment(activation, mean: torch.Tensor, cov: torch.Tensor, glu: bool = False,
                   chunk: int = 4096) -> torch.Tensor:
    """E[φ(a)·φ(b)] (``glu=False``; variables (a, b)) or E[φ(a) z_a · φ(b) z_b] (``glu=True``;
    variables (a, b, z_a, z_b)) for Gaussian variables with ``mean`` [..., n] and ``cov``
    [..., n, n] (n = 2 or 4). Conditioned on a by a quadrature rule split at φ's bend, exact in the
    remaining variables; ReLU MLP pairs should use :func:`relu_product_moment` (closed form)."""
    n = 4 if glu else 2
    if mean.shape[-1] != n or cov.shape[-2:] != (n, n):
        raise ApproxInputError(f"product_moment(glu={glu}) needs mean [..., {n}] and cov [..., {n}, {n}], got "
                               f"{tuple(mean.shape)} and {tuple(cov.shape)}")
    act = get_activation(activation)
    shape = mean.shape[:-1]
    mean, cov = mean.reshape(-1, n), cov.reshape(-1, n, n)
    outs = [_product_chunk(act, mean[i:i + chunk], cov[i:i + chunk], glu) for i in range(0, mean.shape[0], chunk)]
    if not outs:
        return torch.zeros(shape, dtype=mean.dtype, device=mean.device)
    return torch.cat(outs).reshape(shape)


def _product_chunk(act, mean, cov, glu):
    va = cov[:, 0, 0].clamp_min(0)
    sa = va.sqrt()
    # conditional law of the rest given a = m_a + s_a t: mean + (Σ_ra / s_a) t, cov Σ_rr − Σ_ra Σ_arᵀ / s_a²
    pos = va > 0
    one = torch.ones_like(sa)
    inv_sa = torch.where(pos, 1.0 / torch.where(pos, sa, one), torch.zeros_like(sa))
    g = cov[:, 1:, 0] * inv_sa[:, None]  # [N, n−1]
    # bends: φ(a) at a = 0, and the inner expectation where b's conditional mean crosses 0
    gb = g[:, 0]
    t_a = torch.where(pos, -mean[:, 0] * inv_sa, torch.zeros_like(sa))
    t_b = torch.where(gb != 0, -mean[:, 1] / torch.where(gb != 0, gb, one), torch.zeros_like(sa))
    t, w = _outer_nodes([t_a, t_b, torch.zeros_like(t_a)])  # [N, Q]; 0: the peak of the Gaussian weight
    a = mean[:, 0, None] + sa[:, None] * t
    mu_r = mean[:, 1:, None] + g[:, :, None] * t[:, None, :]  # [N, n−1, Q]
    cov_r = cov[:, 1:, 1:] - g[:, :, None] * g[:, None, :]
    vb = cov_r[:, 0, 0].clamp_min(0)
    sb = vb.sqrt()
    mb = mu_r[:, 0]  # [N, Q]
    if not glu:
        inner = gaussian_moments(act, mb, sb[:, None].expand_as(mb), kmax=0)[..., 0]
        return (w * act(a) * inner).sum(-1)
    # z_a, z_b given (a, b): z = A + β (b − m_b) + ε, β = Cov(z, b)/Var b, Cov(ε) = Σ_zz − β βᵀ Var b
    posb = vb > 0
    inv_vb = torch.where(posb, 1.0 / torch.where(posb, vb, torch.ones_like(vb)), torch.zeros_like(vb))
    beta = cov_r[:, 1:, 0] * inv_vb[:, None]  # [N, 2]
    eps = cov_r[:, 1, 2] - beta[:, 0] * beta[:, 1] * vb  # Cov(ε_a, ε_b) [N]
    A = mu_r[:, 1:]  # [N, 2, Q] the z means at b = m_b
    M = gaussian_moments(act, mb, sb[:, None].expand_as(mb), kmax=2)  # E[φ(b) u^k], b = m_b + s_b u
    Ba, Bb = (beta[:, 0] * sb)[:, None], (beta[:, 1] * sb)[:, None]
    inner = (A[:, 0] * A[:, 1] + eps[:, None]) * M[..., 0] + (A[:, 0] * Bb + A[:, 1] * Ba) * M[..., 1] \
        + Ba * Bb * M[..., 2]
    return (w * act(a) * inner).sum(-1)
