"""Figure cubic_landmarks: heat maps over (a, b) of the best latents' correlation with each landmark kind."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from polyinterp.io import load_parquet, save_figure  # noqa: E402

KINDS = ("root", "critical", "inflection", "all")


def landmarks_figure(*, table: str, ranking: str, out: list[str], params: dict) -> list[dict]:
    """For each landmark kind, heat maps over (a, b) of the correlation of its ``params['top']``
    best-ranked latents. Returns the panels drawn (kind, latent, mean_corr)."""
    top = int(params["top"])
    table = load_parquet(table)
    ranking = load_parquet(ranking)
    drawn = []
    fig, axes = plt.subplots(len(KINDS), top, figsize=(3.3 * top, 2.9 * len(KINDS)), squeeze=False,
                             layout="constrained")
    cmap = plt.get_cmap("RdBu_r").with_extremes(bad="0.85")  # undefined r in grey
    im = None
    for r, kind in enumerate(KINDS):
        best = ranking[ranking.kind == kind].sort_values("rank").head(top)
        for c in range(top):
            ax = axes[r, c]
            if c >= len(best):
                ax.axis("off")
                continue
            row = best.iloc[c]
            drawn.append({"kind": kind, "latent": int(row.latent), "mean_corr": float(row.mean_corr)})
            sub = table[(table.kind == kind) & (table.latent == row.latent)]
            piv = sub.pivot(index="b", columns="a", values="corr").sort_index()
            im = ax.imshow(piv.to_numpy(), origin="lower", aspect="auto", cmap=cmap, vmin=-1, vmax=1,
                           extent=[piv.columns.min(), piv.columns.max(), piv.index.min(), piv.index.max()])
            ax.set_title(f"{kind}: latent {int(row.latent)} (mean r={row.mean_corr:.2f})", fontsize=8)
            ax.set_xlabel("a", fontsize=8)
            ax.set_ylabel("b", fontsize=8)
            ax.tick_params(labelsize=7)
            a = np.linspace(piv.columns.min(), piv.columns.max(), 100)
            ax.plot(a, a * a / 4, "k:", lw=0.7)  # above: one real root only (a² < 4b)
            ax.plot(a, a * a / 3, "k--", lw=0.7)  # above: no critical points (a² < 3b)
            ax.set_ylim(piv.index.min(), piv.index.max())
    if im is not None:
        fig.colorbar(im, ax=axes, shrink=0.6, label="Pearson r (grey: undefined)")
    fig.suptitle(f"seed {int(table.seed.iloc[0])}: latent profile along x vs Gaussian bumps at landmarks"
                 " (dotted b=a²/4, dashed b=a²/3)", fontsize=9)
    save_figure(fig, *out)
    return drawn
