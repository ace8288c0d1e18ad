"""Figure cubic_grid: do the latents track the x range or the landmarks, for one network per
polynomial against the (x, a, b) regressor at the same (a, b)? (tables ``results/cubic/grid.parquet``
and ``grid_latents.parquet``, :mod:`polyinterp.cubic.views.grid`)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from polyinterp.figures.style import panel_legends_below  # noqa: E402
from polyinterp.io import load_parquet, save_figure  # noqa: E402

TITLES = {"single": "one network per (a, b)", "joint": "(x, a, b) regressor at (a, b)"}
COLORS = {"single": "tab:orange", "joint": "tab:blue"}


def heat(table, network: str, column: str) -> tuple[np.ndarray, list[float], list[float]]:
    """``column`` of ``network`` on the (a, b) grid, averaged over seeds: ([n_b, n_a], a values, b values)."""
    sub = table[table.network == network]
    m = sub.groupby(["ib", "ia"])[column].mean()
    a_vals = sub.drop_duplicates("ia").sort_values("ia").a.tolist()
    b_vals = sub.drop_duplicates("ib").sort_values("ib").b.tolist()
    grid = np.full((len(b_vals), len(a_vals)), np.nan)
    for (ib, ia), v in m.items():
        grid[int(ib), int(ia)] = v
    return grid, a_vals, b_vals


def _axes_ab(ax, a_vals, b_vals) -> None:
    ax.set_xticks(range(len(a_vals)), [f"{v:.2g}" for v in a_vals], fontsize=6)
    ax.set_yticks(range(len(b_vals)), [f"{v:.2g}" for v in b_vals], fontsize=6)
    ax.set_xlabel("a", fontsize=7)
    ax.set_ylabel("b", fontsize=7)


def grouped_ab_axis(ax, a_vals, b_vals) -> None:
    """The x axis of points laid out a-major (a₀b₀, a₀b₁, …): one labelled tick per a at the middle of
    its group, a minor tick per point, faint lines between groups, and the order of b in the axis label,
    so the labels stay readable at the paper config's 7 × 7 (49 labels of "a,b" did not)."""
    nb = len(b_vals)
    ax.set_xticks([i * nb + (nb - 1) / 2 for i in range(len(a_vals))], [f"{a:.2g}" for a in a_vals], fontsize=6)
    ax.set_xticks(range(len(a_vals) * nb), minor=True)
    for i in range(1, len(a_vals)):
        ax.axvline(i * nb - 0.5, color="0.85", lw=0.6, zorder=0)
    ax.set_xlabel(f"a; within each a, b from {b_vals[0]:.2g} to {b_vals[-1]:.2g}", fontsize=7)


