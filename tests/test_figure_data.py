"""Every figure function returns the data it drew; checked here against the smoke run's tables (an
independent read of the same files), not just against the existence of an image."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from figure_checks import assert_readable
from polyinterp.figures.cubic import bands as cubic_bands, capacity as cubic_capacity, clamp as cubic_clamp
from polyinterp.figures.cubic import fit as cubic_fit, grid as cubic_grid, joint_clamp as cubic_joint_clamp
from polyinterp.figures.cubic import landmarks as cubic_landmarks, slopes as cubic_slopes
from polyinterp.figures.cubic import thresholds as cubic_thresholds, views as cubic_views
from polyinterp.figures.mnist import ablation as mnist_ablation, curves as mnist_curves, features as mnist_features

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def res(smoke_run):
    return smoke_run / "results"


CUBIC_FIGURE_MODULES = (cubic_bands, cubic_capacity, cubic_clamp, cubic_fit, cubic_grid, cubic_joint_clamp,
                        cubic_landmarks, cubic_slopes, cubic_thresholds, cubic_views)


@pytest.fixture
def readable(monkeypatch):
    """Every cubic figure is checked for readability (figure_checks.assert_readable) just before it is
    saved; returns the list of the figures checked."""
    from polyinterp.io import save_figure

    checked = []

    def check_then_save(fig, *paths):
        assert_readable(fig)
        checked.append(fig._suptitle.get_text() if fig._suptitle else "")
        save_figure(fig, *paths)

    for module in CUBIC_FIGURE_MODULES:
        monkeypatch.setattr(module, "save_figure", check_then_save)
    return checked


def _out(tmp_path, name):
    return [str(tmp_path / f"{name}.pdf"), str(tmp_path / f"{name}.png")]


@pytest.mark.parametrize("figure", ["fig2", "fig3", "fig_fits", "fig_degrees"])
def test_metric_curves_are_the_metrics_table(res, tmp_path, figure):
    draw = {"fig2": mnist_curves.fvu_figure, "fig3": mnist_curves.test_images_figure,
            "fig_fits": mnist_curves.fits_figure, "fig_degrees": mnist_curves.degrees_figure}[figure]
    lines = draw(metrics=str(res / "mnist/metrics.parquet"), out=_out(tmp_path, figure), params={"run": "smoke"})
    df = pd.read_parquet(res / "mnist/metrics.parquet")
    series = {"fig2": mnist_curves.PAPER, "fig3": mnist_curves.PAPER, "fig_fits": mnist_curves.FITS,
              "fig_degrees": mnist_curves.degree_series(df)}[figure]
    want = {(s.approximant, s.fit) for s in series} & set(zip(df.approximant, df.fit))
    assert {(ln["approximant"], ln["fit"]) for ln in lines} == want
    assert {ln["metric"] for ln in lines} == {"fvu", "kl"}
    if figure in ("fig2", "fig3"):
        assert {ln["approximant"] for ln in lines} <= {"linear", "quadratic", "quadratic_sgd"}
    for ln in lines:
        rows = df[(df.model == ln["model"]) & (df.metric == ln["metric"]) & (df.distribution == ln["distribution"])
                  & (df.approximant == ln["approximant"]) & (df.fit == ln["fit"]) & (df.step > 0)]
        if figure == "fig3":
            assert ln["distribution"] == "test"
        elif (df[(df.approximant == ln["approximant"]) & (df.fit == ln["fit"]) & (df.metric == ln["metric"])]
              .distribution == "mixture_exact").any():
            assert ln["distribution"] == "mixture_exact"  # the exact values where the table has them
        by_step = rows.groupby("step").value
        assert ln["step"] == sorted(rows.step.unique())
        np.testing.assert_allclose(ln["mean"], by_step.mean().to_numpy())
        np.testing.assert_allclose(ln["min"], by_step.min().to_numpy())
        np.testing.assert_allclose(ln["max"], by_step.max().to_numpy())
        assert ln["n_seeds"] == rows.seed.nunique()
    assert (tmp_path / f"{figure}.png").stat().st_size > 5000


def _relu_mlp_gaussian_fit(ckpt: dict, digit: int):
    """β and Γ of the ReLU MLP's least-squares quadratic under N(0, I), by the per-unit closed form
    (independent of the Stein route): pre-activation y_j = w_jᵀx + b_j ~ N(b_j, ‖w_j‖²),
    β = Σ_j a_j Φ(b_j/‖w_j‖) w_j, Γ = ½ Σ_j a_j φ(b_j/‖w_j‖)/‖w_j‖ w_j w_jᵀ (a = the digit's W2 row)."""
    from polyinterp.mnist.model import load_network

    layers = [m for m in load_network(ckpt, "cpu").double().children() if isinstance(m, torch.nn.Linear)]
    W, b, a = layers[0].weight.detach(), layers[0].bias.detach(), layers[1].weight.detach()[digit]
    norm = W.norm(dim=1)
    t = b / norm
    normal = torch.distributions.Normal(torch.zeros((), dtype=torch.float64), torch.ones((), dtype=torch.float64))
    beta = (a * normal.cdf(t)) @ W
    gamma = 0.5 * (W.T * (a * normal.log_prob(t).exp() / norm)) @ W
    return beta, gamma


def test_fig1_shows_the_configured_digit_at_each_checkpoint(res, tmp_path):
    approx = sorted((res / "mnist/mlp_relu/seed0/approx").glob("step*.pt"), key=lambda p: int(p.stem[4:]))[-3:]
    steps = [int(p.stem[4:]) for p in approx]
    ckpt = [res / f"mnist/mlp_relu/seed0/ckpt/step{s}.pt" for s in steps]
    panels = mnist_features.features_figure(approx=[str(p) for p in approx], ckpt=[str(p) for p in ckpt],
                                            mixture=str(res / "mnist/mixture.pt"),
                                            metrics=str(res / "mnist/metrics.parquet"),
                                            out=_out(tmp_path, "fig1"), params={"digit": 7})
    rows = [key for key, _ in mnist_features.ROWS]
    assert [(p["step"], p["row"]) for p in panels] == [(s, r) for s in steps for r in rows]
    assert {p["digit"] for p in panels} == {7}
    drawn = {(p["step"], p["row"]): p for p in panels}
    # the mixture's total covariance by the law of total covariance, in numpy
    mix = torch.load(res / "mnist/mixture.pt", weights_only=False)
    w, mu, covs = (mix[k].double().numpy() for k in ("weights", "means", "covs"))
    mean = w @ mu
    cov = np.einsum("k,kij->ij", w, covs) + np.einsum("k,ki,kj->ij", w, mu, mu) - np.outer(mean, mean)
    data_var = np.diag(cov) - mix["ridge_abs"]  # the pixels' own variance, without the ridge
    near_constant = data_var < 1e-3 * np.median(data_var)
    assert near_constant.any()
    metrics = pd.read_parquet(res / "mnist/metrics.parquet")
    fvu = metrics[(metrics.metric == "fvu") & (metrics.distribution == "mixture_exact") & (metrics.fit == "mixture")
                  & (metrics.model == "mlp_relu")]
    for s, path, ck in zip(steps, approx, ckpt):
        saved = torch.load(path, weights_only=False)
        gamma, beta = saved["quadratic"]["gamma"][7].double().numpy(), saved["linear"]["beta"][7].double().numpy()
        at = fvu[fvu.step == s].set_index("approximant")["value"]
        assert drawn[(s, "mixture_beta")]["fvu"] == pytest.approx(at["linear"])
        assert drawn[(s, "mixture_linear_pattern")]["variance"] == pytest.approx(beta @ cov @ beta, rel=1e-9)
        raw = drawn[(s, "mixture_gamma_raw")]
        vals, vecs = np.linalg.eigh(gamma)
        top = int(np.abs(vals).argmax())
        assert raw["eigval"] == pytest.approx(vals[top], rel=1e-9) and raw["fvu"] == pytest.approx(at["quadratic"])
        # whitened: eigenvalues of ΣΓ (a general eigensolver), shares λ² / tr((ΣΓ)²)
        lam = np.linalg.eigvals(cov @ gamma).real
        lam = lam[np.abs(lam).argsort()[::-1]]
        white = drawn[(s, "mixture_gamma_whitened")]
        assert white["eigval"] == pytest.approx(lam[0], rel=1e-6)
        assert white["variance_share"] == pytest.approx(lam[0] ** 2 / np.trace(cov @ gamma @ cov @ gamma), rel=1e-6)
        assert 0 < white["variance_share"] <= 1
        # the raw eigenvector e's coordinate explains (eᵀΣΓΣe / eᵀΣe)² / tr((ΣΓ)²) of it: at most the top share
        e = vecs[:, top]
        raw_share = (e @ cov @ gamma @ cov @ e / (e @ cov @ e)) ** 2 / np.trace(cov @ gamma @ cov @ gamma)
        assert raw["variance_share"] == pytest.approx(raw_share, rel=1e-6)
        assert raw["variance_share"] <= white["variance_share"]
        # the ridge artifact is gone: the whitened pattern (eigenvector of ΣΓ) has less of its energy
        # on near-constant pixels than the raw eigenvector
        ev, evec = np.linalg.eig(cov @ gamma)
        p = evec[:, np.abs(ev.real).argmax()].real
        energy = lambda v: float((v[near_constant] ** 2).sum() / (v ** 2).sum())  # noqa: E731
        assert energy(p) < energy(vecs[:, top])
        # the N(0, I) fit of the checkpoint's MLP
        g_beta, g_gamma = _relu_mlp_gaussian_fit(torch.load(ck, weights_only=False), 7)
        g_vals = torch.linalg.eigvalsh(g_gamma)
        g_top = float(g_vals[g_vals.abs().argmax()])
        gauss = drawn[(s, "standard_normal_gamma")]
        assert gauss["eigval"] == pytest.approx(g_top, rel=1e-6)
        assert gauss["variance_share"] == pytest.approx(g_top ** 2 / float((g_vals ** 2).sum()), rel=1e-6)
        assert drawn[(s, "standard_normal_beta")]["variance"] == pytest.approx(float(g_beta @ g_beta), rel=1e-6)


def test_fig4_shows_the_configured_digit_at_the_first_figure_step_for_every_basis(res, tmp_path):
    from polyinterp.approx import MLP
    from polyinterp.mnist.approximants import load_gaussian_mixture
    from polyinterp.mnist.attack.bases import BASES, basis_approximants
    from polyinterp.mnist.attack.checkpoints import figure_steps
    from polyinterp.mnist.data import load_mnist
    from polyinterp.mnist.model import load_network
    from polyinterp.mnist.preprocess import apply_preprocess

    drawn = mnist_ablation.ablated_digits_figure(examples=str(res / "mnist/mlp_relu/svd_ablation_examples.pt"),
                                                 out=_out(tmp_path, "fig4"), params={"digit": 7})
    table = pd.read_parquet(res / "mnist/mlp_relu/svd_ablation.parquet")
    import yaml

    from workflow_helpers import REPO

    ablation = yaml.safe_load((REPO / "config.yaml").read_text())["mnist"]["ablation"]  # smoke keeps these
    first = figure_steps(table, ablation["figure_steps"], ablation["accuracy_level"])[0]
    assert drawn["digit"] == 7 and drawn["step"] == first.step and drawn["k"] == list(range(1, 11))
    assert drawn["bases"] == list(BASES) and drawn["chosen_as"] == first.label
    # independent route: the MLP's prediction on the first test '7', projected by a direct SVD of each
    # basis's β (the mixture's from the approx file, the others fitted afresh here)
    ckpt = torch.load(res / f"mnist/mlp_relu/seed0/ckpt/step{drawn['step']}.pt", weights_only=False)
    saved = torch.load(res / f"mnist/mlp_relu/seed0/approx/step{drawn['step']}.pt", weights_only=False)
    mlp = load_network(ckpt, "cpu").double()
    mix = load_gaussian_mixture(torch.load(res / "mnist/mixture.pt", weights_only=False), torch.device("cpu"))
    lin = basis_approximants(MLP.from_module(mlp), mix, None, ["gaussian", "standard_normal"])
    betas = {"mixture": saved["linear"]["beta"].double(), **{b: a.beta for b, a in lin.items()}}
    mnist = load_mnist(res / "data/mnist.npz")
    i = int(np.flatnonzero(mnist.test_labels == 7)[0])
    x = apply_preprocess(mnist.test_images[i:i + 1], ckpt["preprocess"], dtype=torch.float64)
    for basis, beta in betas.items():
        vh = torch.linalg.svd(beta, full_matrices=False)[2]
        for k, pred in zip(drawn["k"], drawn["digit_pred"][basis]):
            v = vh[:k].T
            assert pred == int(mlp(x - (x @ v) @ v.T).argmax()), (basis, k)


def _check_lines(lines, df, keys):
    for ln in lines:
        rows = df
        for key in keys:
            if ln[key] != "any":
                rows = rows[rows[key] == ln[key]]
        if ln["directions"] == "random":
            rows = rows[rows.basis == rows.basis.iloc[0]]  # the same draws under every basis
        by_k = rows.groupby("k").accuracy
        np.testing.assert_allclose(ln["accuracy"], by_k.mean().to_numpy())
        np.testing.assert_allclose(ln["min"], by_k.min().to_numpy())
        np.testing.assert_allclose(ln["max"], by_k.max().to_numpy())


def test_fig5_lines_are_the_attack_table_at_the_figure_steps(res, tmp_path):
    from polyinterp.mnist.attack.bases import basis_model_name
    from polyinterp.mnist.attack.checkpoints import figure_steps

    params = {"figure_steps": ["accuracy_level", 16, "last"], "accuracy_level": 0.96}
    lines = mnist_ablation.ablation_accuracy_figure(table=str(res / "mnist/mlp_relu/svd_ablation.parquet"),
                                                    out=_out(tmp_path, "fig5"), params=params)
    df = pd.read_parquet(res / "mnist/mlp_relu/svd_ablation.parquet")
    steps = [s.step for s in figure_steps(df, params["figure_steps"], params["accuracy_level"])]
    assert sorted({ln["step"] for ln in lines}) == sorted(steps) and 16 in steps
    svd = df[(df.directions == "svd") & df.step.isin(steps)]
    want = {(t, b, m) for t, b in set(zip(svd.step, svd.basis)) for m in ("mlp", "quadratic", basis_model_name(b))}
    assert {(ln["step"], ln["basis"], ln["predictor"]) for ln in lines if ln["directions"] == "svd"} == want
    _check_lines(lines, df, ("step", "basis", "predictor", "directions"))
    assert {ln["step"] for ln in lines if ln["directions"] == "random"} == set(steps)


def test_fig6_curves_are_the_attack_table_over_training(res, tmp_path):
    curves = mnist_ablation.attack_strength_figure(table=str(res / "mnist/mlp_relu/svd_ablation.parquet"),
                                                   out=_out(tmp_path, "fig6"), params={"run": "smoke"})
    df = pd.read_parquet(res / "mnist/mlp_relu/svd_ablation.parquet")
    assert {c["k"] for c in curves} == {0, 4, 10}
    clean = df[(df.k == 0) & (df.predictor == "mlp") & (df.directions == "svd") & (df.basis == "mixture")]
    clean = clean.groupby("step").accuracy.mean()
    (error,) = [c for c in curves if c["predictor"] == "clean"]  # the clean test error above the attack
    np.testing.assert_allclose(error["error"], 1 - clean.loc[error["step"]].to_numpy())
    assert min(error["step"]) > 0
    curves = [c for c in curves if c["predictor"] != "clean"]
    for c in curves:
        at = df[(df.k == c["k"]) & (df.step > 0)]
        if c["predictor"] == "random":
            at = at[(at.directions == "random") & (at.predictor == "mlp") & (at.basis == at.basis.iloc[0])]
        else:
            at = at[(at.directions == "svd") & (at.predictor == c["predictor"]) & (at.basis == c["basis"])]
        per_seed = at.groupby(["step", "seed"]).accuracy.mean().groupby("step")
        assert c["step"] == sorted(at.step.unique())
        np.testing.assert_allclose(c["accuracy"], per_seed.mean().to_numpy())
        np.testing.assert_allclose(c["min"], per_seed.min().to_numpy())
        np.testing.assert_allclose(c["clean_accuracy"], clean.loc[c["step"]].to_numpy())
    assert {(c["basis"], c["predictor"]) for c in curves if c["k"] == 4} >= {
        ("mixture", "mlp"), ("gaussian", "linear_gaussian"), ("standard_normal", "linear_standard_normal"), ("any", "random")}


def test_cubic_figures_draw_what_the_tables_say(res, tmp_path, readable):
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

    sl = cubic_slopes.slopes_figure(scan=[str(c / "slope_scan.parquet")], slopes=[str(c / "slopes.parquet")],
                                    seeds=str(res / "cubic/slopes_per_seed.parquet"), out=_out(tmp_path, "slopes"))
    per_seed = pd.read_parquet(res / "cubic/slopes_per_seed.parquet")
    assert [d["seed"] for d in sl["seeds"]] == per_seed.seed.tolist()
    best = pd.read_parquet(c / "slopes.parquet")
    assert sorted(sl["seeds"][0]["band_c"]) == sorted(best[best.is_band].c_best.tolist())
    # the seed band: one seed, so mean = min = max = that seed's median band R² at each coarse c
    scan = pd.read_parquet(c / "slope_scan.parquet")
    coarse = scan[(scan.stage == "coarse") & scan.is_band]
    if len(coarse):
        med = coarse.groupby("c").r2.median()
        np.testing.assert_allclose(sl["seed_band"]["mean"], med.to_numpy())
        np.testing.assert_allclose(sl["seed_band"]["min"], med.to_numpy())
        assert sl["seed_band"]["c"] == med.index.tolist() and set(sl["seed_band"]["n_seeds"]) == {1}

    cl = cubic_clamp.clamp_figure(curves=str(c / "clamp.parquet"), summary=str(c / "clamp_summary.parquet"),
                                  out=_out(tmp_path, "clamp"), params={"max_latents": 1})
    clamp = pd.read_parquet(c / "clamp.parquet")
    assert cl["latents"] == clamp.latent.drop_duplicates().head(1).tolist()
    assert cl["factors"] == sorted(clamp.factor.unique()) and cl["curves"] == sorted(clamp.curve.unique())


def test_capacity_and_grid_figures_draw_what_the_tables_say(res, tmp_path, readable):
    cap = pd.read_parquet(res / "cubic/capacity.parquet")
    drawn = cubic_capacity.capacity_figure(table=str(res / "cubic/capacity.parquet"), out=_out(tmp_path, "capacity"))
    assert drawn["order"] == cap.sort_values(["n_params", "variant"]).variant.tolist()  # one seed in smoke
    line = drawn["lines"][0]
    by = cap.set_index("variant").loc[line["variant"]]
    assert line["val_rel_mse"] == by.val_rel_mse.tolist() and line["n_band_latents"] == by.n_band_latents.tolist()

    grid = pd.read_parquet(res / "cubic/grid.parquet")
    lat = pd.read_parquet(res / "cubic/grid_latents.parquet")
    g = cubic_grid.grid_figure(table=str(res / "cubic/grid.parquet"), latents=str(res / "cubic/grid_latents.parquet"),
                               out=_out(tmp_path, "grid"))
    for network in ("single", "joint"):
        sub = grid[grid.network == network]
        share, landmark = np.asarray(g["heat"][network]), np.asarray(g["heat"][f"landmark_{network}"])
        enrichment = np.asarray(g["heat"][f"enrichment_{network}"])
        for r in sub.itertuples():
            assert share[r.ib, r.ia] == pytest.approx(r.frac_tracks_range, nan_ok=True)
            assert landmark[r.ib, r.ia] == pytest.approx(r.median_landmark_corr, nan_ok=True)
            assert enrichment[r.ib, r.ia] == pytest.approx(r.landmark_enrichment, nan_ok=True)
        live = lat[(lat.network == network) & (lat.active_frac > 0)]
        assert g["medians"][network]["range_corr"] == pytest.approx(live.range_corr.median())
        assert len(g["points"][network]["range_corr"]) == len(live)


def test_the_other_cubic_figures_are_readable(res, tmp_path, readable):
    """The cubic figures the tests above do not draw, from the smoke run's tables: no legend over data, no
    title over a panel's title (the fixture checks each before it is saved)."""
    c = res / "cubic" / "seed0"
    joint = cubic_joint_clamp.joint_clamp_figure(curves=str(c / "joint_clamp.parquet"),
                                                 fits=str(c / "joint_clamp_fits.parquet"), out=_out(tmp_path, "joint"))
    fits = pd.read_parquet(c / "joint_clamp_fits.parquet")
    assert joint["interventions"] == list(dict.fromkeys(fits.intervention))
    cubic_thresholds.thresholds_figure(tables=[str(c / "band_thresholds.parquet")], out=_out(tmp_path, "thresholds"))
    cubic_views.layers_figure(table=str(res / "cubic/layers.parquet"), out=_out(tmp_path, "layers"))
    cubic_views.training_figure(table=str(res / "cubic/training.parquet"), out=_out(tmp_path, "training"))
    assert len(readable) == 4
