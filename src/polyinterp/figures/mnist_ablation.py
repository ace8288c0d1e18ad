"""fig4: a test digit (``mnist.figures.digit``) with k = 1…10 SVD directions ablated, and one example of every digit at
k = 10; fig5: accuracy vs k for the MLP, its approximants and the random-direction control."""

from __future__ import annotations

import math

import pandas as pd

from polyinterp.figures.style import COLORS, LABELS
from polyinterp.io import load_torch, save_figure


def _image(x, preprocess):
    if preprocess["center"]:
        x = x + preprocess["mean"]
    side = int(math.isqrt(x.numel()))
    return x.reshape(side, side).numpy()


def ablated_digits_figure(*, examples: str, out: list[str], params: dict) -> dict:
    """fig4: the first test image of digit ``params['digit']`` with k = 1…k_max SVD directions
    removed (top row, MLP prediction in each title), and one test image per digit at k_max (bottom
    row), from the ``examples`` of the attacked checkpoint. Returns what it drew: digit, seed, step,
    k and the predictions of both rows."""
    import matplotlib.pyplot as plt

    ex = load_torch(examples)
    digit = int(params["digit"])
    ks = ex["k"].tolist()[1:]
    k_max = ks[-1] if ks else 0
    fig, axes = plt.subplots(2, max(len(ks), 10), figsize=(1.3 * max(len(ks), 10), 3.2), squeeze=False)
    for ax in axes.ravel():
        ax.axis("off")
    for col, k in enumerate(ks):
        ax = axes[0, col]
        ax.imshow(_image(ex["ablated"][digit, k], ex["preprocess"]), cmap="gray")
        ax.set_title(f"k={k}: pred {int(ex['ablated_pred'][digit, k])}", fontsize=8)
    for col in range(10):
        ax = axes[1, col]
        ax.imshow(_image(ex["ablated"][col, k_max], ex["preprocess"]), cmap="gray")
        ax.set_title(f"{int(ex['labels'][col])} → {int(ex['ablated_pred'][col, k_max])}", fontsize=8)
    fig.suptitle(
        f"top: a test '{digit}' with the top-k SVD directions of the linear approximant removed;"
        f" bottom: one test image per digit at k={k_max} (label → MLP prediction); seed {ex['seed']}, step {ex['step']}",
        fontsize=8,
    )
    save_figure(fig, *out)
    return {"digit": digit, "seed": int(ex["seed"]), "step": int(ex["step"]), "k": ks,
            "digit_pred": [int(ex["ablated_pred"][digit, k]) for k in ks],
            "digits_pred_at_k_max": ex["ablated_pred"][:, k_max].tolist()}


def ablation_accuracy_figure(*, table: str, out: list[str]) -> list[dict]:
    """fig5: one panel per attacked step: test accuracy against k for the MLP and each approximant
    (SVD directions, mean and min–max band over seeds) and the MLP under random directions (mean,
    min–max band over seeds and draws).
    Returns the lines drawn: step, model, directions, k, accuracy (and min/max for the random line)."""
    import matplotlib.pyplot as plt

    df = pd.read_parquet(table)
    lines = []
    steps = sorted(df.step.unique())
    fig, axes = plt.subplots(1, len(steps), figsize=(5.5 * len(steps), 4), squeeze=False, sharey=True)
    for ax, step in zip(axes[0], steps):
        at = df[df.step == step]
        svd = at[at.directions == "svd"].groupby(["model", "k"])["accuracy"].agg(["mean", "min", "max"]).reset_index()
        for model, group in svd.groupby("model"):
            style = "--" if model == "quadratic_sgd" else "-"
            ax.plot(group.k, group["mean"], style, marker="o", color=COLORS[model], label=LABELS[model])
            ax.fill_between(group.k, group["min"], group["max"], color=COLORS[model], alpha=0.15, lw=0)
            lines.append({"step": int(step), "model": model, "directions": "svd", "k": group.k.tolist(),
                          "accuracy": group["mean"].tolist(), "min": group["min"].tolist(), "max": group["max"].tolist()})
        rnd = at[(at.directions == "random") & (at.model == "mlp")].groupby("k")["accuracy"]
        if len(rnd):
            stats = rnd.agg(["mean", "min", "max"]).reset_index()
            ax.plot(stats.k, stats["mean"], ":", marker="s", color=COLORS["random"], label="MLP, random directions")
            ax.fill_between(stats.k, stats["min"], stats["max"], color=COLORS["random"], alpha=0.2, lw=0)
            lines.append({"step": int(step), "model": "mlp", "directions": "random", "k": stats.k.tolist(),
                          "accuracy": stats["mean"].tolist(), "min": stats["min"].tolist(),
                          "max": stats["max"].tolist()})
        ax.axhline(0.1, color="k", lw=0.5, ls=":")
        ax.set_xlabel("directions ablated k")
        ax.set_title(f"step {step}")
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel("test accuracy")
    axes[0, 0].legend(fontsize=8)
    fig.suptitle(f"SVD ablation attack (mean over {df.seed.nunique()} seed(s))")
    save_figure(fig, *out)
    return lines
