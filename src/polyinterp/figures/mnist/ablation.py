"""fig4: a test digit (``mnist.figures.digit``) with k = 1…10 SVD directions of each basis ablated,
and one example of every digit at k = 10; fig5: accuracy vs k for the MLP, its approximants and the
random-direction control at the figure steps; fig6: the attack's strength (MLP accuracy at k = 4 and
k = 10) over training and against clean test accuracy, per basis."""

from __future__ import annotations

import math

import numpy as np

from polyinterp.figures.style import COLORS, LABELS
from polyinterp.io import load_torch, save_figure
from polyinterp.mnist.attack.bases import basis_model_name, present_bases
from polyinterp.mnist.attack.checkpoints import figure_steps, load_attack_table
from polyinterp.mnist.attack.summary import attack_strength, summary_ks
from polyinterp.mnist.model import model_name

BASIS_STYLES = {"mixture": "-", "gaussian": "--", "standard_normal": ":"}
BASIS_COLORS = {"mixture": "tab:blue", "gaussian": "tab:green", "standard_normal": "tab:red"}
BASIS_LABELS = {"mixture": "β under the class mixture", "gaussian": "β under its moment-matched Gaussian",
                "standard_normal": "β under N(0, I) (the authors')"}


def _image(x, preprocess):
    if preprocess["center"]:
        x = x + preprocess["mean"]
    side = int(math.isqrt(x.numel()))
    return x.reshape(side, side).numpy()


def ablated_digits_figure(*, examples: str, out: list[str], params: dict) -> dict:
    """fig4: for each basis, the first test image of digit ``params['digit']`` with k = 1…k_max SVD
    directions removed (MLP prediction in each title) and one test image per digit at k_max, from the
    ``examples`` of the checkpoint chosen by rule ``mnist_svd_ablation_all`` (the first figure step).
    Returns what it drew: digit, seed, step, k, bases and per basis the predictions of both rows."""
    import matplotlib.pyplot as plt

    ex = load_torch(examples)
    digit = int(params["digit"])
    ks = ex["k"].tolist()[1:]
    k_max = ks[-1] if ks else 0
    bases = list(ex["bases"])
    cols = max(len(ks), 10)
    fig, axes = plt.subplots(2 * len(bases), cols, figsize=(1.3 * cols, 3.0 * len(bases)), squeeze=False)
    for ax in axes.ravel():
        ax.axis("off")
    drawn = {"digit": digit, "seed": int(ex["seed"]), "step": int(ex["step"]), "chosen_as": ex.get("chosen_as", ""),
             "k": ks, "bases": bases, "digit_pred": {}, "digits_pred_at_k_max": {}}
    for b, basis in enumerate(bases):
        pred = ex["ablated_pred"][b]
        for col, k in enumerate(ks):
            ax = axes[2 * b, col]
            ax.imshow(_image(ex["ablated"][b, digit, k], ex["preprocess"]), cmap="gray")
            ax.set_title(f"k={k}: pred {int(pred[digit, k])}", fontsize=8)
        axes[2 * b, 0].text(-0.15, 0.5, basis, transform=axes[2 * b, 0].transAxes, rotation=90,
                            va="center", ha="right", fontsize=9)
        for col in range(10):
            ax = axes[2 * b + 1, col]
            ax.imshow(_image(ex["ablated"][b, col, k_max], ex["preprocess"]), cmap="gray")
            ax.set_title(f"{int(ex['labels'][col])} → {int(pred[col, k_max])}", fontsize=8)
        drawn["digit_pred"][basis] = [int(pred[digit, k]) for k in ks]
        drawn["digits_pred_at_k_max"][basis] = pred[:, k_max].tolist()
    fig.suptitle(
        f"per basis: a test '{digit}' with the top-k SVD directions of that basis's linear approximant removed,"
        f" then one test image per digit at k={k_max} (label → MLP prediction);"
        f" {model_name(ex)}, seed {ex['seed']}, step {ex['step']} ({drawn['chosen_as']})",
        fontsize=8,
    )
    save_figure(fig, *out)
    return drawn


def _band(ax, x, stats, color, style, label, marker=None):
    ax.plot(x, stats["mean"], style, color=color, label=label, marker=marker, ms=3)
    ax.fill_between(x, stats["min"], stats["max"], color=color, alpha=0.12, lw=0)


