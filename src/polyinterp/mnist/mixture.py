"""Gaussian-mixture model of MNIST: one component per class (frequency, mean, unbiased covariance + ridge)."""

from __future__ import annotations

import logging

import torch

from polyinterp.io import save_torch
from polyinterp.mnist.data import load_mnist
from polyinterp.mnist.preprocess import apply_preprocess, make_preprocess

log = logging.getLogger(__name__)


def class_moments(x: torch.Tensor, labels: torch.Tensor, n_classes: int = 10):
    """Class frequencies [K], means [K, d] and unbiased covariances [K, d, d] (float64)."""
    x = x.to(torch.float64)
    weights, means, covs = [], [], []
    for k in range(n_classes):
        xk = x[labels == k]
        if xk.shape[0] < 2:
            raise ValueError(f"class {k} has {xk.shape[0]} samples; need at least 2 for a covariance")
        mu = xk.mean(0)
        z = xk - mu
        weights.append(xk.shape[0] / x.shape[0])
        means.append(mu)
        covs.append(z.T @ z / (xk.shape[0] - 1))
    return torch.tensor(weights, dtype=torch.float64), torch.stack(means), torch.stack(covs)


def fit_mixture(x: torch.Tensor, labels: torch.Tensor, ridge: float) -> dict:
    """Class-conditional Gaussians; ``ridge`` × (mean within-class pixel variance) is added to each
    covariance's diagonal (MNIST class covariances are singular)."""
    weights, means, covs = class_moments(x, labels)
    mean_var = float((weights * torch.diagonal(covs, dim1=1, dim2=2).mean(1)).sum())
    ridge_abs = ridge * mean_var
    covs = covs + ridge_abs * torch.eye(covs.shape[-1], dtype=covs.dtype)
    return {"weights": weights, "means": means, "covs": covs, "ridge": float(ridge),
            "ridge_abs": ridge_abs, "mean_within_class_variance": mean_var}


def mixture_step(*, data: str, mixture: str, params: dict) -> None:
    """Rule ``mnist_mixture``: fit on the 60k training images of ``data``, save to ``mixture`` with the
    preprocessing it assumed. ``params``: ``preprocess`` and ``mixture`` sections of ``mnist:``."""
    out = mixture
    data = load_mnist(data)
    spec = make_preprocess(data.train_images, params["preprocess"]["pool"], params["preprocess"]["center"])
    x = apply_preprocess(data.train_images, spec, dtype=torch.float64)
    mix = fit_mixture(x, torch.as_tensor(data.train_labels), params["mixture"]["ridge"])
    mix["preprocess"] = spec
    log.info("mixture: K=%d d=%d ridge=%.3g (absolute %.3g)", len(mix["weights"]), x.shape[1],
             mix["ridge"], mix["ridge_abs"])
    save_torch(mix, out)

