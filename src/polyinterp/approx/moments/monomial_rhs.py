"""The right-hand side of the quadratic's normal equations in the monomials of x: the network's
moments (E f, E[f x], E[f x xᵀ]) under a Gaussian mixture, by Stein's lemma per component."""

from __future__ import annotations

import torch

from polyinterp.approx.core.mixture import GaussianMixture
from polyinterp.approx.moments.stein import stein_data


def monomial_rhs(model, mixture: GaussianMixture) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(E[f] [o], E[f x] [o, d], E[f x xᵀ] [o, d, d], symmetric) under the mixture, by first/second-order
    Stein per component: E_k[f x xᵀ] = E_k[f] (Σ_k + μ_kμ_kᵀ) + Σ_k E_k[∇²f] Σ_k + μ_k E_k[f z]ᵀ +
    E_k[f z] μ_kᵀ with E_k[f z] = Σ_k E_k[∇f]. The Hessian sandwiches accumulate in place and the other
    terms, linear in the per-component expectations, are one product over the components each (no
    [o, d, d] temporary per component)."""
    w, m, S = mixture.weights, mixture.means, mixture.covs
    K, d = m.shape
    Ef, Efz, R2 = [], [], None
    for k in range(K):
        sd = stein_data(model, m[k], S[k], order=2)
        Ef.append(sd.mean_f)
        Efz.append(sd.grad @ S[k])
        H = sd.hess.sandwich(S[k])  # Σ_k E_k[∇²f] Σ_k [o, d, d], a fresh tensor
        R2 = H.mul_(w[k]) if R2 is None else R2.add_(H, alpha=float(w[k]))
    wEf = (w[:, None] * torch.stack(Ef)).T  # [o, K]: w_k E_k[f]
    wEfz = w[:, None, None] * torch.stack(Efz)  # [K, o, d]: w_k E_k[f z]
    o = wEf.shape[0]
    R2 += (wEf @ S.reshape(K, -1)).view(o, d, d)
    R2 += torch.einsum("ok,ki,kj->oij", wEf, m, m)
    mEfz = torch.einsum("ki,koj->oij", m, wEfz)
    R2 += mEfz + mEfz.transpose(1, 2)
    return wEf.sum(1), wEf @ m + wEfz.sum(0), 0.5 * (R2 + R2.transpose(-1, -2))
