"""Rule mnist_degree_approximants: the Gaussian degree-n forms and the mixture quadratic / cubic on
principal components at one checkpoint, their saved state and their metrics rows."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from polyinterp.approx import MLP, quadratic_approximant
from polyinterp.approx.evaluate.exact_fvu import exact_fvu
from polyinterp.approx.fits.cubic_mixture import ReducedPolynomialApproximant
from polyinterp.approx.fits.hermite_ridge import HermiteRidgeApproximant
from polyinterp.errors import ConfigError
from polyinterp.mnist.approximants import load_gaussian_mixture
from polyinterp.mnist.degrees.approximants import (approximant_names, fit_degree_approximants, reduced_degrees,
                                                  saved_state)
from polyinterp.mnist.metrics import COLUMNS, fidelity_table
from polyinterp.mnist.model import load_network, make_mlp

POOL = 14  # 28×28 → 2×2: d = 4, small enough for brute-force checks
D = (28 // POOL) ** 2


def _problem(seed: int = 0, hidden: int = 6, pool: int = POOL):
    """A checkpoint of a small random MLP and a 3-component mixture on D pooled-image inputs."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    D = (28 // pool) ** 2
    net = make_mlp(D, hidden, 3)
    K = 3
    A = torch.randn(K, D, D, generator=g, dtype=torch.float64) / math.sqrt(D)
    covs = 0.05 * (A @ A.transpose(1, 2) + 0.3 * torch.eye(D, dtype=torch.float64))
    means = 0.3 + 0.2 * torch.rand(K, D, generator=g, dtype=torch.float64)
    mixture = {"weights": torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64), "means": means, "covs": covs,
               "ridge": 0.01}
    ckpt = {"arch": {"d": D, "hidden": hidden, "n_out": 3, "arch": "mlp", "activation": "relu"}, "model": "mlp_relu",
            "state": net.state_dict(), "step": 16, "seed": seed,
            "preprocess": {"pool": pool, "center": False}, "train_loss": 1.0, "test_accuracy": 0.5}
    images = torch.randint(0, 256, (500, 28, 28), generator=g, dtype=torch.uint8).numpy()
    mnist = SimpleNamespace(test_images=images, test_labels=np.asarray(torch.randint(0, 3, (500,), generator=g)))
    return ckpt, mixture, mnist


def _params(**kw):
    base = {"degrees": [1, 2, 3], "components": D, "tol": 1e-10, "max_iter": 2000, "inner_dtype": "float64",
            "device": "cpu", "mixture_samples": 20000}
    return {**base, **kw}


def test_names_follow_the_degrees():
    assert approximant_names([1, 2, 3], 50) == ["gaussian_deg1", "gaussian_deg2", "gaussian_deg3",
                                                "quadratic_pc50", "cubic_pc50"]
    assert approximant_names([2, 1], 50) == ["gaussian_deg1", "gaussian_deg2"]  # no PC fits below degree 3
    assert reduced_degrees([4]) == (2, 3) and reduced_degrees([]) == ()


def test_quadratic_on_all_components_is_the_full_mixture_quadratic():
    # With p = d the PC quadratic spans every quadratic of x: it is the exact mixture quadratic, found
    # by another route (the full-d normal equations, block PCG) — the same exact FVU.
    ckpt, mixture, _ = _problem()
    fitted = fit_degree_approximants(ckpt, mixture, _params())
    assert list(fitted) == approximant_names([1, 2, 3], D)
    mix = load_gaussian_mixture(mixture, "cpu")
    mlp = MLP.from_module(load_network(ckpt).to(torch.float64))
    full = quadratic_approximant(mlp, mix, method="exact", tol=1e-12, max_iter=5000)
    want = exact_fvu(mlp, {"quadratic": full}, mix)["quadratic"]
    assert fitted[f"quadratic_pc{D}"].fvu() == pytest.approx(want, rel=1e-8, abs=1e-12)
    # the cubic on the same coordinates contains every quadratic: never worse
    assert fitted[f"cubic_pc{D}"].fvu() <= fitted[f"quadratic_pc{D}"].fvu() + 1e-12


def test_gaussian_forms_are_fitted_under_the_moment_matched_gaussian():
    # degree 1 under N(μ̄, Σ̄) is the Gaussian linear regression of f: check against least squares on
    # 2·10^5 samples of that Gaussian (its normal equations: Cov(x)⁻¹ Cov(x, f))
    ckpt, mixture, _ = _problem(seed=1)
    g1 = fit_degree_approximants(ckpt, mixture, _params(degrees=[1]))["gaussian_deg1"]
    mm = load_gaussian_mixture(mixture, "cpu").moment_matched()
    x = mm.sample(200_000, seed=3)
    f = load_network(ckpt).to(torch.float64)(x).detach()
    X = torch.cat([torch.ones(len(x), 1, dtype=x.dtype), x], 1)
    coef = torch.linalg.lstsq(X, f).solution
    probe = mm.sample(1000, seed=4)
    lsq = torch.cat([torch.ones(len(probe), 1, dtype=x.dtype), probe], 1) @ coef
    scale = f.std(0).mean()
    assert float((g1(probe) - lsq).abs().max() / scale) < 0.05  # sampling error of 2·10^5 draws


