"""Figure cubic_joint_clamp: joint interventions on SAE latents, and whether each clamped curve is a
vertical stretch or a horizontal shift of the unclamped one."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from polyinterp.figures.style import panel_legends_below  # noqa: E402
from polyinterp.io import load_parquet, save_figure  # noqa: E402


def overall_verdict(fits) -> tuple[dict[str, int], str]:
    """Verdict counts over the (intervention, polynomial) rows of ``fits`` and one sentence: the most
    common verdict among the curves the intervention changed (not ``no_effect``)."""
    counts = {str(k): int(v) for k, v in fits.verdict.value_counts().items()}
    changed = {k: v for k, v in counts.items() if k != "no_effect"}
    if not changed:
        return counts, "no intervention changed a curve" if len(fits) else "no intervention selected a latent"
    top = max(sorted(changed), key=lambda k: changed[k])
    rest = ", ".join(f"{k} {v}" for k, v in sorted(changed.items()) if k != top)
    return counts, (f"verdict: {top} in {changed[top]} of {sum(changed.values())} changed curves"
                    + (f" ({rest})" if rest else ""))


def joint_clamp_figure(*, curves: str, fits: str, out: list[str]) -> dict:
    """One row per intervention, one column per polynomial: the SAE reconstruction ŷ, the clamped
    curve, its best stretch s·ŷ + c and its best shift ŷ(x − δ) + c, with both effect R², s, δ beside
    a/3 and the verdict in each title, and the overall verdict (:func:`overall_verdict`) on top.
    Returns what it drew: ``interventions``, ``curves``, ``verdicts`` (counts) and ``overall``."""
    curves = load_parquet(curves)
    fits = load_parquet(fits)
    names = list(dict.fromkeys(fits.intervention))
    polys = sorted(fits.curve.unique())
    counts, sentence = overall_verdict(fits)
    rows, cols = max(len(names), 1), max(len(polys), 1)
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 2.7 * rows), squeeze=False)
    for r, name in enumerate(names):
        for k, ci in enumerate(polys):
            ax = axes[r, k]
            sub = curves[(curves.intervention == name) & (curves.curve == ci)]
            fit = fits[(fits.intervention == name) & (fits.curve == ci)].iloc[0]
            ax.plot(sub.x, sub.y_true, "k--", lw=0.8, label="true")
            ax.plot(sub.x, sub.y_sae, color="0.55", lw=1.6, label="ŷ (SAE recon)")
            ax.plot(sub.x, sub.y_clamped, color="tab:red", lw=1.4, label="clamped")
            ax.plot(sub.x, sub.y_stretch, color="tab:orange", ls="--", lw=1, label="stretch fit")
            ax.plot(sub.x, sub.y_shift, color="tab:blue", ls=":", lw=1.2, label="shift fit")
            ax.set_title(
                f"{name} [{fit.latents} ×{fit.factors}], a={fit.a:g}, b={fit.b:g}\n"
                f"stretch s={fit.stretch_s:.3f} R²eff={fit.effect_r2_stretch:.3f} | "
                f"shift δ={fit.shift_delta:.3f} (a/3={fit.a_over_3:.3f}) R²eff={fit.effect_r2_shift:.3f}\n"
                f"→ {fit.verdict}", fontsize=6)
            ax.tick_params(labelsize=6)
            if r == rows - 1:
                ax.set_xlabel("x", fontsize=7)
            if k == 0:
                ax.set_ylabel("y", fontsize=7)
    if not names:
        axes[0, 0].text(0.5, 0.5, "no intervention selected any latent", ha="center", transform=axes[0, 0].transAxes)
    seed = int(fits.seed.iloc[0]) if len(fits) else -1
    fig.suptitle(f"seed {seed}: joint clamping, stretch s·ŷ(x)+c or shift ŷ(x−δ)+c? {sentence}", fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.35 / fig.get_figheight()))  # room for the title
    if names:
        panel_legends_below(fig, [("every panel", axes[0, 0])])
    save_figure(fig, *out)
    return {"interventions": names, "curves": [int(c) for c in polys], "verdicts": counts, "overall": sentence}
