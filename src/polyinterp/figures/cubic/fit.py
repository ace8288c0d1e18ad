"""Figure cubic_fit: learned vs true cubics for a few (a, b), and the training curves of every seed."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from matplotlib.lines import Line2D  # noqa: E402

from polyinterp.figures.style import axes_entries, legends_below  # noqa: E402
from polyinterp.io import load_parquet, save_figure  # noqa: E402

SPLIT_STYLES = (("val", "-"), ("out_of_range", ":"), ("train", "--"))


def fit_figure(*, curves: str, train_curves: list[str], fit: list[str], out: list[str]) -> dict:
    """Learned vs true cubic for the first seed's fit ``curves``, and every seed's ``train_curves``
    against the target. Returns what it drew: ``curves`` (curve id, a, b, in_range) and
    ``training`` (seed, split, number of points) lines."""
    curves = load_parquet(curves)
    train = pd.concat([load_parquet(p) for p in train_curves], ignore_index=True)
    fit = pd.concat([load_parquet(p) for p in fit], ignore_index=True)
    drawn = {"curves": [], "training": []}
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4.2))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (cid, c) in enumerate(curves.groupby("curve")):
        col = colors[i % len(colors)]
        tag = "" if bool(c.in_range.iloc[0]) else " (outside training box)"
        ax0.plot(c.x, c.y_true, color=col, lw=1, ls="--")
        ax0.plot(c.x, c.y_model, color=col, lw=2, alpha=0.7, label=f"a={c.a.iloc[0]:g}, b={c.b.iloc[0]:g}{tag}")
        drawn["curves"].append({"curve": int(cid), "a": float(c.a.iloc[0]), "b": float(c.b.iloc[0]),
                                "in_range": bool(c.in_range.iloc[0]), "points": len(c)})
    ax0.set(xlabel="x", ylabel="y", title=f"seed {int(curves.seed.iloc[0])}: model (solid) vs x³+ax²+bx (dashed)")
    # colour: the seed, line style: the split (one legend entry each, not one per seed and split)
    seed_entries, split_entries = {}, {}
    for i, (seed, t) in enumerate(train.groupby("seed")):
        col = colors[i % len(colors)]
        for split, ls in SPLIT_STYLES:
            s = t[(t.split == split) & (t.step > 0)]
            if len(s):
                ax1.loglog(s.step, s.rel_mse, ls=ls, color=col)
                seed_entries[f"seed {seed}"] = Line2D([], [], color=col)
                split_entries[split] = Line2D([], [], color="k", ls=ls)
                drawn["training"].append({"seed": int(seed), "split": split, "points": len(s)})
    target = float(fit.target_rel_mse.iloc[0])
    ax1.axhline(target, color="k", lw=0.8, ls="--")
    ax1.text(ax1.get_xlim()[0], target, f" target {target:g}", va="bottom", fontsize=7)
    val = fit[fit.split == "val"]
    ax1.set(xlabel="step", ylabel="MSE / Var(y)",
            title="final val rel-MSE: " + ", ".join(f"{v:.1e}" for v in val.rel_mse))
    fig.tight_layout()
    legends_below(fig, [("left: the polynomials (solid: model, dashed: truth)", axes_entries(ax0)),
                        ("right: training curves, colour: the seed", seed_entries),
                        ("right: line style: the split", split_entries)])
    save_figure(fig, *out)
    return drawn
