"""E f_o and E f_o² of an MLP or GLU under a Gaussian mixture, exactly: the hidden units' first and
second moments per component (univariate and bivariate Gaussian expectations of the activation),
mixed by the component weights. The FVU's denominator (:mod:`polyinterp.approx.evaluate.exact_fvu`) and
the fits that report it read these."""

from __future__ import annotations

import torch

from polyinterp.approx.core.mixture import GaussianMixture
from polyinterp.approx.core.mlp import GLU, MLP, check_model
from polyinterp.approx.moments.bivariate import product_moment, relu_product_moment
from polyinterp.approx.moments.univariate import gaussian_moments


def _hidden_moments(model, mean: torch.Tensor, cov: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """E[u] [h] and E[u uᵀ] [h, h] of the hidden vector u (φ(W1x + b1) for an MLP, φ(Wx + b) ⊙ (Vx + c)
    for a GLU) under x ~ N(mean, cov)."""
    act = model.activation
    if isinstance(model, MLP):
        m = model.W1 @ mean + model.b1
        C = model.W1 @ cov @ model.W1.T
        s = torch.diagonal(C).clamp_min(0).sqrt()
        e = gaussian_moments(act, m, s, kmax=0)[..., 0]
        pos = s > 0
        denom = torch.where(pos, s, torch.ones_like(s))
        rho = (C / (denom[:, None] * denom[None, :])).clamp(-1, 1)
        rho = torch.where(pos[:, None] & pos[None, :], rho, torch.zeros_like(rho))
        rho.diagonal().copy_(torch.where(pos, 1.0, 0.0))
        if act.name == "relu":  # row blocks keep the temporaries of the |ρ| > 0.7 pairs small
            ee = torch.cat([relu_product_moment(m[i:i + 64, None], m[None, :], s[i:i + 64, None], s[None, :],
                                                rho[i:i + 64]) for i in range(0, m.shape[0], 64)])
        else:
            h = m.shape[0]
            mean2 = torch.stack(torch.broadcast_tensors(m[:, None], m[None, :]), -1)
            cov2 = torch.stack([torch.stack([C.diagonal()[:, None].expand(h, h), C], -1),
                                torch.stack([C, C.diagonal()[None, :].expand(h, h)], -1)], -2)
            ee = product_moment(act, mean2, cov2)
        return e, 0.5 * (ee + ee.T)
    # GLU: y = Wx + b, z = Vx + c; the variables of a pair (i, j) are (y_i, y_j, z_i, z_j)
    my, mz = model.W @ mean + model.b, model.V @ mean + model.c
    Cyy, Cyz, Czz = model.W @ cov @ model.W.T, model.W @ cov @ model.V.T, model.V @ cov @ model.V.T
    sy = torch.diagonal(Cyy).clamp_min(0).sqrt()
    mom = gaussian_moments(act, my, sy, kmax=1)  # E[φ(y)], E[φ(y) t]
    pos = sy > 0
    slope = torch.where(pos, torch.diagonal(Cyz) / torch.where(pos, sy, torch.ones_like(sy)), torch.zeros_like(sy))
    e = mz * mom[..., 0] + slope * mom[..., 1]  # E[φ(y_i) z_i]
    h = my.shape[0]
    dy, dz, dyz = torch.diagonal(Cyy), torch.diagonal(Czz), torch.diagonal(Cyz)
    col = lambda v: v[:, None].expand(h, h)  # noqa: E731  (unit i)
    row = lambda v: v[None, :].expand(h, h)  # noqa: E731  (unit j)
    mean4 = torch.stack([col(my), row(my), col(mz), row(mz)], -1)
    cov4 = torch.stack([
        torch.stack([col(dy), Cyy, col(dyz), Cyz], -1),
        torch.stack([Cyy.T, row(dy), Cyz.T, row(dyz)], -1),
        torch.stack([col(dyz), Cyz.T, col(dz), Czz], -1),
        torch.stack([Cyz, row(dyz), Czz.T, row(dz)], -1),
    ], -2)
    ee = product_moment(act, mean4, cov4, glu=True)
    return e, 0.5 * (ee + ee.T)


def output_moments(model, mixture: GaussianMixture) -> tuple[torch.Tensor, torch.Tensor]:
    """E[f_o] and E[f_o²] under the mixture, per output [o] (exact)."""
    check_model(model, mixture.d, mixture.device)
    model = model.to(dtype=mixture.dtype)
    W2, b2 = model.W2, model.b2
    ef = torch.zeros(model.o, dtype=mixture.dtype, device=mixture.device)
    ef2 = torch.zeros_like(ef)
    for w, mu, S in zip(mixture.weights, mixture.means, mixture.covs):
        e, ee = _hidden_moments(model, mu, S)
        mean_o = W2 @ e
        ef += w * (mean_o + b2)
        ef2 += w * (torch.einsum("oi,ij,oj->o", W2, ee, W2) + 2 * b2 * mean_o + b2 * b2)
    return ef, ef2
