"""Figure cubic_capacity: the regressor's fit and the SAE pipeline's headline numbers against the
regressor's size (table ``results/cubic/capacity.parquet``, :mod:`polyinterp.cubic.views.capacity`)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from polyinterp.figures.style import panel_legends_below  # noqa: E402
from polyinterp.io import load_parquet, save_figure  # noqa: E402

CARDANO_C = 1.0 / 3.0


def capacity_figure(*, table: str, out: list[str]) -> dict:
    """Against the variant (ordered by parameter count, labelled with its widths): validation rel-MSE
    (log), SAE held-out R², band latents, the bands' median slope-search c (●) and the best latent's
    c (□) with Cardano's 1/3 dotted; one line per seed. Returns ``order`` (variants left to right) and
    ``lines`` (per seed, every column drawn in that order)."""
    data = load_parquet(table)
    order = list(data.drop_duplicates("variant").sort_values(["n_params", "variant"]).variant)
    pos = {v: i for i, v in enumerate(order)}
    labels = [f"{v}\n{w}" for v, w in data.drop_duplicates("variant").set_index("variant").loc[order].widths.items()]
    fig, axes = plt.subplots(1, 4, figsize=(13.2, 3.6), squeeze=False)
    axes = list(axes[0])
    cmap = plt.get_cmap("tab10")
    cols = ["val_rel_mse", "r2_heldout", "n_band_latents", "median_c", "best_slope_c"]
    lines = []
    for i, seed in enumerate(sorted(data.seed.unique())):
        sub = data[data.seed == seed].assign(pos=lambda d: d.variant.map(pos)).sort_values("pos")
        lines.append({"seed": int(seed), "variant": sub.variant.tolist(), **{c: sub[c].tolist() for c in cols}})
        color, label = cmap(i % 10), f"seed {seed}"
        axes[0].plot(sub.pos, sub.val_rel_mse, "o-", ms=4, color=color, label=label)
        axes[1].plot(sub.pos, sub.r2_heldout, "o-", ms=4, color=color)
        axes[2].plot(sub.pos, sub.n_band_latents, "o-", ms=4, color=color)
        axes[3].plot(sub.pos, sub.median_c, "o-", ms=4, color=color)
        axes[3].plot(sub.pos, sub.best_slope_c, "s", ms=5, mfc="none", color=color)
    axes[0].set_yscale("log")
    axes[3].axhline(CARDANO_C, color="k", ls=":", lw=0.8)
    axes[2].yaxis.get_major_locator().set_params(integer=True)
    for ax, ylabel in zip(axes, ["regressor val rel-MSE", "SAE held-out R²", "band latents",
                                 "c: median of bands (●), best latent (□)"]):
        ax.set_ylabel(ylabel, fontsize=7)
        ax.set_xticks(range(len(order)), labels, fontsize=5.5, rotation=30, ha="right")
        ax.tick_params(axis="y", which="both", labelsize=6)
    mark = data[data.is_model].variant.unique()
    fig.suptitle(f"Regressor capacity, {data.seed.nunique()} seed(s), {len(order)} variants (by parameter count)"
                 + (f"; {mark[0]} is cubic.model.widths" if len(mark) else ""), fontsize=8)
    fig.tight_layout()
    panel_legends_below(fig, [(None, axes[0])])
    save_figure(fig, *out)
    return {"order": order, "lines": lines}
