"""Figure cubic_clamp: regressor output over x when one SAE latent is scaled, per polynomial."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from polyinterp.figures.style import panel_legends_below  # noqa: E402
from polyinterp.io import load_parquet, save_figure  # noqa: E402


def clamp_figure(*, curves: str, summary: str, out: list[str], params: dict) -> dict:
    """One row per clamped latent (at most ``params['max_latents']``), one column per polynomial: the
    regressor's output over x with the latent scaled by each factor, beside the true cubic and the
    model. Returns what it drew: ``latents``, ``curves`` and ``factors``."""
    curves = load_parquet(curves)
    summary = load_parquet(summary)
    latents = list(dict.fromkeys(curves.latent))[:int(params["max_latents"])]
    polys = sorted(curves.curve.unique())
    fig, axes = plt.subplots(max(len(latents), 1), max(len(polys), 1),
                             figsize=(3.3 * max(len(polys), 1), 2.6 * max(len(latents), 1)), squeeze=False)
    factors = sorted(curves.factor.unique())
    cmap = plt.get_cmap("viridis")
    for r, j in enumerate(latents):
        for k, ci in enumerate(polys):
            ax = axes[r, k]
            sub = curves[(curves.latent == j) & (curves.curve == ci)]
            base = sub[sub.factor == 1.0]
            ax.plot(base.x, base.y_true, "k--", lw=1, label="true")
            ax.plot(base.x, base.y_model, color="0.5", ls=":", lw=1.5, label="model")
            for i, s in enumerate(factors):
                c = sub[sub.factor == s]
                ax.plot(c.x, c.y_clamped, color=cmap(i / max(len(factors) - 1, 1)), lw=1.8 if s == 1.0 else 1,
                        label=f"×{s:g}" + (" (SAE recon)" if s == 1.0 else ""))
            rec = summary[(summary.latent == j) & (summary.curve == ci) & (summary.factor == 1.0)]
            a, b = float(base.a.iloc[0]), float(base.b.iloc[0])
            ax.set_title(f"latent {j}, a={a:g}, b={b:g}\nrecon RMS {float(rec.recon_rms.iloc[0]):.3f}"
                         f", active {100 * float(rec.active_frac.iloc[0]):.0f}% of x", fontsize=7)
            ax.tick_params(labelsize=6)
            if r == len(latents) - 1:
                ax.set_xlabel("x", fontsize=7)
            if k == 0:
                ax.set_ylabel("y", fontsize=7)
    sel = curves.selection.iloc[0] if len(curves) else "none"
    fig.suptitle(f"seed {int(curves.seed.iloc[0]) if len(curves) else -1}: clamping SAE latents ({sel})", fontsize=9)
    fig.tight_layout()
    if latents:
        panel_legends_below(fig, [("every panel", axes[0, 0])])
    save_figure(fig, *out)
    return {"latents": [int(j) for j in latents], "curves": [int(c) for c in polys],
            "factors": [float(f) for f in factors]}
