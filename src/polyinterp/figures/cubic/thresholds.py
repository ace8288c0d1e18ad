"""Figure cubic_thresholds: band count and median slope c as each band threshold moves, per seed."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from polyinterp.cubic.probes.thresholds import CRITERIA  # noqa: E402
from polyinterp.figures.style import panel_legends_below  # noqa: E402
from polyinterp.io import load_parquet, save_figure  # noqa: E402

CARDANO_C = 1.0 / 3.0


def one_at_a_time(table: pd.DataFrame, name: str) -> pd.DataFrame:
    """Rows of one seed's ``table`` where every criterion but ``name`` is at its configured value,
    sorted by ``name``."""
    conf = table[table.at_config].iloc[0]
    keep = np.ones(len(table), bool)
    for other in CRITERIA:
        if other != name:
            keep &= (table[other] == conf[other]).to_numpy()
    return table[keep].sort_values(name)


def over_the_rest(table: pd.DataFrame, name: str) -> pd.DataFrame:
    """Per value of ``name`` in one seed's ``table``: the smallest and largest band count (``n_min``,
    ``n_max``) and median c (``c_min``, ``c_max``, NaN where no combination has a band) over every
    combination of the other three thresholds."""
    g = table.groupby(name)
    return pd.DataFrame({"n_min": g.n_band_latents.min(), "n_max": g.n_band_latents.max(),
                         "c_min": g.median_c.min(), "c_max": g.median_c.max()})


def thresholds_figure(*, tables: list[str], out: list[str]) -> dict:
    """Top row: band latents; bottom row: median slope-search c of the bands (Cardano's 1/3 dotted),
    each against one threshold with the other three at their configured values (dashed line), one
    line per seed of ``tables``; shaded: the range over every combination of the other three
    (:func:`over_the_rest`). The title gives the ranges over the whole grid. Returns what it drew:
    ``lines`` (criterion, seed, values, n_band_latents, median_c, spread) and the grid ``ranges``."""
    data = pd.concat([load_parquet(p) for p in tables], ignore_index=True)
    seeds = sorted(data.seed.unique())
    fig, axes = plt.subplots(2, len(CRITERIA), figsize=(3.2 * len(CRITERIA), 5.2), squeeze=False)
    cmap = plt.get_cmap("tab10")
    lines = []
    for k, name in enumerate(CRITERIA):
        for i, seed in enumerate(seeds):
            sub = one_at_a_time(data[data.seed == seed], name)
            lines.append({"criterion": name, "seed": int(seed), "values": sub[name].tolist(),
                          "n_band_latents": sub.n_band_latents.tolist(), "median_c": sub.median_c.tolist()})
            spread = over_the_rest(data[data.seed == seed], name)
            lines[-1]["spread"] = spread.reset_index().to_dict("list")
            color = cmap(i % 10)
            axes[0, k].plot(sub[name], sub.n_band_latents, "o-", ms=3, color=color, label=f"seed {seed}")
            axes[0, k].fill_between(spread.index, spread.n_min, spread.n_max, color=color, alpha=0.15, lw=0)
            axes[1, k].plot(sub[name], sub.median_c, "o-", ms=3, color=color)
            axes[1, k].fill_between(spread.index, spread.c_min, spread.c_max, color=color, alpha=0.15, lw=0)
        conf = float(data[data.at_config][name].iloc[0])
        for r in (0, 1):
            axes[r, k].axvline(conf, color="0.4", ls="--", lw=0.8)
            axes[r, k].tick_params(labelsize=6)
        axes[1, k].axhline(CARDANO_C, color="k", ls=":", lw=0.8)
        axes[1, k].set_xlabel(f"cubic.bands.{name}", fontsize=7)
    axes[0, 0].set_ylabel("band latents", fontsize=7)
    axes[1, 0].set_ylabel("median c (slope search)", fontsize=7)
    for ax in axes[0]:
        ax.yaxis.get_major_locator().set_params(integer=True)
    med = data.median_c.dropna()
    ranges = {"n_band_latents": [int(data.n_band_latents.min()), int(data.n_band_latents.max())],
              "median_c": [float(med.min()), float(med.max())] if len(med) else [float("nan")] * 2,
              "frac_with_bands": float((data.n_band_latents > 0).mean()),
              "combinations": int(len(data) // max(len(seeds), 1))}
    c_text = (f"median c {ranges['median_c'][0]:.3f}–{ranges['median_c'][1]:.3f} where defined"
              if len(med) else "median c undefined everywhere")
    fig.suptitle(f"band-threshold sensitivity, {len(seeds)} seed(s) × {ranges['combinations']} combinations: "
                 f"{ranges['n_band_latents'][0]}–{ranges['n_band_latents'][1]} band latents, "
                 f"{100 * ranges['frac_with_bands']:.0f}% of combinations find one, {c_text}", fontsize=8)
    fig.tight_layout()
    panel_legends_below(fig, [(None, axes[0, 0])])
    save_figure(fig, *out)
    return {"lines": lines, "ranges": ranges}
