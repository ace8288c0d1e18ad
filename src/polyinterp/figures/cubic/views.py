"""Figures cubic_layers and cubic_training: the SAE pipeline's headline numbers against the hidden
layer read and against the regressor's training step (tables ``results/cubic/layers.parquet`` and
``results/cubic/training.parquet``, :mod:`polyinterp.cubic.views.summary`)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import NullLocator  # noqa: E402

from polyinterp.figures.style import panel_legends_below  # noqa: E402
from polyinterp.io import load_parquet, save_figure  # noqa: E402

CARDANO_C = 1.0 / 3.0
PANELS = ("r2_heldout", "n_band_latents", "c", "slope_r2")


def _views_figure(data: pd.DataFrame, x: str, xlabel: str, out: list[str], title: str, log_x: bool,
                  extra: tuple[str, str] | None = None) -> dict:
    """One line per seed against ``x`` in each panel; ``extra`` (column, label) adds a first panel
    on a log y axis. Returns ``lines``: per seed the x values and every column drawn."""
    seeds = sorted(data.seed.unique())
    n = len(PANELS) + (extra is not None)
    fig, axes = plt.subplots(1, n, figsize=(3.3 * n, 3.4), squeeze=False)
    axes = list(axes[0])
    cmap = plt.get_cmap("tab10")
    drawn_cols = ["r2_heldout", "n_band_latents", "median_c", "best_slope_c", "best_slope_r2", "best_r2_at_cardano"]
    if extra is not None:
        drawn_cols.insert(0, extra[0])
    ticks = [int(v) for v in sorted(data[x].unique())]
    lines = []
    for i, seed in enumerate(seeds):
        sub = data[data.seed == seed].sort_values(x)
        lines.append({"seed": int(seed), x: sub[x].tolist(), **{c: sub[c].tolist() for c in drawn_cols}})
        color, label = cmap(i % 10), f"seed {seed}"
        axs = iter(axes)
        if extra is not None:
            ax = next(axs)
            ax.plot(sub[x], sub[extra[0]], "o-", ms=3, color=color, label=label)
            ax.set_yscale("log")
            ax.set_ylabel(extra[1], fontsize=7)
        ax = next(axs)
        ax.plot(sub[x], sub.r2_heldout, "o-", ms=3, color=color, label=label)
        ax.set_ylabel("SAE held-out R²", fontsize=7)
        ax = next(axs)
        ax.plot(sub[x], sub.n_band_latents, "o-", ms=3, color=color)
        ax.set_ylabel("band latents", fontsize=7)
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax = next(axs)
        ax.plot(sub[x], sub.median_c, "o-", ms=4, color=color)
        ax.plot(sub[x], sub.best_slope_c, "s", ms=4, mfc="none", color=color)
        ax.set_ylabel("c: median of bands (●), best latent (□)", fontsize=7)
        ax = next(axs)
        ax.plot(sub[x], sub.best_slope_r2, "o-", ms=3, color=color)
        ax.plot(sub[x], sub.best_r2_at_cardano, "^--", ms=3, color=color)
        ax.set_ylabel("best slope-search R² (●), at c = 1/3 (▲)", fontsize=7)
    axes[-2].axhline(CARDANO_C, color="k", ls=":", lw=0.8)
    for ax in axes:
        ax.set_xlabel(xlabel, fontsize=7)
        ax.tick_params(which="both", labelsize=6)
        if log_x:  # log steps; symlog (linear below the first positive step) when step 0 is read
            positive = [t for t in ticks if t > 0]
            if min(ticks) > 0:
                ax.set_xscale("log")
            elif positive:
                ax.set_xscale("symlog", linthresh=min(positive))
            ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticks(ticks, [str(t) for t in ticks], rotation=45 if log_x and len(ticks) > 4 else 0)
    fig.suptitle(title, fontsize=8)
    fig.tight_layout()
    panel_legends_below(fig, [(None, axes[0])])
    save_figure(fig, *out)
    return {"lines": lines}


def layers_figure(*, table: str, out: list[str]) -> dict:
    """Against the hidden layer (1 nearest the input; the last is today's pipeline): SAE held-out R²,
    band latents, the bands' median slope-search c and the best latent's c (Cardano's 1/3 dotted),
    the best slope-search R² and the best R² at c = 1/3; one line per seed. Returns ``lines``."""
    data = load_parquet(table)
    widths = data.drop_duplicates("layer").sort_values("layer")
    shape = " → ".join(f"L{int(r.layer)}:{int(r.width)}" for r in widths.itertuples())
    counts = data.groupby("layer").n_band_latents.sum()
    first = [int(v) for v in counts.index[counts > 0]]
    where = f"first band latents at layer {first[0]}" if first else "no band latents at any layer"
    return _views_figure(data, "layer", "hidden layer", out,
                         f"SAEs on every hidden layer ({shape}), {data.seed.nunique()} seed(s): {where}",
                         log_x=False)


def training_figure(*, table: str, out: list[str]) -> dict:
    """Against the regressor's training step (log axis, linear below the first step when step 0 is
    read; the last hidden layer of each eval
    checkpoint): the regressor's validation rel-MSE, SAE held-out R², band latents, median and best c
    (Cardano's 1/3 dotted), best slope-search R² and at c = 1/3; one line per seed. Returns ``lines``."""
    data = load_parquet(table)
    counts = data.groupby("step").n_band_latents.sum()
    first = [int(v) for v in counts.index[counts > 0]]
    where = f"first band latents at step {first[0]}" if first else "no band latents at any step"
    steps = ", ".join(str(int(s)) for s in sorted(data.step.unique()))
    return _views_figure(data, "step", "training step", out,
                         f"SAEs across training (steps {steps}), {data.seed.nunique()} seed(s): {where}",
                         log_x=True, extra=("val_rel_mse", "regressor val rel-MSE"))
