"""fig2 / fig3: FVU or KL of the approximants over training, mean and min–max band over seeds (every
approximant of the metrics table: the paper's, and the higher degrees where the run has them)."""

from __future__ import annotations

from polyinterp.figures.style import approximant_color, approximant_label
from polyinterp.io import load_parquet, save_figure
from polyinterp.mnist.metrics import is_single_gaussian_refit

TITLES = {"fvu": "fraction of variance unexplained", "kl": "KL(softmax f ‖ softmax g)"}
PANELS = {"mixture": "Gaussian mixture", "test": "MNIST test images"}
# distribution → (panel, drawn as a line with a seed band or as markers)
DISTRIBUTIONS = {"mixture_exact": ("mixture", "line"), "mixture": ("mixture", "markers"), "test": ("test", "line")}


def fvu_figure(*, metrics: str, out: list[str]) -> list[dict]:
    """fig2: FVU of every approximant over training (see :func:`metric_curves_figure`)."""
    return metric_curves_figure(metrics, "fvu", out)


def kl_figure(*, metrics: str, out: list[str]) -> list[dict]:
    """fig3: KL(MLP ‖ approximant) over training (see :func:`metric_curves_figure`)."""
    return metric_curves_figure(metrics, "kl", out)


def metric_curves_figure(metrics_path, metric: str, out_paths) -> list[dict]:
    """One row of panels per model (``mnist.models``, shared axes), two columns (the Gaussian mixture,
    MNIST test images), one line per approximant and fit distribution: the mean over seeds at each
    step > 0 and the min–max band. On the mixture panel the line is the exact FVU (``mixture_exact``)
    of each approximant that has it, its Monte-Carlo values markers; otherwise (KL, the Gaussian
    degree-n forms) the Monte-Carlo values are the line. Fits under the moment-matched Gaussian
    (fit ``gaussian``) are dash-dotted in their approximant's colour. Returns what was drawn: dicts
    with model, distribution, approximant, fit, style (line / markers), step, mean, min, max (lists)
    and n_seeds."""
    import matplotlib.pyplot as plt

    df = load_parquet(metrics_path)
    df = df[(df.metric == metric) & (df.approximant != "mlp")]
    models = list(df.model.unique())
    fig, axes = plt.subplots(len(models), 2, figsize=(15, 1 + 3.5 * len(models)), sharex=True, sharey=True,
                             squeeze=False)
    lines = []
    has_exact = False
    for row, model in enumerate(models):
        sub = df[df.model == model]
        panel_axes = dict(zip(PANELS, axes[row]))
        exact = set(zip(sub.approximant[sub.distribution == "mixture_exact"], sub.fit[sub.distribution == "mixture_exact"]))
        has_exact = has_exact or bool(exact)
        for dist, (panel, dist_kind) in DISTRIBUTIONS.items():
            ax = panel_axes[panel]
            for (name, fit), group in sub[sub.distribution == dist].groupby(["approximant", "fit"]):
                # Monte Carlo is the line of an approximant without exact values (e.g. gaussian_deg{n})
                kind = "line" if dist == "mixture" and (name, fit) not in exact else dist_kind
                stats = group.groupby("step")["value"].agg(["mean", "min", "max"]).reset_index()
                stats = stats[stats.step > 0]  # log axis; step 0 is the untrained network
                lines.append({"model": model, "distribution": dist, "approximant": name, "fit": fit, "style": kind,
                              "step": stats.step.tolist(), "mean": stats["mean"].tolist(),
                              "min": stats["min"].tolist(), "max": stats["max"].tolist(),
                              "n_seeds": int(group.seed.nunique())})
                color, label = approximant_color(name), approximant_label(name, fit)
                gaussian_fit = is_single_gaussian_refit(name, fit)
                if kind == "markers":
                    ax.plot(stats.step, stats["mean"], "o", mfc="none", ms=4, color=color, label=f"{label}, Monte Carlo")
                    continue
                style = ("--" if name == "quadratic_sgd" else ":" if name.startswith("gaussian_deg")
                         else "-." if gaussian_fit else "-")
                ax.plot(stats.step, stats["mean"], style, color=color, label=label, marker=".")
                ax.fill_between(stats.step, stats["min"], stats["max"], color=color, alpha=0.2, lw=0)
        axes[row, 0].set_ylabel(f"{model}\n{TITLES[metric]}")
    for row in range(len(models)):
        for ax, (panel, title) in zip(axes[row], PANELS.items()):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.grid(alpha=0.3, which="both")
            if row == 0:
                ax.set_title(title + (" (line: exact where known, markers: Monte Carlo)"
                                      if panel == "mixture" and has_exact else ""))
            if row == len(models) - 1:
                ax.set_xlabel("training step")
    legend = {}  # one legend for all panels, beside them
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(label, handle)
    fig.legend(legend.values(), legend.keys(), loc="center right", fontsize=7)
    n_seeds = df.seed.nunique()
    fig.suptitle(f"{TITLES[metric]} of the approximants over training (mean and range over {n_seeds} seed(s))")
    fig.tight_layout(rect=(0, 0, 0.74, 0.96))
    save_figure(fig, *out_paths)
    return lines