def ablation_accuracy_figure(*, table: str, out: list[str], params: dict) -> list[dict]:
    """fig5: one panel per figure step (``params['figure_steps']``, resolved with
    ``accuracy_level``): test accuracy against k under each basis (line style) for the MLP, the
    basis's own linear approximant and the mixture's exact quadratic (mean and min–max band over
    seeds), and the MLP under random directions (mean, band over seeds and draws).
    Returns the lines drawn: step, chosen_as, basis, predictor, directions, k, accuracy, min, max."""
    import matplotlib.pyplot as plt

    df = load_attack_table(table)
    steps = figure_steps(df, params["figure_steps"], params["accuracy_level"])
    lines = []
    fig, axes = plt.subplots(1, len(steps), figsize=(6 * len(steps), 4.5), squeeze=False, sharey=True)
    for ax, chosen in zip(axes[0], steps):
        at = df[df.step == chosen.step]
        for basis in present_bases(at.basis):
            svd = at[(at.basis == basis) & (at.directions == "svd")]
            for model, color in (("mlp", COLORS["mlp"]), (basis_model_name(basis), BASIS_COLORS[basis]),
                                 ("quadratic", COLORS["quadratic"])):
                stats = svd[svd.predictor == model].groupby("k")["accuracy"].agg(["mean", "min", "max"])
                if not len(stats):
                    continue
                label = f"{LABELS.get(model, model.replace('_', ' '))}, {basis}"
                _band(ax, stats.index, stats, color, BASIS_STYLES[basis], label, marker="o" if model == "mlp" else None)
                lines.append({"step": chosen.step, "chosen_as": chosen.label, "basis": basis, "predictor": model,
                              "directions": "svd", "k": stats.index.tolist(), "accuracy": stats["mean"].tolist(),
                              "min": stats["min"].tolist(), "max": stats["max"].tolist()})
        first = present_bases(at.basis)[0]
        rnd = at[(at.basis == first) & (at.directions == "random") & (at.predictor == "mlp")]
        if len(rnd):
            stats = rnd.groupby("k")["accuracy"].agg(["mean", "min", "max"])
            _band(ax, stats.index, stats, COLORS["random"], "-", "MLP, random directions", marker="s")
            lines.append({"step": chosen.step, "chosen_as": chosen.label, "basis": "any", "predictor": "mlp",
                          "directions": "random", "k": stats.index.tolist(), "accuracy": stats["mean"].tolist(),
                          "min": stats["min"].tolist(), "max": stats["max"].tolist()})
        ax.axhline(0.1, color="k", lw=0.5, ls=":")
        ax.set_xlabel("directions ablated k")
        ax.set_title(f"step {chosen.step}: {chosen.label}", fontsize=9)
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel("test accuracy")
    axes[0, -1].legend(fontsize=6, loc="upper right")
    fig.suptitle(f"{_model_name(df)}: SVD ablation attack: solid / dashed / dotted = β under the class mixture / its Gaussian / N(0, I)"
                 f" (mean, min–max over {df.seed.nunique()} seed(s)); quadratic: the mixture's exact fit", fontsize=9)
    save_figure(fig, *out)
    return lines


def attack_strength_figure(*, table: str, out: list[str]) -> list[dict]:
    """fig6: MLP test accuracy with the top k = 4 and k = k_max (≤ 10) SVD directions removed, against
    training step (log2 axis, steps > 0) and against the clean test accuracy, one colour per basis:
    MLP solid, the basis's linear approximant dashed, the mixture's exact quadratic dotted, random
    directions grey (mean and min–max band over seeds). Returns the curves drawn: k, basis, predictor,
    step, clean_accuracy, accuracy, min, max."""
    import matplotlib.pyplot as plt

    df = load_attack_table(table)
    ks = summary_ks(df)
    fig, axes = plt.subplots(len(ks), 2, figsize=(11, 3.8 * len(ks)), squeeze=False, sharey=True)
    curves = []
    for row, k in enumerate(ks):
        stats = attack_strength(df, k)
        stats = stats[stats.step > 0]
        for (basis, model), c in stats.groupby(["basis", "predictor"], sort=False):
            if basis == "any":
                color, style, label = COLORS["random"], "-", "MLP, random directions"
            else:
                color = BASIS_COLORS[basis]
                style = "-" if model == "mlp" else (":" if model == "quadratic" else "--")
                label = f"{LABELS.get(model, model.replace('_', ' '))}, {basis}"
            by_acc = c.sort_values("clean_accuracy", kind="stable")  # a line in x order, not in step order
            for col, (x, data) in enumerate(((np.log2(c.step.to_numpy(float)), c),
                                             (by_acc.clean_accuracy.to_numpy(), by_acc))):
                _band(axes[row, col], x, data, color, style, label if col == 0 else None,
                      marker="o" if model == "mlp" else None)
            curves.append({"k": k, "basis": basis, "predictor": model, "step": c.step.tolist(),
                           "clean_accuracy": c.clean_accuracy.tolist(), "accuracy": c["mean"].tolist(),
                           "min": c["min"].tolist(), "max": c["max"].tolist()})
        for col in range(2):
            ax = axes[row, col]
            ax.axhline(0.1, color="k", lw=0.5, ls=":")
            ax.grid(alpha=0.3)
            ax.set_title(f"top {k} directions removed", fontsize=9)
        axes[row, 0].set_ylabel("test accuracy after the attack")
        axes[row, 0].set_xlabel("training step (log2)")
        axes[row, 1].set_xlabel("clean test accuracy of the checkpoint")
    axes[0, 0].legend(fontsize=6)
    fig.subplots_adjust(hspace=0.35)
    fig.suptitle(f"{_model_name(df)}: attack strength over training (mean, min–max over {df.seed.nunique()} seed(s));"
                 " colour: the distribution β is fitted under", fontsize=9)
    save_figure(fig, *out)
    return curves


def _model_name(table) -> str:
    """The network an attack table is of (its model column)."""
    return ", ".join(dict.fromkeys(table.model))
