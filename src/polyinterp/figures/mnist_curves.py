"""fig2 / fig3: FVU or KL of the approximants over training, mean and min–max band over seeds."""

from __future__ import annotations

import pandas as pd

from polyinterp.figures.style import COLORS, LABELS
from polyinterp.io import save_figure

TITLES = {"fvu": "fraction of variance unexplained", "kl": "KL(softmax f ‖ softmax g)"}
DISTRIBUTIONS = {"mixture": "Gaussian-mixture samples", "test": "MNIST test images"}


def plot_metric_curves(metrics_path, metric: str, out_paths) -> None:
    import matplotlib.pyplot as plt

    df = pd.read_parquet(metrics_path)
    df = df[(df.metric == metric) & (df.approximant != "mlp")]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, (dist, title) in zip(axes, DISTRIBUTIONS.items()):
        for name, group in df[df.distribution == dist].groupby("approximant"):
            stats = group.groupby("step")["value"].agg(["mean", "min", "max"]).reset_index()
            stats = stats[stats.step > 0]  # log axis; step 0 is the untrained network
            style = "--" if name == "quadratic_sgd" else "-"
            ax.plot(stats.step, stats["mean"], style, color=COLORS[name], label=LABELS[name], marker=".")
            ax.fill_between(stats.step, stats["min"], stats["max"], color=COLORS[name], alpha=0.2, lw=0)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("training step")
        ax.set_title(title)
        ax.grid(alpha=0.3, which="both")
    n_seeds = df.seed.nunique()
    axes[0].set_ylabel(TITLES[metric])
    axes[0].legend()
    fig.suptitle(f"{TITLES[metric]} of the approximants over training (mean and range over {n_seeds} seed(s))")
    save_figure(fig, *out_paths)

