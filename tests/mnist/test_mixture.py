"""Mixture moments against numpy on a small set; preprocessing against a hand-built pooling."""

import numpy as np
import torch

from polyinterp.mnist.mixture import fit_mixture
from polyinterp.mnist.preprocess import apply_preprocess, make_preprocess


def test_mixture_matches_numpy():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(300, 6)) + rng.integers(0, 3, (300, 1))
    labels = np.repeat(np.arange(10), 30)
    rng.shuffle(labels)
    ridge = 0.05
    mix = fit_mixture(torch.as_tensor(x), torch.as_tensor(labels), ridge)
    covs = [np.cov(x[labels == k].T) for k in range(10)]  # unbiased (n - 1)
    weights = np.bincount(labels) / len(labels)
    mean_var = sum(w * np.diag(c).mean() for w, c in zip(weights, covs))
    np.testing.assert_allclose(mix["weights"].numpy(), weights, rtol=0, atol=1e-15)
    np.testing.assert_allclose(mix["means"].numpy(), [x[labels == k].mean(0) for k in range(10)], rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(mix["covs"].numpy(), np.stack(covs) + ridge * mean_var * np.eye(6), rtol=1e-12, atol=1e-13)
    assert abs(mix["ridge_abs"] - ridge * mean_var) < 1e-14


def test_preprocess_pools_scales_and_centres():
    rng = np.random.default_rng(2)
    imgs = rng.integers(0, 256, (5, 28, 28), dtype=np.uint8)
    spec = make_preprocess(imgs, pool=4, center=True)
    out = apply_preprocess(imgs, spec, dtype=torch.float64).numpy()
    pooled = imgs.reshape(5, 7, 4, 7, 4).mean(axis=(2, 4)).reshape(5, 49) / 255.0
    np.testing.assert_allclose(out, pooled - pooled.mean(0), atol=1e-14)
    plain = apply_preprocess(imgs, make_preprocess(imgs, pool=1, center=False), dtype=torch.float64).numpy()
    np.testing.assert_array_equal(plain, imgs.reshape(5, 784) / 255.0)