def grid_figure(*, table: str, latents: str, out: list[str]) -> dict:
    """Left two panels, over (a, b), one network per polynomial and the (x, a, b) regressor: the live
    latents' median best landmark correlation (colour) and, written in each cell, the share of live
    latents that track the x range (range score above the landmark correlation); third: every live
    latent's range score against its best landmark correlation, both networks (diagonal: equal);
    fourth: the landmark enrichment (share of live latents peaking within bump_width of a landmark
    over the share of the x range that is; 1 = no preference) of both networks at every grid point;
    fifth: the single networks' rel-MSE on the x line over (a, b). Seeds are averaged in the heat
    maps. Returns the ``heat`` grids (share tracking the range per network, ``landmark_<network>``,
    ``enrichment_<network>``, ``rel_mse_single``), the ``points`` scattered and the ``medians`` per
    network."""
    t, lat = load_parquet(table), load_parquet(latents)
    fig, axes = plt.subplots(1, 5, figsize=(18, 3.7), squeeze=False)
    axes = list(axes[0])
    drawn = {}
    for ax, network in zip(axes[:2], ("single", "joint")):
        share, a_vals, b_vals = heat(t, network, "frac_tracks_range")
        lm, _, _ = heat(t, network, "median_landmark_corr")
        drawn[network], drawn[f"landmark_{network}"] = share.tolist(), lm.tolist()
        im = ax.imshow(lm, origin="lower", vmin=-1, vmax=1, cmap="coolwarm", aspect="auto")
        size = 6 if max(len(a_vals), len(b_vals)) <= 4 else 4.5
        for ib in range(len(b_vals)):
            for ia in range(len(a_vals)):
                if np.isfinite(share[ib, ia]):
                    ax.text(ia, ib, f"{100 * share[ib, ia]:.0f}%", ha="center", va="center", fontsize=size)
        _axes_ab(ax, a_vals, b_vals)
        ax.set_title(f"{TITLES[network]}:\nmedian landmark r (colour), % tracking the x range", fontsize=7)
        fig.colorbar(im, ax=ax, fraction=0.046).ax.tick_params(labelsize=6)
    live = lat[lat.active_frac > 0]
    points, medians = {}, {}
    ax = axes[2]
    for network in ("joint", "single"):
        sub = live[live.network == network]
        points[network] = {"landmark_corr": sub.landmark_corr.tolist(), "range_corr": sub.range_corr.tolist()}
        medians[network] = {"range_corr": float(sub.range_corr.median()),
                            "landmark_corr": float(sub.landmark_corr.median())}
        ax.scatter(sub.landmark_corr, sub.range_corr, s=4, alpha=0.4, color=COLORS[network], lw=0,
                   label=f"{TITLES[network]} (median {medians[network]['range_corr']:.2f} vs "
                         f"{medians[network]['landmark_corr']:.2f})")
    ax.plot([-1, 1], [-1, 1], "k:", lw=0.8)
    ax.set_xlim(-1, 1)
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("best landmark correlation", fontsize=7)
    ax.set_ylabel("range score (best x-interval correlation)", fontsize=7)
    ax = axes[3]
    for k, network in enumerate(("single", "joint")):
        enr, a_vals, b_vals = heat(t, network, "landmark_enrichment")
        drawn[f"enrichment_{network}"] = enr.tolist()
        flat = enr.T.ravel()  # a-major: a0 b0, a0 b1, …
        medians[network]["landmark_enrichment"] = float(np.nanmedian(flat)) if np.isfinite(flat).any() else float("nan")
        ax.plot(np.arange(len(flat)) + (k - 0.5) * 0.2, flat, "o", ms=3, color=COLORS[network],
                label=f"{TITLES[network]} (median {medians[network]['landmark_enrichment']:.2f})")
    ax.axhline(1.0, color="k", ls=":", lw=0.8)
    grouped_ab_axis(ax, a_vals, b_vals)
    ax.set_ylabel("landmark enrichment (1 = chance)", fontsize=7)
    ax.set_title("latents peaking near a landmark, over chance", fontsize=7)
    ax = axes[4]
    grid, a_vals, b_vals = heat(t, "single", "rel_mse_line")
    drawn["rel_mse_single"] = grid.tolist()
    im = ax.imshow(np.log10(grid), origin="lower", cmap="magma", aspect="auto")
    _axes_ab(ax, a_vals, b_vals)
    ax.set_title("log10 rel-MSE on the line, one network per (a, b)", fontsize=7)
    fig.colorbar(im, ax=ax, fraction=0.046).ax.tick_params(labelsize=6)
    for a in axes:
        a.tick_params(labelsize=6)
    fig.suptitle(f"Single-polynomial grid ({len(a_vals)} × {len(b_vals)} (a, b), {t.seed.nunique()} seed(s)): "
                 f"latents tracking the x range vs the landmarks", fontsize=8)
    fig.tight_layout()
    panel_legends_below(fig, [("range score against landmark correlation", axes[2]),
                              ("landmark enrichment", axes[3])])
    save_figure(fig, *out)
    return {"heat": drawn, "points": points, "medians": medians}
