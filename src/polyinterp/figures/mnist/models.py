"""fig_models: the final FVU of each approximant per model (``mnist.models``) and fit distribution.

A table of what the figure draws is :func:`final_fvu`; the figure reads only the metrics table.
"""

from __future__ import annotations

import pandas as pd

from polyinterp.figures.style import _degree_form, approximant_color, approximant_label, legends_below, run_title
from polyinterp.io import load_parquet, save_figure
from polyinterp.mnist.metrics import is_single_gaussian_refit

PANELS = {"mixture": "Gaussian mixture (exact where known)", "test": "MNIST test images"}


def final_fvu(metrics: pd.DataFrame) -> pd.DataFrame:
    """One row per (panel, model, approximant, fit) at each model's last checkpoint: the FVU's mean,
    min and max over seeds and the number of seeds. Panel ``mixture`` holds the exact mixture FVU
    where the metrics table has it and the Monte-Carlo value otherwise; panel ``test`` the test images'."""
    fvu = metrics[(metrics.metric == "fvu") & (metrics.approximant != "mlp")]
    rows = []
    for model, sub in fvu.groupby("model", sort=False):
        last = sub[sub.step == sub.step.max()]
        for (name, fit), g in last.groupby(["approximant", "fit"], sort=False):
            exact = g[g.distribution == "mixture_exact"]
            for panel, vals in (("mixture", exact if len(exact) else g[g.distribution == "mixture"]),
                                ("test", g[g.distribution == "test"])):
                if len(vals):
                    rows.append(dict(panel=panel, model=model, step=int(last.step.iloc[0]), approximant=name,
                                     fit=fit, distribution=str(vals.distribution.iloc[0]), mean=float(vals.value.mean()),
                                     min=float(vals.value.min()), max=float(vals.value.max()),
                                     n_seeds=int(vals.seed.nunique())))
    return pd.DataFrame(rows)


def _order(key: tuple[str, str]):
    """Bar order: the paper's approximants (linear, quadratic, each fit; the SGD fit), then the degrees."""
    name, fit = key
    paper = ("linear", "quadratic", "quadratic_sgd")
    return (0, paper.index(name), fit != "mixture") if name in paper else (1, name, fit)


def models_figure(*, metrics: str, out: list[str], params: dict) -> list[dict]:
    """Two panels (mixture, test images): for each model a group of bars, one per (approximant, fit),
    at the model's last checkpoint (mean over seeds, min–max whiskers; log scale). Bars of fits under
    the moment-matched Gaussian are hatched. The legends are below the panels (the paper's
    approximants, then the degrees beyond it); the title names ``params['run']``. Returns the rows of
    :func:`final_fvu` drawn."""
    import matplotlib.pyplot as plt

    table = final_fvu(load_parquet(metrics))
    models = list(dict.fromkeys(table.model))
    keys = sorted(dict.fromkeys(zip(table.approximant, table.fit)), key=_order)
    width = 0.8 / max(1, len(keys))
    fig, axes = plt.subplots(1, 2, figsize=(4 + 1.2 * len(models) * max(1, len(keys)) / 2, 4.2), sharey=True)
    paper, beyond = {}, {}
    for ax, (panel, title) in zip(axes, PANELS.items()):
        at = table[table.panel == panel]
        for j, (name, fit) in enumerate(keys):
            bars = at[(at.approximant == name) & (at.fit == fit)].set_index("model").reindex(models)
            xs = [i + (j - (len(keys) - 1) / 2) * width for i in range(len(models))]
            err = [(bars["mean"] - bars["min"]).fillna(0).tolist(), (bars["max"] - bars["mean"]).fillna(0).tolist()]
            gaussian = is_single_gaussian_refit(name, fit)
            hatch = "//" if gaussian else ".." if name == "quadratic_sgd" else None
            bar = ax.bar(xs, bars["mean"], width, yerr=err, color=approximant_color(name), hatch=hatch,
                         edgecolor="white" if hatch else None, capsize=2)
            group = paper if _degree_form(name) is None else beyond
            group.setdefault(approximant_label(name, fit), bar.patches[0])
        ax.set_xticks(range(len(models)), models)
        ax.set_yscale("log")
        ax.set_title(title)
        ax.grid(alpha=0.3, axis="y", which="both")
    axes[0].set_ylabel("FVU at the last checkpoint (log scale)")
    seeds = load_parquet(metrics).seed.unique()
    fig.suptitle(run_title("final FVU of each approximant per model and fit distribution (bar: mean over seeds, "
                           "whiskers: min–max)", models=models, seeds=seeds, run=params.get("run")), fontsize=10)
    fig.tight_layout()
    legends_below(fig, [("the paper's approximants (hatched //: fitted under the single Gaussian; dotted: SGD)", paper),
                        ("beyond the paper", beyond)])
    save_figure(fig, *out)
    return table.to_dict("records")
