"""The paper's quadratic approximant, as a baseline: closed form under N(0, I), then schedule-free SGD."""

from __future__ import annotations

import time

import torch

from polyinterp.approx.core.approximant import Approximant
from polyinterp.approx.core.errors import ApproxInputError
from polyinterp.approx.core.mixture import GaussianMixture
from polyinterp.approx.fits.quadratic_gaussian import quadratic_gaussian


def side_by_side(G: torch.Tensor) -> torch.Tensor:
    """The forms G [o, d, d] side by side, F [d, o·d] with F[:, k·d:(k + 1)·d] = G[k]: the layout of the
    one large product x F."""
    o, d, _ = G.shape
    return G.permute(1, 0, 2).reshape(d, o * d)


def stacked(F: torch.Tensor, o: int) -> torch.Tensor:
    """The inverse of :func:`side_by_side`: F [d, o·d] → G [o, d, d]."""
    return F.view(F.shape[0], o, -1).permute(1, 0, 2)


def _evaluate(alpha, beta, F, x, product_dtype=None):
    """α + βx + xᵀG_kx per output k, the forms G_k side by side in F [d, o·d] (:func:`side_by_side`); the
    batch times F in ``product_dtype`` (None: x's dtype), everything else in x's dtype."""
    o, d = beta.shape
    if product_dtype is None:
        xF = x @ F
    else:  # inputs rounded, the product accumulated in float32 by the GEMM; its gradient likewise
        xF = (x.to(product_dtype) @ F.to(product_dtype)).to(x.dtype)
    return (xF.view(-1, o, d) * x[:, None, :]).sum(-1) + x @ beta.T + alpha


OPTIMIZERS = ("adamw_schedulefree", "sgd_schedulefree")


def quadratic_sgd(model, mixture: GaussianMixture, *, steps: int = 2000, batch: int = 256, lr: float = 1e-3,
                  warmup_steps: int = 0, generator: torch.Generator | None = None, seed: int | None = None,
                  dtype: torch.dtype = torch.float32, init: str = "standard", optimizer: str = "adamw_schedulefree",
                  momentum: float = 0.9, product_dtype: torch.dtype | None = None) -> Approximant:
    """Start from the closed-form quadratic under N(0, I) (``init="standard"``, as the paper and its
    authors' code) or under the moment-matched Gaussian (``init="moment_matched"``), then minimise the
    mean squared error to ``model`` (mean over samples and outputs) on fresh mixture samples (``steps``
    batches of ``batch``).

    ``optimizer="adamw_schedulefree"``: AdamW-ScheduleFree at ``lr`` with ``warmup_steps``; its averaged
    iterate (``eval()``) is returned. ``optimizer="sgd_schedulefree"``: the authors' procedure
    (EleutherAI/polyapprox, branch quadratic-alice, experiments/sgd_experiment.py: ``torch.optim.SGD``
    at lr 1.8e-2 in ``ScheduleFreeWrapper(momentum=0.9)``, 20 epochs × 10 batches of 2^10 samples);
    their code evaluates the parameters as training leaves them (the wrapper in train mode, no
    ``eval()``), and so does this. Training runs in ``dtype`` (float32 by default); the result is in
    the mixture's dtype.

    ``product_dtype``: the dtype of the one large matrix product (the batch times the stacked forms,
    ≈ 99 % of a step's arithmetic at MNIST size) and of its gradient: ``torch.bfloat16`` rounds their
    inputs to bfloat16 (the GEMM accumulates in float32), while the parameters, the optimizer's state,
    the linear term, the residuals and the loss stay in ``dtype``; ``None`` (default): ``dtype``. The
    mixture's draws are made in its dtype and mapped to samples in ``dtype`` (the points the fit sees; the
    same points to ``dtype``'s round-off), and the network's outputs are computed at those points.

    The quadratic term is trained as the forms themselves, side by side (:func:`side_by_side`, the layout
    of the large product), not as a matrix symmetrised at every step: xᵀGx sees only G's symmetric part and
    its gradient (x xᵀ times the residual) is symmetric, so the trained forms differ from a symmetrised
    parameterisation's by round-off alone (tests compare both with this: a loop on symmetrised matrices,
    and the authors' own loop, which trains the full matrices too), and the returned Γ is their
    symmetric part. That spares each step a transposed sum and a permuted copy of the o·d² entries,
    forward and backward (bench/README.md, "The SGD fit's step")."""
    if steps < 0 or batch < 1:
        raise ApproxInputError(f"need sgd_steps >= 0 and sgd_batch >= 1, got {steps} and {batch}")
    if optimizer not in OPTIMIZERS:
        raise ApproxInputError(f"unknown sgd optimizer {optimizer!r}; use one of {', '.join(OPTIMIZERS)}")
    if not 0 <= momentum < 1:
        raise ApproxInputError(f"sgd momentum must be in [0, 1), got {momentum}")
    if product_dtype not in (None, dtype, torch.bfloat16):
        raise ApproxInputError(f"sgd product_dtype must be None, the training dtype {dtype} or torch.bfloat16, "
                               f"got {product_dtype}")
    low = torch.bfloat16 if product_dtype == torch.bfloat16 and dtype != torch.bfloat16 else None
    import schedulefree

    t0 = time.perf_counter()
    if generator is None:
        generator = torch.Generator(device=mixture.device).manual_seed(0 if seed is None else int(seed))
    if init == "standard":
        mean = torch.zeros(mixture.d, dtype=mixture.dtype, device=mixture.device)
        cov = torch.eye(mixture.d, dtype=mixture.dtype, device=mixture.device)
    elif init == "moment_matched":
        mean, cov = mixture.total_mean(), mixture.total_cov()
    else:
        raise ApproxInputError(f"unknown sgd init {init!r}; use 'standard' or 'moment_matched'")
    start = quadratic_gaussian(model, mean, cov)
    alpha = start.alpha.to(dtype).clone().requires_grad_(True)
    beta = start.beta.to(dtype).clone().requires_grad_(True)
    F = side_by_side(start.gamma.to(dtype)).clone().requires_grad_(True)
    if optimizer == "adamw_schedulefree":
        opt = schedulefree.AdamWScheduleFree([alpha, beta, F], lr=lr, warmup_steps=warmup_steps)
    else:
        opt = schedulefree.ScheduleFreeWrapper(torch.optim.SGD([alpha, beta, F], lr=lr), momentum=momentum)
    opt.train()
    losses = []
    for _ in range(steps):
        x = mixture.sample(batch, generator, dtype=dtype)  # the draws of the mixture's dtype, mapped in dtype
        with torch.no_grad():
            target = model(x).to(dtype)
        loss = ((_evaluate(alpha, beta, F, x, low) - target) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    if optimizer == "adamw_schedulefree":
        opt.eval()  # the schedule-free averaged iterate
    with torch.no_grad():
        G = stacked(F, beta.shape[0])
        G = 0.5 * (G + G.transpose(1, 2))
        coefficients = (alpha.detach().to(mixture.dtype), beta.detach().to(mixture.dtype), G.detach().to(mixture.dtype))
    return Approximant(*coefficients, {
        "method": "sgd", "degree": 2, "iterations": steps, "residual": float("nan"), "batch": batch, "lr": lr,
        "init": init, "optimizer": optimizer, "products": str(low or dtype).removeprefix("torch."),
        **({"momentum": momentum} if optimizer == "sgd_schedulefree" else {}),
        "seconds": time.perf_counter() - t0, "final_batch_mse": losses[-1] if losses else float("nan")})
