"""The paper's quadratic approximant, as a baseline: closed form under N(0, I), then schedule-free SGD."""

from __future__ import annotations

import time

import torch

from polyinterp.approx.approximant import Approximant
from polyinterp.approx.errors import ApproxInputError
from polyinterp.approx.mixture import GaussianMixture
from polyinterp.approx.quadratic_gaussian import quadratic_gaussian


def _evaluate(alpha, beta, P, x):
    o, d = beta.shape
    G = 0.5 * (P + P.transpose(1, 2))
    xG = (x @ G.permute(1, 0, 2).reshape(d, o * d)).view(-1, o, d)
    return (xG * x[:, None, :]).sum(-1) + x @ beta.T + alpha


def quadratic_sgd(model, mixture: GaussianMixture, *, steps: int = 2000, batch: int = 256, lr: float = 1e-3,
                  warmup_steps: int = 0, generator: torch.Generator | None = None, seed: int | None = None,
                  dtype: torch.dtype = torch.float32, init: str = "standard") -> Approximant:
    """Start from the closed-form quadratic under N(0, I) (``init="standard"``, as the paper) or under
    the moment-matched Gaussian (``init="moment_matched"``), then minimise the mean squared error to
    ``model`` on fresh mixture samples (``steps`` batches of ``batch``) with AdamW-ScheduleFree.
    Training runs in ``dtype`` (float32 by default); the result is in the mixture's dtype."""
    if steps < 0 or batch < 1:
        raise ApproxInputError(f"need sgd_steps >= 0 and sgd_batch >= 1, got {steps} and {batch}")
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
    P = start.gamma.to(dtype).clone().requires_grad_(True)
    opt = schedulefree.AdamWScheduleFree([alpha, beta, P], lr=lr, warmup_steps=warmup_steps)
    opt.train()
    losses = []
    for _ in range(steps):
        x = mixture.sample(batch, generator)
        with torch.no_grad():
            target = model(x).to(dtype)
        x = x.to(dtype)
        loss = ((_evaluate(alpha, beta, P, x) - target) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    opt.eval()  # the schedule-free averaged iterate
    with torch.no_grad():
        G = 0.5 * (P + P.transpose(1, 2))
        out = Approximant(alpha.detach().to(mixture.dtype), beta.detach().to(mixture.dtype),
                          G.detach().to(mixture.dtype), {})
    out.fit_info = {"method": "sgd", "degree": 2, "iterations": steps, "residual": float("nan"), "batch": batch,
                    "lr": lr, "init": init, "seconds": time.perf_counter() - t0,
                    "final_batch_mse": losses[-1] if losses else float("nan")}
    return out
