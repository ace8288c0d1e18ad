"""Every figure function returns the data it drew; checked here against the smoke run's tables (an
independent read of the same files), not just against the existence of an image."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from polyinterp.figures import cubic_bands, cubic_clamp, cubic_fit, cubic_landmarks, cubic_slopes
from polyinterp.figures import mnist_ablation, mnist_curves, mnist_features

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def res(smoke_run):
    return smoke_run / "results"


def _out(tmp_path, name):
    return [str(tmp_path / f"{name}.pdf"), str(tmp_path / f"{name}.png")]


@pytest.mark.parametrize("metric", ["fvu", "kl"])
def test_metric_curves_draw_one_line_per_approximant_and_distribution(res, tmp_path, metric):
    draw = mnist_curves.fvu_figure if metric == "fvu" else mnist_curves.kl_figure
    lines = draw(metrics=str(res / "mnist/metrics.parquet"), out=_out(tmp_path, metric))
    df = pd.read_parquet(res / "mnist/metrics.parquet")
    df = df[(df.metric == metric) & (df.approximant != "mlp")]
    expected = {(d, a) for d, a in zip(df.distribution, df.approximant)}
    assert {(ln["distribution"], ln["approximant"]) for ln in lines} == expected and len(lines) == len(expected)
    for ln in lines:
        rows = df[(df.distribution == ln["distribution"]) & (df.approximant == ln["approximant"]) & (df.step > 0)]
        by_step = rows.groupby("step").value
        assert ln["step"] == sorted(rows.step.unique())
        np.testing.assert_allclose(ln["mean"], by_step.mean().to_numpy())
        np.testing.assert_allclose(ln["min"], by_step.min().to_numpy())
        np.testing.assert_allclose(ln["max"], by_step.max().to_numpy())
        assert ln["n_seeds"] == rows.seed.nunique()
    assert (tmp_path / f"{metric}.png").stat().st_size > 5000


def test_fig1_shows_the_configured_digit_at_each_checkpoint(res, tmp_path):
    approx = sorted((res / "mnist/seed0/approx").glob("step*.pt"), key=lambda p: int(p.stem[4:]))[-3:]
    panels = mnist_features.features_figure(approx=[str(p) for p in approx], metrics=str(res / "mnist/metrics.parquet"),
                                            out=_out(tmp_path, "fig1"), params={"digit": 7})
    assert [p["step"] for p in panels if p["row"] == "linear"] == [int(p.stem[4:]) for p in approx]
    assert {p["digit"] for p in panels} == {7}
    for p in (p for p in panels if p["row"] == "quadratic_top_eigenvector"):
        gamma = torch.load(res / f"mnist/seed0/approx/step{p['step']}.pt", weights_only=False)["quadratic"]["gamma"][7]
        vals = torch.linalg.eigvalsh(gamma.double())
        assert p["eigval"] == pytest.approx(float(vals[vals.abs().argmax()]), rel=1e-9)


def test_fig4_shows_the_configured_digit_at_the_last_attacked_step(res, tmp_path):
    from polyinterp.mnist.data import load_mnist
    from polyinterp.mnist.model import load_mlp
    from polyinterp.mnist.preprocess import apply_preprocess

    drawn = mnist_ablation.ablated_digits_figure(examples=str(res / "mnist/svd_ablation_examples.pt"),
                                                 out=_out(tmp_path, "fig4"), params={"digit": 7})
    table = pd.read_parquet(res / "mnist/svd_ablation.parquet")
    assert drawn["digit"] == 7 and drawn["step"] == int(table.step.max()) and drawn["k"] == list(range(1, 11))
    # independent route: the MLP's prediction on the first test '7', projected by a direct SVD
    ckpt = torch.load(res / f"mnist/seed0/ckpt/step{drawn['step']}.pt", weights_only=False)
    beta = torch.load(res / f"mnist/seed0/approx/step{drawn['step']}.pt", weights_only=False)["linear"]["beta"]
    mnist = load_mnist(res / "data/mnist.npz")
    i = int(np.flatnonzero(mnist.test_labels == 7)[0])
    x = apply_preprocess(mnist.test_images[i:i + 1], ckpt["preprocess"], dtype=torch.float64)
    vh = torch.linalg.svd(beta.double(), full_matrices=False)[2]
    mlp = load_mlp(ckpt, "cpu").double()
    for k, pred in zip(drawn["k"], drawn["digit_pred"]):
        v = vh[:k].T
        assert pred == int(mlp(x - (x @ v) @ v.T).argmax())


def test_fig5_lines_are_the_attack_table(res, tmp_path):
    lines = mnist_ablation.ablation_accuracy_figure(table=str(res / "mnist/svd_ablation.parquet"), out=_out(tmp_path, "fig5"))
    df = pd.read_parquet(res / "mnist/svd_ablation.parquet")
    svd = df[df.directions == "svd"]
    assert {(ln["step"], ln["model"]) for ln in lines if ln["directions"] == "svd"} == set(zip(svd.step, svd.model))
    for ln in lines:
        rows = df[(df.step == ln["step"]) & (df.model == ln["model"]) & (df.directions == ln["directions"])]
        by_k = rows.groupby("k").accuracy
        np.testing.assert_allclose(ln["accuracy"], by_k.mean().to_numpy())
        np.testing.assert_allclose(ln["min"], by_k.min().to_numpy())
        np.testing.assert_allclose(ln["max"], by_k.max().to_numpy())
    assert any(ln["directions"] == "random" for ln in lines)


def test_cubic_figures_draw_what_the_tables_say(res, tmp_path):
    c = res / "cubic" / "seed0"
    fit = cubic_fit.fit_figure(curves=str(c / "fit_curves.parquet"), train_curves=[str(c / "train_curve.parquet")],
                               fit=[str(c / "fit.parquet")], out=_out(tmp_path, "fit"))
    curves = pd.read_parquet(c / "fit_curves.parquet")
    assert [d["curve"] for d in fit["curves"]] == sorted(curves.curve.unique())
    assert {d["split"] for d in fit["training"]} == {"train", "val", "out_of_range"}

    top = 2
    lm = cubic_landmarks.landmarks_figure(table=str(c / "landmarks.parquet"), ranking=str(c / "landmark_ranking.parquet"),
                                          out=_out(tmp_path, "lm"), params={"top": top})
    ranking = pd.read_parquet(c / "landmark_ranking.parquet")
    for kind in cubic_landmarks.KINDS:
        want = ranking[ranking.kind == kind].sort_values("rank").latent.head(top).tolist()
        assert [d["latent"] for d in lm if d["kind"] == kind] == want

    bands = pd.read_parquet(c / "band_latents.parquet")
    bd = cubic_bands.bands_figure(grid=str(c / "band_grid.pt"), bands=str(c / "band_latents.parquet"),
                                  slopes=str(c / "slopes.parquet"), out=_out(tmp_path, "bands"), params={"max_latents": 3})
    band = bands[bands.is_band].sort_values("min_coherence", ascending=False)
    assert bd["bands_found"] == bool(len(band))
    pool = band if len(band) else bands[bands.min_active_frac > 0].sort_values("min_coherence", ascending=False)
    assert [d["latent"] for d in bd["latents"]] == pool.latent.head(3).tolist()

    sl = cubic_slopes.slopes_figure(scan=str(c / "slope_scan.parquet"), slopes=[str(c / "slopes.parquet")],
                                    seeds=str(res / "cubic/slopes_per_seed.parquet"), out=_out(tmp_path, "slopes"))
    per_seed = pd.read_parquet(res / "cubic/slopes_per_seed.parquet")
    assert [d["seed"] for d in sl["seeds"]] == per_seed.seed.tolist()
    best = pd.read_parquet(c / "slopes.parquet")
    assert sorted(sl["seeds"][0]["band_c"]) == sorted(best[best.is_band].c_best.tolist())

    cl = cubic_clamp.clamp_figure(curves=str(c / "clamp.parquet"), summary=str(c / "clamp_summary.parquet"),
                                  out=_out(tmp_path, "clamp"), params={"max_latents": 1})
    clamp = pd.read_parquet(c / "clamp.parquet")
    assert cl["latents"] == clamp.latent.drop_duplicates().head(1).tolist()
    assert cl["factors"] == sorted(clamp.factor.unique()) and cl["curves"] == sorted(clamp.curve.unique())
