"""Mixture moments against numpy on a small set; preprocessing against a hand-built pooling."""

import numpy as np
import torch

from polyinterp.approx import GaussianMixture
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


def _old_fit_mixture(x, labels, ridge):
    """The study's computation before it moved into GaussianMixture.from_data, verbatim."""
    x = x.to(torch.float64)
    weights, means, covs = [], [], []
    for k in range(10):
        xk = x[labels == k]
        mu = xk.mean(0)
        z = xk - mu
        weights.append(xk.shape[0] / x.shape[0])
        means.append(mu)
        covs.append(z.T @ z / (xk.shape[0] - 1))
    weights, means, covs = torch.tensor(weights, dtype=torch.float64), torch.stack(means), torch.stack(covs)
    mean_var = float((weights * torch.diagonal(covs, dim1=1, dim2=2).mean(1)).sum())
    ridge_abs = ridge * mean_var
    covs = covs + ridge_abs * torch.eye(covs.shape[-1], dtype=covs.dtype)
    return {"weights": weights, "means": means, "covs": covs, "ridge": float(ridge), "ridge_abs": ridge_abs,
            "mean_within_class_variance": mean_var}


def test_the_study_and_the_library_fit_the_same_mixture_bit_for_bit():
    g = torch.Generator().manual_seed(5)
    x = torch.rand(700, 12, generator=g, dtype=torch.float32) * 3 + torch.randint(0, 4, (700, 1), generator=g)
    labels = torch.randint(0, 10, (700,), generator=g)
    old, new = _old_fit_mixture(x, labels, 0.01), fit_mixture(x, labels, 0.01)
    assert old.keys() == new.keys()
    for key in old:
        if isinstance(old[key], torch.Tensor):
            assert torch.equal(old[key], new[key]), key
        else:
            assert old[key] == new[key], key
    lib = GaussianMixture.from_data(x, labels, ridge=0.01)
    assert lib.ridge == 0.01 and lib.ridge_abs == old["ridge_abs"]
    assert torch.equal(lib.means, old["means"])
    torch.testing.assert_close(lib.covs, old["covs"], rtol=1e-15, atol=0)  # symmetrised by validation only
    torch.testing.assert_close(lib.weights, old["weights"], rtol=1e-15, atol=0)  # renormalised


def test_one_gaussian_from_data_is_the_sample_mean_and_covariance():
    x = torch.randn(500, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    one = GaussianMixture.gaussian_from_data(x, ridge=0.0)
    assert one.K == 1 and one.ridge == 0.0
    torch.testing.assert_close(one.means[0], x.mean(0))
    torch.testing.assert_close(one.covs[0], torch.cov(x.T))


def test_preprocess_pools_scales_and_centres():
    rng = np.random.default_rng(2)
    imgs = rng.integers(0, 256, (5, 28, 28), dtype=np.uint8)
    spec = make_preprocess(imgs, pool=4, center=True)
    out = apply_preprocess(imgs, spec, dtype=torch.float64).numpy()
    pooled = imgs.reshape(5, 7, 4, 7, 4).mean(axis=(2, 4)).reshape(5, 49) / 255.0
    np.testing.assert_allclose(out, pooled - pooled.mean(0), atol=1e-14)
    plain = apply_preprocess(imgs, make_preprocess(imgs, pool=1, center=False), dtype=torch.float64).numpy()
    np.testing.assert_array_equal(plain, imgs.reshape(5, 784) / 255.0)
