"""FVU by degree over training (rule ``mnist_degree_summary``): the paper's linear and quadratic beside
the higher-degree approximants of :mod:`polyinterp.mnist.degrees.approximants`, one row per checkpoint.

Each approximant's FVU under the mixture is its exact value (``mixture_exact``) where the metrics
table has one and its Monte-Carlo value otherwise (the Gaussian degree-n forms); the table says which.

The approximants fitted under the mixture (and the Gaussian degree-n forms): the single-Gaussian fits
of ``mnist.approx.fits`` are the Gaussian degree-1 and degree-2 forms again, and are left out.

Table schema (``results/mnist/fvu_by_degree.parquet``, tidy): model str, step int64, approximant str, distribution
str (mixture_exact or mixture), fvu_mean, fvu_min, fvu_max float64 (over seeds), n_seeds int64. The
Markdown beside it has one row per checkpoint that has the higher-degree fits and one column per
approximant (seed means), for the results pages.
"""

from __future__ import annotations

import re

import pandas as pd

from polyinterp.io import atomic_path, load_parquet, save_parquet
from polyinterp.mnist.metrics import is_single_gaussian_refit

COLUMNS = {"model": "string", "step": "int64", "approximant": "string", "distribution": "string", "fvu_mean": "float64",
           "fvu_min": "float64", "fvu_max": "float64", "n_seeds": "int64"}


def _order(name: str) -> tuple:
    """Table order: linear, the Gaussian degrees, the PC fits, quadratic (full d), the SGD baseline."""
    if m := re.fullmatch(r"gaussian_deg(\d+)", name):
        return (1, int(m.group(1)))
    if m := re.fullmatch(r"(quadratic|cubic)_pc(\d+)", name):
        return (2, int(m.group(2)), m.group(1) == "cubic")
    return {"linear": (0,), "quadratic": (3,), "quadratic_sgd": (4,)}.get(name, (5, name))


def fvu_by_degree(metrics: pd.DataFrame) -> pd.DataFrame:
    """The tidy table of the module docstring from a metrics table (schema of :mod:`polyinterp.mnist.metrics`)."""
    fvu = metrics[(metrics.metric == "fvu") & metrics.distribution.isin(["mixture_exact", "mixture"])
                  & (metrics.approximant != "mlp")]
    fvu = fvu[[not is_single_gaussian_refit(a, f) for a, f in zip(fvu.approximant, fvu.fit)]]
    exact = set(fvu.approximant[fvu.distribution == "mixture_exact"])
    keep = fvu[(fvu.distribution == "mixture_exact") | ~fvu.approximant.isin(exact)]
    out = (keep.groupby(["model", "step", "approximant", "distribution"], sort=False).value
           .agg(fvu_mean="mean", fvu_min="min", fvu_max="max", n_seeds="count").reset_index())
    order = {m: i for i, m in enumerate(dict.fromkeys(metrics.model))}
    out["rank"] = out.approximant.map(lambda n: _order(str(n)))
    out["model_rank"] = out.model.map(order)
    out = out.sort_values(["model_rank", "step", "rank"], kind="stable").drop(columns=["rank", "model_rank"])
    return out[list(COLUMNS)].astype(COLUMNS).reset_index(drop=True)


def fvu_by_degree_markdown(table: pd.DataFrame, title: str) -> str:
    """Per model (a section each when there are several): steps as rows, approximants as columns
    (seed means, 4 significant digits), at the checkpoints that have a higher-degree fit; a column's
    header marks Monte-Carlo values."""
    models = list(dict.fromkeys(table.model))
    lines = [f"# {title}", ""]
    for model in models:
        if len(models) > 1:
            lines += [f"## {model}", ""]
        lines += _model_markdown(table[table.model == model])
    n = int(table.n_seeds.max()) if len(table) else 0
    lines += [f"FVU under the class mixture, mean over {n} seed(s): exact where not marked; (MC): Monte Carlo "
              "on the metrics' mixture samples."]
    return "\n".join(lines) + "\n"


def _model_markdown(table: pd.DataFrame) -> list[str]:
    higher = table.approximant.str.match(r"^(gaussian_deg\d+|(quadratic|cubic)_pc\d+)$")
    steps = sorted(set(table.step[higher]))
    names = sorted(set(table.approximant), key=lambda n: _order(str(n)))
    mc = set(table.approximant[table.distribution == "mixture"])
    wide = table.pivot_table(index="step", columns="approximant", values="fvu_mean").reindex(index=steps, columns=names)
    head = [f"{n} (MC)" if n in mc else n for n in names]
    lines = ["| step | " + " | ".join(head) + " |", "|---" * (len(names) + 1) + "|"]
    for step, row in wide.iterrows():
        lines.append(f"| {int(step)} | " + " | ".join("—" if pd.isna(v) else f"{v:.4g}" for v in row) + " |")
    return lines + [""]


def degree_summary_step(*, metrics: str, table: str, markdown: str) -> None:
    """Rule ``mnist_degree_summary``: ``metrics`` (results/mnist/metrics.parquet) → the FVU-by-degree
    ``table`` (Parquet) and ``markdown``."""
    out = fvu_by_degree(load_parquet(metrics))
    save_parquet(out, table)
    with atomic_path(markdown) as tmp:
        tmp.write_text(fvu_by_degree_markdown(out, "FVU by degree over training"))
