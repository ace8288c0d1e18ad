"""The attack's strength over training, per basis: what fig6 draws and the results pages quote.

From the attack table (:mod:`polyinterp.mnist.attack.ablation`): at each attacked step, the test accuracy
left with the top-k SVD directions removed, for the MLP, the linear approximant that defines the
basis and the mixture's exact quadratic, and the MLP under k random directions; mean, min and max
over seeds, beside the step's clean test accuracy (k = 0, seed mean).

Table schema (``results/mnist/attack_strength.parquet``): model str (the network, mnist.models), k int64, basis str (``any`` for the random
control), predictor str (``mlp``, ``linear``/``linear_<basis>``, ``quadratic``, ``random``), step int64,
clean_accuracy, mean, min, max float64, n_seeds int64.
"""

from __future__ import annotations

import pandas as pd

from polyinterp.io import atomic_path, save_parquet
from polyinterp.mnist.attack.bases import basis_model_name, present_bases
from polyinterp.mnist.attack.checkpoints import clean_accuracy, load_attack_table

STRENGTH_COLUMNS = {"k": "int64", "basis": "string", "predictor": "string", "step": "int64",
                    "clean_accuracy": "float64", "mean": "float64", "min": "float64", "max": "float64",
                    "n_seeds": "int64"}
COLUMNS = {"model": "string", **STRENGTH_COLUMNS}
KS = (4, 10)


def summary_ks(table: pd.DataFrame) -> list[int]:
    """The k the summary reports: 4 and 10 (the paper's), or k_max when the table stops earlier."""
    k_max = int(table.k.max())
    return list(dict.fromkeys(min(k, k_max) for k in KS))


def attack_strength(table: pd.DataFrame, k: int) -> pd.DataFrame:
    """Rows of the summary for one k and one model's table (schema: module docstring, without the
    model column), in basis order of
    :data:`polyinterp.mnist.attack.bases.BASES`, steps ascending. Random directions: the MLP, mean
    over draws first, then over seeds (the same draws under every basis, so read once)."""
    clean = clean_accuracy(table)
    bases = present_bases(table.basis)
    parts = []
    for basis in bases:
        svd = table[(table.directions == "svd") & (table.k == k) & (table.basis == basis)
                    & table.predictor.isin(["mlp", basis_model_name(basis), "quadratic"])]
        parts.append(svd.assign(basis=basis))
    if bases:
        rnd = table[(table.directions == "random") & (table.k == k) & (table.predictor == "mlp") & (table.basis == bases[0])]
        parts.append(rnd.assign(basis="any", predictor="random"))
    rows = pd.concat(parts, ignore_index=True) if parts else table.iloc[:0]
    per_seed = rows.groupby(["basis", "predictor", "step", "seed"], sort=False)["accuracy"].mean()
    stats = per_seed.groupby(["basis", "predictor", "step"], sort=False).agg(["mean", "min", "max", "count"]).reset_index()
    stats = stats.rename(columns={"count": "n_seeds"})
    stats.insert(0, "k", k)
    stats.insert(4, "clean_accuracy", stats.step.map(clean))
    basis_rank = {b: i for i, b in enumerate([*bases, "any"])}
    model_rank = lambda m: 0 if m == "mlp" else (2 if m == "quadratic" else 1)  # noqa: E731
    keys = {"basis": lambda c: c.map(basis_rank), "predictor": lambda c: c.map(model_rank), "step": lambda c: c}
    stats = stats.sort_values(["basis", "predictor", "step"], key=lambda c: keys[c.name](c), kind="stable")
    return stats[list(STRENGTH_COLUMNS)].astype(STRENGTH_COLUMNS).reset_index(drop=True)


def attack_summary_table(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`attack_strength` for each model of the table (in table order) and each k of :func:`summary_ks`."""
    frames = []
    for model in table.model.unique():
        sub = table[table.model == model]
        frames += [attack_strength(sub, k).assign(model=model) for k in summary_ks(sub)]
    return pd.concat(frames, ignore_index=True)[list(COLUMNS)].astype(COLUMNS)


def _header(basis: str, model: str) -> str:
    if basis == "any":
        return "MLP, random directions"
    name = {"mlp": "MLP", "quadratic": "quadratic (mixture)"}.get(model, model)
    return f"{name}, β under {basis.replace('_', ' ')}"


def attack_summary_markdown(summary: pd.DataFrame, title: str) -> str:
    """One wide table per k: a row per step (clean accuracy, then each basis's MLP / own linear
    approximant / exact quadratic, then the random control), seed means (± sd is not shown; min–max
    are in the Parquet file)."""
    lines = [f"# {title}", ""]
    models = list(summary.model.unique())
    for model in models:
        if len(models) > 1:
            lines += [f"## {model}", ""]
        lines += _model_markdown(summary[summary.model == model])
    return "\n".join(lines)


def _model_markdown(summary: pd.DataFrame) -> list[str]:
    lines = []
    for k, at in summary.groupby("k", sort=True):
        cols = list(dict.fromkeys(zip(at.basis, at.predictor)))
        wide = at.pivot_table(index="step", columns=["basis", "predictor"], values="mean")
        clean = at.groupby("step").clean_accuracy.first()
        lines += [f"Top {k} SVD directions removed: test accuracy (mean over {int(at.n_seeds.max())} seed(s)).", "",
                  "| step | clean | " + " | ".join(_header(b, m) for b, m in cols) + " |",
                  "|---" * (2 + len(cols)) + "|"]
        for step in wide.index:
            vals = " | ".join(f"{wide.loc[step, c]:.3f}" if c in wide.columns and pd.notna(wide.loc[step, c]) else "—"
                              for c in cols)
            lines.append(f"| {int(step)} | {clean[step]:.3f} | {vals} |")
        lines.append("")
    return lines


def attack_summary_step(*, tables: list[str], summary: str, markdown: str) -> None:
    """Rule ``mnist_attack_summary``: the strength over training of each model's attack table
    (``tables``, one per model), as Parquet (``summary``) and Markdown (``markdown``)."""
    df = pd.concat([load_attack_table(t) for t in tables], ignore_index=True)
    out = attack_summary_table(df)
    save_parquet(out, summary)
    seeds = ", ".join(str(s) for s in sorted(df.seed.unique()))
    with atomic_path(markdown) as tmp:
        tmp.write_text(attack_summary_markdown(out, f"SVD attack strength over training (seeds {seeds})"))
