"""Figure cubic_slopes: slope-search R² against c for band latents, the median and Cardano's 1/3."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from polyinterp.figures.style import panel_legends_below  # noqa: E402
from polyinterp.io import load_parquet, save_figure  # noqa: E402

CARDANO = 1.0 / 3.0


def seed_band(scans: pd.DataFrame) -> pd.DataFrame:
    """Per coarse c: mean, min and max over seeds of each seed's median R² over its band latents
    (seeds without band latents are left out). Columns c, mean, min, max, n_seeds."""
    coarse = scans[(scans.stage == "coarse") & scans.is_band]
    per_seed = coarse.groupby(["seed", "c"])["r2"].median()
    stats = per_seed.groupby("c").agg(["mean", "min", "max", "count"]).reset_index()
    return stats.rename(columns={"count": "n_seeds"})


def slopes_figure(*, scan: list[str], slopes: list[str], seeds: str, out: list[str]) -> dict:
    """Left: the first seed's coarse slope scan (R² against c) of its band latents (or, without
    bands, its 5 best latents), its median c and Cardano's 1/3, and over all seeds (``scan``: one
    file per seed) the mean and min–max band of each seed's median band-latent R²(c); right: every
    seed's band slopes and median. Returns what it drew: ``scan_latents``, ``seed_band`` (c, mean,
    min, max, n_seeds) and per seed ``median_c`` and ``band_c``."""
    scans = pd.concat([load_parquet(p) for p in scan], ignore_index=True)
    scan = scans[scans.seed == scans.seed.iloc[0]] if len(scans) else scans  # the first configured seed
    bests = pd.concat([load_parquet(p) for p in slopes], ignore_index=True)
    per_seed = load_parquet(seeds)
    drawn = {"scan_latents": [], "seeds": []}
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [2, 1]})
    seed0 = int(scan.seed.iloc[0]) if len(scan) else int(per_seed.seed.iloc[0])
    coarse = scan[scan.stage == "coarse"]
    band = coarse[coarse.is_band]
    shown = band if len(band) else coarse[coarse.latent.isin(
        bests[bests.seed == seed0].nlargest(5, "r2_best").latent)]
    for j, s in shown.groupby("latent"):
        line, = ax0.plot(s.c, s.r2, lw=1.2, label=f"latent {j}")
        drawn["scan_latents"].append(int(j))
        b = bests[(bests.seed == seed0) & (bests.latent == j)]
        if len(b):
            ax0.plot(b.c_best, b.r2_best, "o", color=line.get_color(), ms=4)
    band_stats = seed_band(scans)
    if len(band_stats):
        n = int(band_stats.n_seeds.max())
        ax0.plot(band_stats.c, band_stats["mean"], color="k", lw=2, alpha=0.7,
                 label=f"median band R², mean over {n} seed(s)")
        ax0.fill_between(band_stats.c, band_stats["min"], band_stats["max"], color="k", alpha=0.12, lw=0,
                         label="min–max over seeds")
    drawn["seed_band"] = {k: band_stats[k].tolist() for k in ("c", "mean", "min", "max", "n_seeds")}
    med = per_seed[per_seed.seed == seed0].median_c
    if len(med) and pd.notna(med.iloc[0]):
        ax0.axvline(med.iloc[0], color="k", lw=1.2, label=f"median c = {med.iloc[0]:.3f}")
    ax0.axvline(CARDANO, color="r", ls="--", lw=1, label="Cardano 1/3")
    ax0.set(xlabel="c", ylabel="held-out R² (bucket means of x + c·a)",
            title=f"seed {seed0}: " + ("band latents" if len(band) else "no bands; best 5 latents"))
    ax0.set_ylim(bottom=max(-0.1, float(shown.r2.min()) if len(shown) else -0.1))
    for i, row in enumerate(per_seed.itertuples()):
        b = bests[(bests.seed == row.seed) & bests.is_band]
        ax1.plot([i] * len(b), b.c_best, "o", color="0.6", ms=4)
        drawn["seeds"].append({"seed": int(row.seed), "median_c": float(row.median_c), "band_c": b.c_best.tolist()})
        if pd.notna(row.median_c):
            ax1.plot([i], [row.median_c], "ks", ms=7)
    ax1.axhline(CARDANO, color="r", ls="--", lw=1, label="1/3")
    ax1.set_xticks(range(len(per_seed)), [f"seed {s}" for s in per_seed.seed])
    ax1.set(ylabel="best c", title="band latents (grey) and median (black) per seed")
    fig.tight_layout()
    panel_legends_below(fig, [("left: held-out R² against c", ax0), ("right: best c per seed", ax1)])
    save_figure(fig, *out)
    return drawn
