"""Every MNIST figure drawn from small hand-built tables (no pipeline run) is readable: no legend holds
more than 8 entries, and no legend covers plotted data (checked with matplotlib's renderer: no point of
any line, nor any point along its segments, falls inside a legend's window extent). fig2 holds the
linear and the quadratic approximant only; fig1 annotates its mixture panels with the table's FVU and
shows the paper's checkpoints 2^12 and 2^14 in the paper and the default config."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from polyinterp.figures.mnist import ablation, curves, features, models
from figure_checks import assert_readable
from polyinterp.io import save_parquet, save_torch
from polyinterp.rules import PAPER_FEATURE_STEPS, checkpoint_steps, panel_steps

STEPS = [0, 16, 64, 256, 1024, 4096, 16384]
SEEDS = [0, 1]
RUN = {"run": "hand-built tables"}


def _metrics() -> pd.DataFrame:
    """A metrics table of the layout the pipeline writes: every approximant, fit and distribution."""
    rng = np.random.default_rng(0)
    kinds = [("linear", "mixture"), ("linear", "gaussian"), ("quadratic", "mixture"), ("quadratic", "gaussian"),
             ("quadratic_sgd", "mixture"), ("quadratic_pc50", "mixture"), ("cubic_pc50", "mixture"),
             *((f"gaussian_deg{n}", "gaussian") for n in (1, 2, 3))]
    rows = []
    for seed, step in itertools.product(SEEDS, STEPS):
        for name, fit in kinds:
            if name == "quadratic_sgd" and step < 1024:
                continue
            base = 0.2 if name.endswith(("deg1", "linear")) or name == "linear" else 0.02
            for metric, dist in (("fvu", "mixture_exact"), ("fvu", "mixture"), ("fvu", "test"), ("kl", "mixture"),
                                 ("kl", "test")):
                if dist == "mixture_exact" and name.startswith("gaussian_deg"):
                    continue
                rows.append(dict(model="mlp_relu", seed=seed, step=step, approximant=name, fit=fit, distribution=dist,
                                 metric=metric, value=base * (1 + step / 4096) * rng.uniform(0.8, 1.2), se=0.0))
    return pd.DataFrame(rows)


def _attack() -> pd.DataFrame:
    """An attack table (polyinterp.mnist.attack.ablation.COLUMNS) over every k, basis and predictor."""
    rng = np.random.default_rng(1)
    rows = []
    predictors = {"mixture": "linear", "gaussian": "linear_gaussian", "standard_normal": "linear_standard_normal"}
    for seed, step, (basis, lin), k in itertools.product(SEEDS, STEPS, predictors.items(), range(11)):
        clean = 0.1 + 0.88 * (1 - np.exp(-step / 500))
        for pred in ("mlp", lin, "quadratic"):
            rows.append(dict(model="mlp_relu", seed=seed, step=step, basis=basis, k=k, directions="svd", draw=0,
                             predictor=pred, accuracy=clean if k == 0 else clean * rng.uniform(0.3, 1) / (1 + k / 4)))
        for draw in range(2):
            rows.append(dict(model="mlp_relu", seed=seed, step=step, basis=basis, k=k, directions="random",
                             draw=draw, predictor="mlp", accuracy=clean * rng.uniform(0.95, 1)))
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    d = tmp_path_factory.mktemp("tables")
    save_parquet(_metrics(), d / "metrics.parquet")
    save_parquet(_attack(), d / "svd_ablation.parquet")
    return d


@pytest.fixture
def drawn(monkeypatch):
    """The figures the figure functions would save, kept open (save_figure replaced) for inspection."""
    import matplotlib.pyplot as plt

    figs = []
    for module in (ablation, curves, features, models):
        monkeypatch.setattr(module, "save_figure", lambda fig, *paths: figs.append(fig))
    yield figs
    for fig in figs:
        plt.close(fig)


@pytest.mark.parametrize("draw", [curves.fvu_figure, curves.test_images_figure, curves.fits_figure,
                                  curves.degrees_figure, models.models_figure])
def test_metrics_figures_have_legends_beside_the_data(tables, tmp_path, drawn, draw):
    draw(metrics=str(tables / "metrics.parquet"), out=[str(tmp_path / "f.png")], params=RUN)
    (fig,) = drawn
    assert assert_readable(fig)
    assert "hand-built tables" in fig._suptitle.get_text() and "2 seeds (0, 1)" in fig._suptitle.get_text()


def test_fig2_holds_the_linear_and_the_quadratic_approximant_only(tables, tmp_path, drawn):
    lines = curves.fvu_figure(metrics=str(tables / "metrics.parquet"), out=[str(tmp_path / "f.png")], params=RUN)
    assert {(ln["approximant"], ln["fit"]) for ln in lines} == {("linear", "mixture"), ("quadratic", "mixture"),
                                                                 ("quadratic_sgd", "mixture")}
    assert {(ln["metric"], ln["distribution"]) for ln in lines} == {("fvu", "mixture_exact"), ("kl", "mixture")}
    sgd = [ln for ln in lines if ln["approximant"] == "quadratic_sgd"]
    assert all(ln["step"] == [1024, 4096, 16384] for ln in sgd)  # every step the table has it at
    (fig,) = drawn
    assert [ax.get_yscale() for ax in fig.axes] == ["log", "log"]
    metrics = _metrics()
    for ln in lines:
        rows = metrics[(metrics.metric == ln["metric"]) & (metrics.distribution == ln["distribution"])
                       & (metrics.approximant == ln["approximant"]) & (metrics.fit == ln["fit"]) & (metrics.step > 0)]
        by = rows.groupby("step").value
        np.testing.assert_allclose(ln["mean"], by.mean().to_numpy())
        np.testing.assert_allclose(ln["min"], by.min().to_numpy())
        assert ln["n_seeds"] == 2


def test_the_other_fits_have_their_own_figures(tables, tmp_path, drawn):
    fits = curves.fits_figure(metrics=str(tables / "metrics.parquet"), out=[str(tmp_path / "f.png")], params=RUN)
    assert {(ln["approximant"], ln["fit"]) for ln in fits} == {("linear", "mixture"), ("linear", "gaussian"),
                                                                ("quadratic", "mixture"), ("quadratic", "gaussian")}
    deg = curves.degrees_figure(metrics=str(tables / "metrics.parquet"), out=[str(tmp_path / "g.png")], params=RUN)
    assert {ln["approximant"] for ln in deg} == {"quadratic", "quadratic_pc50", "cubic_pc50", "gaussian_deg1",
                                                 "gaussian_deg2", "gaussian_deg3"}
    assert {ln["distribution"] for ln in deg if ln["approximant"].startswith("gaussian_deg")} == {"mixture"}


def test_attack_figures_have_legends_beside_the_data(tables, tmp_path, drawn):
    table = str(tables / "svd_ablation.parquet")
    ablation.ablation_accuracy_figure(table=table, out=[str(tmp_path / "a.png")],
                                      params={**RUN, "figure_steps": ["accuracy_level", "last"], "accuracy_level": 0.96})
    curves6 = ablation.attack_strength_figure(table=table, out=[str(tmp_path / "b.png")], params=RUN)
    for fig in drawn:
        assert assert_readable(fig)
    # fig6: the clean error on a log axis above the attack, all over the training step
    fig6 = drawn[1]
    assert fig6.axes[0].get_yscale() == "log" and {ax.get_xscale() for ax in fig6.axes} == {"log"}
    clean = next(c for c in curves6 if c["predictor"] == "clean")
    acc = _attack()
    acc = acc[(acc.k == 0) & (acc.predictor == "mlp") & (acc.directions == "svd") & (acc.basis == "mixture")
              & (acc.step > 0)].groupby("step").accuracy
    np.testing.assert_allclose(clean["error"], 1 - acc.mean().to_numpy())
    np.testing.assert_allclose(clean["max"], 1 - acc.min().to_numpy())


def test_a_legend_over_data_is_caught():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], label="a")
    ax.legend(loc="center")
    with pytest.raises(AssertionError):
        assert_readable(fig)
    plt.close(fig)


# ------------------------------------------------------------------------------------------------ fig1
def _fig1_files(tmp_path, steps):
    """A 4×4-pixel problem: a mixture file, and per step a ReLU MLP checkpoint and its approx file."""
    from polyinterp.approx import Approximant, GaussianMixture, linear_approximant
    from polyinterp.mnist.model import make_network, network_arch, polynomial_network

    d, dt = 16, torch.float64
    gen = torch.Generator().manual_seed(0)
    means = torch.randn(3, d, generator=gen, dtype=dt)
    a = torch.randn(3, d, d, generator=gen, dtype=dt) / d ** 0.5
    covs = a @ a.transpose(1, 2) + 0.1 * torch.eye(d, dtype=dt)
    weights = torch.tensor([0.5, 0.3, 0.2], dtype=dt)
    pre = {"pool": 1, "center": False}
    save_torch({"weights": weights, "means": means, "covs": covs, "preprocess": pre}, tmp_path / "mixture.pt")
    mix = GaussianMixture(weights, means, covs)
    approx, ckpt = [], []
    for step in steps:
        torch.manual_seed(step)
        net = make_network(d, 8, 3).double().eval()
        save_torch({"state": net.state_dict(), "arch": network_arch(net), "model": "mlp_relu", "step": step,
                    "seed": 0, "preprocess": pre}, tmp_path / f"ckpt{step}.pt")
        lin = linear_approximant(polynomial_network(net), mix)
        g = torch.randn(3, d, d, generator=gen, dtype=dt) * 0.01
        quad = Approximant(lin.alpha, lin.beta, g + g.transpose(1, 2))
        save_torch({"linear": lin.state_dict(), "quadratic": quad.state_dict(), "step": step, "seed": 0,
                    "model": "mlp_relu", "preprocess": pre}, tmp_path / f"approx{step}.pt")
        approx.append(str(tmp_path / f"approx{step}.pt"))
        ckpt.append(str(tmp_path / f"ckpt{step}.pt"))
    metrics = pd.DataFrame([dict(model="mlp_relu", seed=0, step=s, approximant=n, fit="mixture",
                                 distribution="mixture_exact", metric="fvu", value=v + s / 1e5, se=0.0)
                            for s in steps for n, v in (("linear", 0.15), ("quadratic", 0.01))])
    save_parquet(metrics, tmp_path / "metrics.parquet")
    return approx, ckpt, metrics


def test_fig1_puts_the_features_under_the_data_first_each_with_its_fvu(tmp_path, drawn):
    steps = [4096, 16384]
    approx, ckpt, metrics = _fig1_files(tmp_path, steps)
    panels = features.features_figure(approx=approx, ckpt=ckpt, mixture=str(tmp_path / "mixture.pt"),
                                      metrics=str(tmp_path / "metrics.parquet"), out=[str(tmp_path / "fig1.png")],
                                      params={**RUN, "digit": 1})
    rows = [key for key, _ in features.ROWS]
    assert rows[:2] == ["mixture_linear_pattern", "mixture_gamma_whitened"]  # what the network uses, first
    assert rows[2:4] == ["mixture_beta", "mixture_gamma_raw"]  # the raw coefficients, apart
    assert [(p["step"], p["row"]) for p in panels] == [(s, r) for s in steps for r in rows]
    (fig,) = drawn
    assert len(fig.subfigs) == len(features.GROUPS)
    fvu = metrics.set_index(["step", "approximant"]).value
    titles = [ax.get_title() for ax in fig.axes]
    for p in panels:
        if p["row"].startswith("mixture"):
            want = fvu[(p["step"], "linear" if "linear" in p["row"] or "beta" in p["row"] else "quadratic")]
            assert p["fvu"] == pytest.approx(want)
            assert any(f"FVU {want:.3f}" in t for t in titles)
    assert "hand-built tables" in fig._suptitle.get_text()


@pytest.mark.parametrize("config", ["config.yaml", "workflow/configs/paper.yaml"])
def test_fig1_shows_the_papers_checkpoints(config):
    from workflow_helpers import REPO

    default = yaml.safe_load((REPO / "config.yaml").read_text())["mnist"]
    mnist = yaml.safe_load((REPO / config).read_text())["mnist"]
    checkpoints = {**default["train"]["checkpoints"], **mnist.get("train", {}).get("checkpoints", {})}
    panels = {**default["figures"], **mnist.get("figures", {})}["panels"]
    steps = panel_steps(checkpoint_steps(**checkpoints), panels)
    assert set(PAPER_FEATURE_STEPS) <= set(steps) and len(steps) == panels
    assert steps == sorted(steps) and steps[-1] == 2 ** checkpoints["last_pow"]


def test_panel_steps_spread_in_log_step_around_the_required_ones():
    available = [0] + [2 ** i for i in range(4, 19)]
    assert panel_steps(available, 4, required=()) == [16, 2048, 32768, 262144]  # ties: the later step
    assert panel_steps(available, 100) == available[1:]
    assert panel_steps([0, 16, 32], 5) == [16, 32]
    picked = panel_steps(available, 6)
    assert {16, 4096, 16384, 262144} <= set(picked) and len(picked) == 6


def test_cubic_fit_legend_says_seed_by_colour_and_split_by_line_style(tmp_path, monkeypatch):
    """At the paper config's 3 seeds the training-curve panel used to list one entry per seed and split (9,
    more than a panel may hold); colour now says the seed and line style the split, one entry each, and
    every curve of the table is drawn (hand-built tables, 3 seeds)."""
    import matplotlib.pyplot as plt
    from polyinterp.figures.cubic import fit as cubic_fit

    figs = []
    monkeypatch.setattr(cubic_fit, "save_figure", lambda fig, *paths: figs.append(fig))
    x = np.linspace(-2, 2, 21)
    curves_df = pd.concat([pd.DataFrame({"seed": 0, "curve": i, "a": a, "b": b, "in_range": i < 2, "x": x,
                                         "y_true": x ** 3 + a * x ** 2 + b * x, "y_model": x ** 3 + a * x ** 2 + b * x + 0.01})
                           for i, (a, b) in enumerate([(0, -1), (1, -2), (2.5, -2.5)])], ignore_index=True)
    save_parquet(curves_df, tmp_path / "curves.parquet")
    train_paths, fit_paths = [], []
    for seed in (0, 1, 2):
        steps = np.array([500, 1000, 2000, 4000])
        save_parquet(pd.DataFrame([{"seed": seed, "split": split, "step": int(s), "rel_mse": 1e-3 / (j + 1) / s * 500}
                                   for split in ("train", "val", "out_of_range") for j, s in enumerate(steps)]),
                     tmp_path / f"train{seed}.parquet")
        save_parquet(pd.DataFrame({"seed": [seed], "split": ["val"], "rel_mse": [2e-5], "target_rel_mse": [1e-4]}),
                     tmp_path / f"fit{seed}.parquet")
        train_paths.append(str(tmp_path / f"train{seed}.parquet"))
        fit_paths.append(str(tmp_path / f"fit{seed}.parquet"))
    drawn_lines = cubic_fit.fit_figure(curves=str(tmp_path / "curves.parquet"), train_curves=train_paths, fit=fit_paths,
                                       out=[str(tmp_path / "f.png")])
    (fig,) = figs
    legends = assert_readable(fig)
    entries = {lg.get_title().get_text(): [t.get_text() for t in lg.get_texts()] for lg in legends}
    assert entries["right: training curves, colour: the seed"] == ["seed 0", "seed 1", "seed 2"]
    assert entries["right: line style: the split"] == ["val", "out_of_range", "train"]
    assert len(drawn_lines["training"]) == 9 and len(fig.axes[1].get_lines()) == 9 + 1  # and the target line
    plt.close(fig)


def test_the_grid_enrichment_axis_stays_readable_at_seven_by_seven():
    """cubic_grid's enrichment panel lays its 49 points out a-major; its tick labels (one per a) do not
    overlap each other at the paper config's 7 × 7 and the figure's own size, where 49 labels "a,b" did;
    and each a's label sits at the middle of its group of b."""
    import matplotlib.pyplot as plt
    from polyinterp.figures.cubic.grid import grouped_ab_axis

    vals = [-2, -1.3, -0.67, 0, 0.67, 1.3, 2]
    fig, axes = plt.subplots(1, 5, figsize=(18, 3.7))
    ax = axes[3]
    ax.plot(np.arange(49), np.linspace(0.2, 1.3, 49), "o", ms=3)
    grouped_ab_axis(ax, vals, vals)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    labels = [t for t in ax.get_xticklabels() if t.get_text()]
    assert [t.get_text() for t in labels] == ["-2", "-1.3", "-0.67", "0", "0.67", "1.3", "2"]
    boxes = [t.get_window_extent(renderer) for t in labels]
    assert not any(b1.overlaps(b2) for b1, b2 in itertools.combinations(boxes, 2))
    np.testing.assert_allclose(ax.get_xticks(), [3 + 7 * i for i in range(7)])
    # a tick at every point (matplotlib drops the minor ticks under the major ones)
    assert sorted({*ax.get_xticks(minor=True), *ax.get_xticks()}) == list(range(49))
    assert "b from -2 to 2" in ax.get_xlabel()
    plt.close(fig)