def test_saved_state_round_trips_and_warm_start_agrees():
    ckpt, mixture, _ = _problem(seed=2)
    params = _params(components=3, degrees=[2, 3])
    fitted = fit_degree_approximants(ckpt, mixture, params)
    [fitted[n].fvu() for n in ("quadratic_pc3", "cubic_pc3")]
    state = saved_state(ckpt, fitted, params)
    assert set(state["gaussian"]) == {2, 3} and set(state["reduced"]) == {2, 3}
    x = load_gaussian_mixture(mixture, "cpu").sample(100, seed=0)
    for n in (2, 3):
        g = HermiteRidgeApproximant.from_state_dict(state["gaussian"][n])
        torch.testing.assert_close(g(x), fitted[f"gaussian_deg{n}"](x), rtol=0, atol=0)
        r = ReducedPolynomialApproximant.from_state_dict(state["reduced"][n])
        name = f"{'quadratic' if n == 2 else 'cubic'}_pc3"
        torch.testing.assert_close(r(x), fitted[name](x), rtol=0, atol=0)
        assert r.fvu() == fitted[name].fvu()  # the saved moments give the FVU without the source model
    # the saved fits as the next checkpoint's warm start (a PCG start at p = 50; here the bases are
    # small and solved directly): the same polynomial
    warm = fit_degree_approximants(ckpt, mixture, params, warm_start=state)
    for name in ("quadratic_pc3", "cubic_pc3"):
        assert warm[name].fvu() == pytest.approx(fitted[name].fvu(), rel=1e-9)


def test_warm_start_from_the_saved_file_runs_pcg_to_the_same_polynomial():
    # d = 16, p = 14: the cubic has C(17, 3) = 680 basis functions, above the dense limit (600), so PCG
    # solves it, from the saved fit of a slightly different network (the previous checkpoint)
    ckpt, mixture, _ = _problem(seed=4, pool=7)
    params = _params(components=14, degrees=[3], tol=1e-9)
    before = fit_degree_approximants(ckpt, mixture, params)
    before["cubic_pc14"].fvu()
    state = saved_state(ckpt, before, params)
    nxt = dict(ckpt, state={k: v * (1 + 0.01 * torch.randn_like(v)) for k, v in ckpt["state"].items()})
    cold = fit_degree_approximants(nxt, mixture, params)["cubic_pc14"]
    warm = fit_degree_approximants(nxt, mixture, params, warm_start=state)["cubic_pc14"]
    assert cold.fit_info["method"] == "pcg" and warm.fit_info["start"] == "warm_start"
    assert warm.fit_info["converged"] and warm.fit_info["iterations"] < cold.fit_info["iterations"]
    assert warm.fvu() == pytest.approx(cold.fvu(), rel=1e-7)


def test_too_many_components_is_a_config_error():
    ckpt, mixture, _ = _problem()
    with pytest.raises(ConfigError, match=r"mnist\.approx\.cubic\.components.*at most 4"):
        fit_degree_approximants(ckpt, mixture, _params(components=5))


def test_metrics_rows_exact_and_monte_carlo_agree():
    ckpt, mixture, mnist = _problem(seed=3)
    params = _params(components=3, mixture_samples=200_000)
    fitted = fit_degree_approximants(ckpt, mixture, params)
    model = load_network(ckpt).to(torch.float64)
    exact = {n: g.fvu() for n, g in fitted.items() if isinstance(g, ReducedPolynomialApproximant)}
    df = fidelity_table(ckpt, model, fitted, exact, mixture, mnist, params, with_mlp=False)
    assert list(df.columns) == list(COLUMNS) and "mlp" not in set(df.approximant)
    assert set(df.approximant) == set(approximant_names([1, 2, 3], 3))
    ex = df[df.distribution == "mixture_exact"].set_index("approximant").value
    assert set(ex.index) == {"quadratic_pc3", "cubic_pc3"} and (df[df.distribution == "mixture_exact"].n_samples == 0).all()
    mc = df[(df.distribution == "mixture") & (df.metric == "fvu")].set_index("approximant").value
    for name in ex.index:  # 2·10^5 samples: a few per cent of the FVU
        assert mc[name] == pytest.approx(ex[name], rel=0.05)
    assert ex["cubic_pc3"] <= ex["quadratic_pc3"]
    assert isinstance(df, pd.DataFrame) and (df.step == 16).all() and (df.seed == 3).all()
