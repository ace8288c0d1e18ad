"""The early-FVU cause table (polyinterp.mnist.early_fvu) against independent routes: numpy least
squares, the closed-form linear approximant of a ReLU MLP under N(0, I), and the inequalities every row
must satisfy (least squares on the test images is the floor of every linear row under our definition;
the authors' flattened-variance FVU is never above ours)."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.stats import norm

from polyinterp.approx import Approximant, GaussianMixture, linear_approximant
from polyinterp.io import save_torch
from polyinterp.mnist.early_fvu import (FITS, PAPER_EARLY_LINEAR_FVU, candidate_distributions, closeness,
                                        early_fvu_markdown, early_fvu_rows, early_fvu_summary,
                                        least_squares_linear, pixel_origin, recipe_label)
from polyinterp.mnist.model import make_network, network_arch, polynomial_network
from polyinterp.scorecard import early_fvu_claims

DT = torch.float64


def _problem(d=6, k=3, h=8, o=3, n=600, seed=0):
    gen = torch.Generator().manual_seed(seed)
    means = torch.randn(k, d, generator=gen, dtype=DT)
    a = torch.randn(k, d, d, generator=gen, dtype=DT) / d ** 0.5
    covs = a @ a.transpose(1, 2) + 0.1 * torch.eye(d, dtype=DT)
    mix = GaussianMixture(torch.tensor([0.5, 0.3, 0.2], dtype=DT), means, covs)
    x, labels = mix.sample(n, seed=seed + 1, return_labels=True)
    torch.manual_seed(seed)
    net = make_network(d, h, o).double().eval()
    return mix, x, labels, net


def _ckpt(net, step=16):
    return {"state": net.state_dict(), "arch": network_arch(net), "model": "m", "step": step, "seed": 0,
            "test_accuracy": 0.5, "preprocess": {"pool": 1, "center": False}}


def test_least_squares_linear_is_numpys_least_squares():
    _, x, _, net = _problem()
    y = net(x).detach()
    g = least_squares_linear(x, y)
    design = np.hstack([np.ones((len(x), 1)), x.numpy()])
    coef, *_ = np.linalg.lstsq(design, y.numpy(), rcond=None)
    np.testing.assert_allclose(g.alpha.numpy(), coef[0], atol=1e-10)
    np.testing.assert_allclose(g.beta.numpy(), coef[1:].T, atol=1e-10)


def test_test_set_candidates_are_the_test_images_moments():
    mix, x, labels, _ = _problem()
    dists = candidate_distributions(mix, x, labels)
    assert set(dists) | {"mixture_train", "ols_test"} == set(FITS)
    gt = dists["gaussian_test"]
    np.testing.assert_allclose(gt.means[0].numpy(), x.numpy().mean(0), atol=1e-12)
    np.testing.assert_allclose(gt.covs[0].numpy(), np.cov(x.numpy().T) + 1e-6 * np.eye(6), atol=1e-12)
    mt = dists["mixture_test_uniform"]
    np.testing.assert_allclose(mt.weights.numpy(), 1 / 3)
    for c in range(3):
        xc = x[labels == c].numpy()
        np.testing.assert_allclose(mt.means[c].numpy(), xc.mean(0), atol=1e-12)
        np.testing.assert_allclose(mt.covs[c].numpy(), np.cov(xc.T) + 1e-6 * np.eye(6), atol=1e-12)
    np.testing.assert_allclose(dists["standard_normal_centred"].means[0].numpy(), mix.total_mean().numpy())
    np.testing.assert_allclose(dists["standard_normal"].covs[0].numpy(), np.eye(6))
    np.testing.assert_allclose(dists["standard_normal"].means[0].numpy(), 0.0)


def test_centred_pixels_move_the_standard_normal_to_the_raw_pixel_origin():
    """With centring (x − mean image), N(0, I) in raw pixels is N(−mean, I) in the preprocessed
    coordinates, and the centred candidate is still N(μ_train, I) there."""
    mix, x, labels, _ = _problem()
    mean = torch.arange(6, dtype=DT) / 10
    assert pixel_origin({"pool": 1, "center": False}) is None
    origin = pixel_origin({"pool": 1, "center": True, "mean": mean.float()})
    dists = candidate_distributions(mix, x, labels, origin)
    np.testing.assert_allclose(dists["standard_normal"].means[0].numpy(), -mean.numpy(), atol=1e-7)
    np.testing.assert_allclose(dists["standard_normal_centred"].means[0].numpy(), mix.total_mean().numpy())


def _closed_form_standard_normal(net):
    """A ReLU MLP's linear approximant under N(0, I) by hand: β = W₂ diag(Φ(b/s)) W₁ and
    α = W₂ E relu(z) + b₂, with z ~ N(b, s²), s = ‖w‖: E relu(z) = b Φ(b/s) + s φ(b/s)."""
    w1, b1 = net[0].weight.detach().numpy(), net[0].bias.detach().numpy()
    w2, b2 = net[2].weight.detach().numpy(), net[2].bias.detach().numpy()
    s = np.linalg.norm(w1, axis=1)
    beta = w2 @ (norm.cdf(b1 / s)[:, None] * w1)
    alpha = w2 @ (b1 * norm.cdf(b1 / s) + s * norm.pdf(b1 / s)) + b2
    return alpha, beta


def _rows(tmp_path):
    mix, x, labels, net = _problem()
    lin = linear_approximant(polynomial_network(net), mix)
    gen = torch.Generator().manual_seed(9)
    gamma = torch.randn(3, 6, 6, generator=gen, dtype=DT) * 0.01
    quad = Approximant(lin.alpha, lin.beta, gamma + gamma.transpose(1, 2))
    path = tmp_path / "approx.pt"
    save_torch({"linear": lin.state_dict(), "quadratic": quad.state_dict()}, path)
    rows = pd.DataFrame(early_fvu_rows(_ckpt(net), path, mix, x, labels, "optimizer adamw"))
    return rows, net, x


def test_rows_against_independent_routes(tmp_path):
    rows, net, x = _rows(tmp_path)
    assert len(rows) == 2 * (len(FITS) + 1)
    assert set(rows.fit) == set(FITS) and set(rows.definition) == {"ours", "flat"}
    wide = rows.pivot_table(index=["approximant", "fit"], columns="definition", values="value")
    # the authors' definition never above ours, row by row
    assert (wide["flat"] <= wide["ours"] * (1 + 1e-12)).all(), wide
    # least squares on the test images is the floor of every linear row under ours
    lin = wide.loc["linear", "ours"]
    assert (lin["ols_test"] <= lin * (1 + 1e-12)).all(), lin
    assert (lin.drop("ols_test") > lin["ols_test"]).all()
    # the N(0, I) row is the FVU of the hand-derived closed form
    alpha, beta = _closed_form_standard_normal(net)
    f = net(x).detach().numpy()
    g = alpha + x.numpy() @ beta.T
    ours = ((f - g) ** 2).sum() / ((f - f.mean(0)) ** 2).sum()
    flat = np.var(f - g) / np.var(f)
    assert lin["standard_normal"] == pytest.approx(ours, rel=1e-9)
    assert wide.loc[("linear", "standard_normal"), "flat"] == pytest.approx(flat, rel=1e-9)
    assert (rows.recipe == "optimizer adamw").all() and (rows.step == 16).all()


def test_summary_markdown_and_scorecard_row_name_the_closest_candidate_cause(tmp_path):
    rows, _, _ = _rows(tmp_path)
    table = pd.concat([rows, rows.assign(seed=1, value=rows.value * 1.1)], ignore_index=True)
    summary = early_fvu_summary(table)
    assert (summary.n_seeds == 2).all()
    causes = summary[(summary.approximant == "linear") & (summary.fit != "ols_test")]
    best = causes.loc[causes.closeness.idxmin()]
    assert best.closeness == min(abs(math.log(v / PAPER_EARLY_LINEAR_FVU)) for v in causes.value)
    text = early_fvu_markdown(summary)
    assert f"`{best.fit}` under the `{best.definition}`" in text
    assert text.count("| linear") == 0 and all(f"| {fit} |" in text for fit in FITS)
    (claim,) = early_fvu_claims(table)
    assert f"fit {best.fit}, {best.definition} definition" in claim.where
    assert claim.values == pytest.approx(
        table[(table.approximant == "linear") & (table.fit == best.fit) & (table.definition == best.definition)]
        .sort_values("seed").value.tolist())
    assert claim.row()["verdict"] in ("yes", "no")
    # least squares on the test images is a floor, never the named cause, even where it is closest
    floor = table.assign(value=np.where(table.fit == "ols_test", PAPER_EARLY_LINEAR_FVU, table.value))
    (claim,) = early_fvu_claims(floor)
    assert "ols_test" not in claim.where
    named = re.search(r"Closest candidate .*?\): `(\w+)`", early_fvu_markdown(early_fvu_summary(floor))).group(1)
    assert named != "ols_test"
    assert early_fvu_claims(None) == [] and closeness(PAPER_EARLY_LINEAR_FVU) == 0.0


def test_recipe_label_names_the_recipe_keys():
    assert recipe_label({"optimizer": "adamw", "lr": 1e-5, "hidden": 256, "batch_size": 32}) == \
        "optimizer adamw, lr 1e-05, batch_size 32"
