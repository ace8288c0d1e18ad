"""Figure cubic_bands: selected latents over the (x, a) plane at each b slice, with their band slope."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from polyinterp.io import load_parquet, load_torch, save_figure  # noqa: E402


def bands_figure(*, grid: str, bands: str, slopes: str, out: list[str], params: dict) -> dict:
    """Up to ``params['max_latents']`` band latents (most coherent first; if none, the most coherent
    live latents) over (x, a) at each b slice of ``grid``, with lines x + c·a = const at each one's
    best slope. Returns what it drew: ``bands_found`` and the ``latents`` with their c."""
    max_latents = int(params["max_latents"])
    grid = load_torch(grid)
    bands = load_parquet(bands)
    best = load_parquet(slopes).set_index("latent")
    drawn = []
    z = grid["latents"].numpy()
    xs, as_, bs = grid["x"].numpy(), grid["a"].numpy(), grid["b"].numpy()
    chosen = bands[bands.is_band].sort_values("min_coherence", ascending=False)
    title = "band latents"
    if chosen.empty:
        chosen = bands[bands.min_active_frac > 0].sort_values("min_coherence", ascending=False)
        title = "no band latents detected: most coherent live latents"
    chosen = chosen.head(max_latents)
    n = max(len(chosen), 1)
    fig, axes = plt.subplots(n, len(bs), figsize=(2.6 * len(bs), 2.3 * n), squeeze=False)
    for r, row in enumerate(chosen.itertuples()):
        j = int(row.latent)
        c = float(best.loc[j, "c_best"]) if j in best.index else float(row.c_grad_median)
        drawn.append({"latent": j, "c": c})
        for k, b in enumerate(bs):
            ax = axes[r, k]
            f = z[k, :, :, j]
            ax.imshow(f, origin="lower", aspect="auto", cmap="magma",
                      extent=[xs.min(), xs.max(), as_.min(), as_.max()])
            if np.isfinite(c):
                for u0 in np.linspace(xs.min(), xs.max(), 5):
                    ax.plot(u0 - c * as_, as_, color="c", lw=0.6, alpha=0.7)
                    ax.plot(u0 - as_ / 3, as_, color="w", lw=0.5, ls=":", alpha=0.7)
            ax.set_xlim(xs.min(), xs.max())
            ax.set_ylim(as_.min(), as_.max())
            ax.tick_params(labelsize=6)
            ax.set_title(f"latent {j}, b={b:g}" + (f", c={c:.3f}" if k == 0 and np.isfinite(c) else ""), fontsize=7)
            if r == n - 1:
                ax.set_xlabel("x", fontsize=7)
            if k == 0:
                ax.set_ylabel("a", fontsize=7)
    if chosen.empty:
        axes[0, 0].text(0.5, 0.5, "no live latents", ha="center", transform=axes[0, 0].transAxes)
    fig.suptitle(f"seed {int(grid['seed'])}: {title} over (x, a); cyan x+c·a=const (slope search), "
                 "white dotted x+a/3=const", fontsize=8)
    fig.tight_layout()
    save_figure(fig, *out)
    return {"bands_found": title == "band latents", "latents": drawn, "b_slices": [float(b) for b in bs]}
