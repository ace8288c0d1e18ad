"""Fidelity of an approximant g to a model f: FVU, KL of the softmaxes, and analytic moments."""

from __future__ import annotations

import torch

from polyinterp.approx.core.approximant import Approximant
from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.core.mixture import GaussianMixture
from polyinterp.approx.moments.monomial_rhs import monomial_rhs
from polyinterp.approx.solvers.gram_operator import inner


def _pair(f: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if f.shape != g.shape:
        raise ApproxInputError(f"f and g values differ in shape: {tuple(f.shape)} vs {tuple(g.shape)}")
    if f.dim() == 1:
        f, g = f[:, None], g[:, None]
    if f.dim() != 2 or f.shape[0] < 2:
        raise ApproxInputError(f"expected values [n, o] with n >= 2, got {tuple(f.shape)}")
    return f.to(torch.float64), g.to(torch.float64)


def fvu(f_values: torch.Tensor, g_values: torch.Tensor) -> float:
    """Fraction of variance unexplained, pooled over outputs: Σ‖f − g‖² / Σ‖f − f̄‖² (f̄ per output)."""
    f, g = _pair(f_values, g_values)
    num = ((f - g) ** 2).sum()
    den = ((f - f.mean(0)) ** 2).sum()
    if float(den) == 0.0:
        raise ApproxInputError("f is constant on these inputs, so the FVU is undefined; use more varied inputs")
    return float(num / den)


def kl_divergence(f_logits: torch.Tensor, g_logits: torch.Tensor) -> float:
    """Mean over samples of KL(softmax f ‖ softmax g)."""
    f, g = _pair(f_logits, g_logits)
    lp, lq = torch.log_softmax(f, -1), torch.log_softmax(g, -1)
    return float((lp.exp() * (lp - lq)).sum(-1).mean())


def fvu_and_se(f_values: torch.Tensor, g_values: torch.Tensor) -> tuple[float, float]:
    """:func:`fvu` on samples and its standard error as an estimate of the FVU under the distribution
    the samples come from: the ratio R = ā / b̄ of the per-sample a_i = ‖f_i − g_i‖² and
    b_i = ‖f_i − f̄‖², by the delta method, SE = sd(a_i − R b_i) / (√n b̄) (first order in 1/n; the
    per-output mean f̄ taken as known)."""
    f, g = _pair(f_values, g_values)
    a = ((f - g) ** 2).sum(1)
    b = ((f - f.mean(0)) ** 2).sum(1)
    if float(b.sum()) == 0.0:
        raise ApproxInputError("f is constant on these inputs, so the FVU is undefined; use more varied inputs")
    ratio = a.sum() / b.sum()
    se = (a - ratio * b).std() / (len(a) ** 0.5 * b.mean())
    return float(ratio), float(se)


def fvu_flat_and_se(f_values: torch.Tensor, g_values: torch.Tensor) -> tuple[float, float]:
    """The FVU as the paper authors' code computes it (EleutherAI/polyapprox, branch quadratic-alice,
    ``fvu_between_models``): Var(f − g) / Var(f), each variance over all n·o values of the [n, o]
    outputs flattened into one vector (one scalar mean removed, not one per output), and its standard
    error by the delta method as in :func:`fvu_and_se` (a_i = Σ_o (r_io − r̄)², b_i = Σ_o (f_io − f̄)²
    with the grand means r̄, f̄ taken as known).

    Against :func:`fvu`: the denominator adds the spread of the per-output means of f, and the numerator
    drops the part of the mean residual shared by all outputs, so this value is never above
    :func:`fvu` on the same values (equal when every output of f has the same mean and the residual's
    grand mean is 0). The biased and unbiased variances give the same ratio."""
    f, g = _pair(f_values, g_values)
    r = f - g
    a = ((r - r.mean()) ** 2).sum(1)
    b = ((f - f.mean()) ** 2).sum(1)
    if float(b.sum()) == 0.0:
        raise ApproxInputError("f is constant on these inputs, so the FVU is undefined; use more varied inputs")
    ratio = a.sum() / b.sum()
    se = (a - ratio * b).std() / (len(a) ** 0.5 * b.mean())
    return float(ratio), float(se)


def fvu_uncentred_and_se(f_values: torch.Tensor, g_values: torch.Tensor) -> tuple[float, float]:
    """The uncentred ratio of EleutherAI/polyapprox's tests, Σ‖f − g‖² / Σ‖f‖² (no mean removed), and
    its standard error by the delta method as in :func:`fvu_and_se` (a_i = ‖f_i − g_i‖², b_i = ‖f_i‖²).
    Never above :func:`fvu` on the same values (its denominator adds n‖f̄‖²)."""
    f, g = _pair(f_values, g_values)
    a = ((f - g) ** 2).sum(1)
    b = (f ** 2).sum(1)
    if float(b.sum()) == 0.0:
        raise ApproxInputError("f is 0 on these inputs, so the uncentred FVU is undefined; use more varied inputs")
    ratio = a.sum() / b.sum()
    se = (a - ratio * b).std() / (len(a) ** 0.5 * b.mean())
    return float(ratio), float(se)


def kl_and_se(f_logits: torch.Tensor, g_logits: torch.Tensor) -> tuple[float, float]:
    """:func:`kl_divergence` and its standard error: the sample standard deviation of the per-sample
    KL(softmax f_i ‖ softmax g_i) over √n."""
    f, g = _pair(f_logits, g_logits)
    lp, lq = torch.log_softmax(f, -1), torch.log_softmax(g, -1)
    per = (lp.exp() * (lp - lq)).sum(-1)
    return float(per.mean()), float(per.std() / len(per) ** 0.5)


def accuracy_and_se(logits: torch.Tensor, labels: torch.Tensor) -> tuple[float, float]:
    """The share p of samples whose argmax of ``logits`` [n, o] is ``labels`` [n], and its binomial
    standard error √(p (1 − p) / n)."""
    if logits.dim() != 2 or labels.shape != logits.shape[:1] or len(labels) < 1:
        raise ApproxInputError(f"expected logits [n, o] and labels [n], got {tuple(logits.shape)} and "
                               f"{tuple(labels.shape)}")
    p = float((logits.argmax(1) == labels).double().mean())
    return p, (p * (1 - p) / len(labels)) ** 0.5


@torch.no_grad()
def fidelity(model, approximant: Approximant, x: torch.Tensor, chunk_size: int = 8192) -> dict[str, float]:
    """FVU and KL of ``approximant`` against ``model`` on inputs x [n, d], streamed in chunks (so
    10⁶ inputs need only one chunk of memory). Returns {"fvu", "kl", "mse", "n"}."""
    n = x.shape[0]
    if n < 2:
        raise ApproxInputError("fidelity needs at least 2 inputs")
    sse = kl = 0.0
    shift = s1 = s2 = None
    for xc in x.split(chunk_size):
        f = model(xc.to(model.dtype)).to(torch.float64)
        g = approximant(xc.to(approximant.dtype)).to(torch.float64)
        if shift is None:
            shift = f.mean(0)
            s1, s2 = torch.zeros_like(shift), torch.zeros_like(shift)
        sse += float(((f - g) ** 2).sum())
        lp, lq = torch.log_softmax(f, -1), torch.log_softmax(g, -1)
        kl += float((lp.exp() * (lp - lq)).sum())
        fc = f - shift
        s1 += fc.sum(0)
        s2 += (fc**2).sum(0)
    den = float((s2 - s1**2 / n).sum())
    if den <= 0:
        raise ApproxInputError("f is constant on these inputs, so the FVU is undefined; use more varied inputs")
    return {"fvu": sse / den, "kl": kl / n, "mse": sse / (n * approximant.o), "n": n}


def expected_inner(model, approximant: Approximant, mixture: GaussianMixture) -> torch.Tensor:
    """E[f_o · g_o] under the mixture, per output [o] (exact: the coefficients against E[f·basis])."""
    g = approximant.to(mixture.device, mixture.dtype).quadratic()
    return inner((g.alpha, g.beta, g.gamma), monomial_rhs(model.to(dtype=mixture.dtype), mixture))


def expected_sq_norm(approximant: Approximant, mixture: GaussianMixture) -> torch.Tensor:
    """E[g_o²] under the mixture, per output [o] (exact).

    Per component k (x = μ_k + z, z ~ N(0, Σ_k)) g = c + bᵀz + zᵀΓz with c = α + βμ + μᵀΓμ,
    b = β + 2Γμ (Γ symmetrised: xᵀΓx is the form of its symmetric part), and Isserlis gives
    E_k g = c + tr(ΓΣ), Var_k g = bᵀΣb + 2 tr(ΓΣΓΣ) (the odd moments vanish). With P = ΓΣ both traces
    are read off P (tr P, Σ_ij P_ij P_ji), so each output and component costs one d × d × d product,
    half of the Gram operator's ΣΓΣ (which also forms E[g x xᵀ], not needed here)."""
    g = approximant.to(mixture.device, mixture.dtype).quadratic()
    if not bool(g.gamma.any()):  # linear: Σ_k w_k [(α + βμ_k)² + β Σ_k βᵀ], no d³ products
        mean = g.alpha[None, :] + mixture.means @ g.beta.T  # [K, o]
        var = torch.einsum("od,kde,oe->ko", g.beta, mixture.covs, g.beta)
        return (mixture.weights[:, None] * (mean * mean + var)).sum(0)
    o, d = g.o, g.d
    gamma = 0.5 * (g.gamma + g.gamma.transpose(1, 2))
    out = torch.zeros(o, dtype=mixture.dtype, device=mixture.device)
    for w, mu, S in zip(mixture.weights, mixture.means, mixture.covs):
        P = (gamma.reshape(o * d, d) @ S).view(o, d, d)  # Γ_o Σ_k
        gmu = gamma @ mu  # [o, d]
        mean = g.alpha + g.beta @ mu + gmu @ mu + P.diagonal(dim1=1, dim2=2).sum(-1)
        b = g.beta + 2 * gmu
        var = ((b @ S) * b).sum(-1) + 2 * (P * P.transpose(1, 2)).sum((1, 2))
        out += w * (mean * mean + var)
    return out
