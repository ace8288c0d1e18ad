"""fig4: a test digit (``mnist.figures.digit``) with k = 1…10 SVD directions of each basis ablated,
and one example of every digit at k = 10; fig5: accuracy vs k for the MLP, its approximants and the
random-direction control at the figure steps; fig6: the attack's strength (MLP accuracy at k = 4 and
k = 10) over training, under the clean test error, per basis."""

from __future__ import annotations

import math


from polyinterp.figures.style import COLORS, LABELS, legends_below, run_title
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
    ``examples`` of the checkpoint chosen by rule ``mnist_svd_ablation_all`` (the first figure step);
    the title names the model, the seed, the step and ``params['run']``.
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
        f" {model_name(ex)}, seed {ex['seed']}, step {ex['step']} ({drawn['chosen_as']})"
        + (f"\n{params['run']}" if params.get("run") else ""),
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
    seeds), and the MLP under random directions (mean, band over seeds and draws). The legends (colour:
    what is attacked; line style: the basis) are below the panels; the title names ``params['run']``.
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
    axes[0, 0].set_ylabel("test accuracy (linear scale; chance 0.1 dotted)")
    fig.suptitle(run_title("test accuracy as the top-k SVD directions of a linear approximant's β are removed",
                           models=[_model_name(df)], seeds=df.seed.unique(), run=params.get("run")), fontsize=10)
    fig.tight_layout()
    bases = present_bases(df.basis)
    colours = {LABELS["mlp"]: _key(COLORS["mlp"], "-", "o"),
               **{f"its linear approximant, {BASIS_LABELS[b]}": _key(BASIS_COLORS[b], "-") for b in bases},
               "the mixture's exact quadratic": _key(COLORS["quadratic"], "-"),
               "MLP, random directions": _key(COLORS["random"], "-", "s")}
    styles = {BASIS_LABELS[b]: _key("0.3", BASIS_STYLES[b]) for b in bases}
    legends_below(fig, [("colour: what is attacked (mean over seeds, band: min–max)", colours),
                        ("line style: the basis, the distribution β is fitted under", styles)])
    save_figure(fig, *out)
    return lines


def _key(color, style, marker=None):
    """A legend handle: a line in ``color`` and ``style``."""
    from matplotlib.lines import Line2D

    return Line2D([], [], color=color, ls=style, marker=marker, ms=3)


def attack_strength_figure(*, table: str, out: list[str], params: dict) -> list[dict]:
    """fig6: one column of panels over the training step (log₂ axis, steps > 0, shared): on top the
    MLP's clean test error 1 − accuracy (log axis; mean and min–max band over seeds), below it, per k
    (4 and k_max ≤ 10), the MLP's test accuracy with the top k SVD directions removed (linear axis),
    one colour per basis: MLP solid, the basis's linear approximant dashed, the mixture's exact
    quadratic dotted, random directions grey (mean and min–max band over seeds). Legends below the
    panels; the title names ``params['run']``. Returns the curves drawn: k, basis, predictor, step,
    clean_accuracy, accuracy, min, max; and one dict with predictor ``clean``: step, error, min, max."""
    import matplotlib.pyplot as plt

    df = load_attack_table(table)
    ks = summary_ks(df)
    fig, axes = plt.subplots(1 + len(ks), 1, figsize=(8, 1.2 + 2.6 + 3.4 * len(ks)), sharex=True, squeeze=False,
                             gridspec_kw={"height_ratios": [0.75] + [1] * len(ks)})
    axes = axes[:, 0]
    clean = _clean_error(df)
    _band(axes[0], clean.step, clean, COLORS["mlp"], "-", None, marker="o")
    axes[0].set_yscale("log")
    axes[0].set_ylabel("clean test error\n1 − accuracy (log scale)", fontsize=8)
    axes[0].set_title("the MLP without the attack", fontsize=9)
    curves = [{"k": 0, "basis": "any", "predictor": "clean", "step": clean.step.tolist(),
               "error": clean["mean"].tolist(), "min": clean["min"].tolist(), "max": clean["max"].tolist()}]
    for ax, k in zip(axes[1:], ks):
        stats = attack_strength(df, k)
        stats = stats[stats.step > 0]
        for (basis, model), c in stats.groupby(["basis", "predictor"], sort=False):
            color, style = _strength_style(basis, model)
            _band(ax, c.step.to_numpy(float), c, color, style, None, marker="o" if model == "mlp" else None)
            curves.append({"k": k, "basis": basis, "predictor": model, "step": c.step.tolist(),
                           "clean_accuracy": c.clean_accuracy.tolist(), "accuracy": c["mean"].tolist(),
                           "min": c["min"].tolist(), "max": c["max"].tolist()})
        ax.axhline(0.1, color="k", lw=0.5, ls=":")
        ax.set_ylim(0, 1)
        ax.set_title(f"top {k} directions removed", fontsize=9)
        ax.set_ylabel("test accuracy after the attack\n(linear scale; chance 0.1 dotted)", fontsize=8)
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.grid(alpha=0.3, which="both")
    axes[-1].set_xlabel("training step (log₂ scale)")
    fig.suptitle(run_title("attack strength over training", models=[_model_name(df)], seeds=df.seed.unique(),
                           run=params.get("run")), fontsize=10)
    fig.tight_layout()
    bases = present_bases(df.basis)
    colours = {**{BASIS_LABELS[b]: _key(BASIS_COLORS[b], "-") for b in bases},
               "MLP, random directions": _key(COLORS["random"], "-")}
    styles = {"MLP": _key("0.3", "-", "o"), "the basis's linear approximant": _key("0.3", "--"),
              "the mixture's exact quadratic": _key("0.3", ":")}
    legends_below(fig, [("colour: the distribution β is fitted under (mean over seeds, band: min–max)", colours),
                        ("line style: what is attacked", styles)])
    save_figure(fig, *out)
    return curves


def _clean_error(table):
    """The MLP's clean test error (k = 0) per step > 0: mean, min and max over seeds."""
    clean = table[(table.k == 0) & (table.predictor == "mlp") & (table.directions == "svd") & (table.step > 0)]
    per_seed = 1 - clean.groupby(["step", "seed"])["accuracy"].first()  # identical under every basis
    return per_seed.groupby("step").agg(["mean", "min", "max"]).reset_index()


def _strength_style(basis: str, model: str) -> tuple[str, str]:
    """fig6's colour (the basis; grey for random directions) and line style (the predictor)."""
    if basis == "any":
        return COLORS["random"], "-"
    return BASIS_COLORS[basis], "-" if model == "mlp" else (":" if model == "quadratic" else "--")


def _model_name(table) -> str:
    """The network an attack table is of (its model column)."""
    return ", ".join(dict.fromkeys(table.model))
