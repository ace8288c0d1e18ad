"""Gaussian-mixture model of MNIST: one component per class (frequency, mean, unbiased covariance + ridge)."""

from __future__ import annotations

import logging

import torch

from polyinterp.approx.core.mixture import class_gaussians, ridged
from polyinterp.io import save_torch
from polyinterp.mnist.data import load_mnist
from polyinterp.mnist.preprocess import apply_preprocess, make_preprocess

log = logging.getLogger(__name__)


def class_moments(x: torch.Tensor, labels: torch.Tensor, n_classes: int = 10):
    """Class frequencies [K], means [K, d] and unbiased covariances [K, d, d] (float64) of classes
    0..n_classes−1 (:func:`polyinterp.approx.core.mixture.class_gaussians`, as
    :meth:`GaussianMixture.from_data`)."""
    return class_gaussians(x, labels, range(n_classes))


def fit_mixture(x: torch.Tensor, labels: torch.Tensor, ridge: float) -> dict:
    """Class-conditional Gaussians; ``ridge`` × (mean within-class pixel variance) is added to each
    covariance's diagonal (MNIST class covariances are singular). The computation of
    :meth:`GaussianMixture.from_data` (the same functions), kept as raw tensors for the saved file."""
    weights, means, covs = class_moments(x, labels)
    covs, ridge_abs, mean_var = ridged(weights, covs, ridge)
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

