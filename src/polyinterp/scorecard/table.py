"""The scorecard table: every claim's row, as Parquet and Markdown (rule ``scorecard``)."""

from __future__ import annotations

import math

import pandas as pd

from polyinterp.io import atomic_path, load_parquet, save_parquet
from polyinterp.scorecard.causes import add_causes
from polyinterp.scorecard.claim import COLUMNS
from polyinterp.scorecard.cubic import cubic_claims
from polyinterp.scorecard.cubic_beyond import beyond_claims
from polyinterp.scorecard.mnist import model_claims
from polyinterp.scorecard.why import recipe_label, why_differs, why_markdown


def scorecard_table(metrics: pd.DataFrame, ablation: pd.DataFrame, cubic: pd.DataFrame, *,
                    accuracy_level: float, beyond: dict[str, pd.DataFrame | None] | None = None,
                    early: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every claim's row (schema: module docstring): for each MNIST model (in table order) the claims
    of :func:`~polyinterp.scorecard.mnist.model_claims` — the attack claims at the first checkpoint whose clean test accuracy
    reaches ``accuracy_level`` (config ``mnist.ablation.accuracy_level``), the early-gap row of
    :func:`~polyinterp.scorecard.mnist.early_fvu_claims` (from ``early``, rule ``mnist_early_fvu``'s tables), the higher-degree rows
    of :func:`polyinterp.scorecard.degrees.degree_claims` (where the metrics have the PC fits), the
    single-Gaussian rows of :func:`~polyinterp.scorecard.mnist.fit_claims` —; then the cubic study's and the rows of
    :func:`polyinterp.scorecard.cubic_beyond.beyond_claims` for the ``beyond`` tables."""
    claims = mnist_rows(metrics, ablation, accuracy_level, early)
    claims += cubic_claims(cubic) + beyond_claims(**(beyond or {}))
    rows = [c.row() for c in claims]
    return add_causes(pd.DataFrame(rows)[list(COLUMNS)].astype(COLUMNS))


def mnist_rows(metrics: pd.DataFrame, ablation: pd.DataFrame, accuracy_level: float,
               early: pd.DataFrame | None = None) -> list:
    """The MNIST claims of every model in ``metrics`` (in table order), each labelled with its model."""
    claims = []
    models = list(metrics.model.unique()) if "model" in metrics else [None]
    for model in models:
        m = metrics if model is None else metrics[metrics.model == model]
        a = ablation if model is None or "model" not in ablation else ablation[ablation.model == model]
        e = early if model is None or early is None else early[early.model == model]
        for c in model_claims(m, a, accuracy_level, e):
            c.model = model or "—"
            claims.append(c)
    return claims


def mnist_table(metrics: pd.DataFrame, ablation: pd.DataFrame, accuracy_level: float) -> pd.DataFrame:
    """The MNIST rows of the scorecard alone (with their causes), e.g. re-read from a published run's
    tables (``polyinterp results_page``)."""
    rows = [c.row() for c in mnist_rows(metrics, ablation, accuracy_level)]
    return add_causes(pd.DataFrame(rows)[list(COLUMNS)].astype(COLUMNS))


def _fmt(v: float) -> str:
    if not math.isfinite(v):
        return "—"
    return f"{v:.4g}"


def scorecard_markdown(table: pd.DataFrame, title: str) -> str:
    """The table as Markdown; the model column only when the run has several MNIST models. A verdict
    whose seeds disagree says so, with each seed's value; a row that differs has its cause."""
    several = table.model[table.model != "—"].nunique() > 1
    head = "| study | " + ("model | " if several else "")
    lines = [f"# {title}", "",
             "Tolerances are fixed from the precision of the source's own statement (its digits, its range, "
             "its words), not from our values. A verdict is that of the seed mean; where the seeds disagree "
             "the verdict says in how many it holds, with each seed's value.", "",
             head + "claim | reference | tolerance | ours (mean ± sd [min, max], n seeds) | where | verdict | cause |",
             "|---" * (8 + several) + "|"]
    for r in table.itertuples():
        sd = f" ± {_fmt(r.ours_sd)}" if math.isfinite(r.ours_sd) else ""
        rng = f" [{_fmt(r.ours_min)}, {_fmt(r.ours_max)}]" if r.n_seeds > 1 else ""
        ours = f"{_fmt(r.ours_mean)}{sd}{rng}, n = {r.n_seeds}" if r.n_seeds else "—"
        model = f"{r.model} | " if several else ""
        verdict = f"**{r.seed_agreement}** ({r.per_seed})" if r.seed_agreement else f"**{r.verdict}**"
        lines.append(f"| {r.study} | {model}{r.claim} | {r.reference} | {r.tolerance} | {ours} | {r.where} | {verdict} "
                     f"| {r.cause} |")
    lines += ["", "Criteria:", ""]
    lines += [f"- {r.claim}: {r.criterion}." for r in table.drop_duplicates("claim").itertuples()]
    return "\n".join(lines) + "\n"


BEYOND_TABLES = ("joint_clamp", "layers", "training", "capacity", "grid", "thresholds")


def _read_tables(paths) -> pd.DataFrame | None:
    """The tables at ``paths`` (one path or a list, e.g. one per seed) stacked; None for none."""
    paths = [paths] if isinstance(paths, str) else list(paths or [])
    return pd.concat([load_parquet(p) for p in paths], ignore_index=True) if paths else None


def scorecard_step(*, metrics: str, ablation: list[str], cubic: str, scorecard: str, markdown: str, why: str,
                   params: dict,
                   joint_clamp: list[str] = (), layers: list[str] = (),
                   training: list[str] = (), capacity: list[str] = (),
                   grid: list[str] = (), thresholds: list[str] = (), early: list[str] = ()) -> None:
    """Rule ``scorecard``: the claims table from the MNIST ``metrics`` and ``ablation`` tables (one per
    model, or one path) and the
    cubic ``summary``, as Parquet (``scorecard``) and Markdown (``markdown``, titled with the seeds
    and the last checkpoint the tables hold); the attack claims are read at the checkpoint chosen by
    ``params['accuracy_level']``. The optional tables of the cubic study beyond the blog
    (``joint_clamp`` fits and band ``thresholds`` one per seed; ``layers``, ``training``,
    ``capacity``, ``grid`` summaries) add the ``cubic+`` rows; one the run does not build is left out.
    ``early``: rule ``mnist_early_fvu``'s tables (one per model and seed), for the early-gap row.
    ``why``: the "why it differs" table of this run (:mod:`polyinterp.scorecard.why`), its one column
    named by the training recipe (``params['optimizer']``)."""
    m = load_parquet(metrics)
    given = dict(joint_clamp=joint_clamp, layers=layers, training=training, capacity=capacity, grid=grid,
                 thresholds=thresholds)
    table = scorecard_table(m, _read_tables(ablation), load_parquet(cubic),
                            accuracy_level=float(params["accuracy_level"]),
                            beyond={k: _read_tables(v) for k, v in given.items()}, early=_read_tables(early))
    save_parquet(table, scorecard)
    seeds = ", ".join(str(s) for s in sorted(m.seed.unique()))
    with atomic_path(markdown) as tmp:
        tmp.write_text(scorecard_markdown(table, f"Reproduction scorecard (seeds {seeds}; checkpoints to step "
                                                 f"{int(m.step.max())})"))
    label = f"this run ({recipe_label(dict(optimizer=params.get('optimizer', 'schedulefree_adamw')))})"
    with atomic_path(why) as tmp:
        tmp.write_text(why_markdown(why_differs({label: table}, label), "Why it differs (this run)",
                                    "Each claim that differs, under every condition this run measures; "
                                    "docs/results.md holds the same table across the published runs, "
                                    "the training recipe among the conditions."))
