"""Which attacked checkpoints the figures and the scorecard read: by step, "last", or by accuracy.

The paper attacks a network at about 0.96 test accuracy (a checkpoint near 2^16 steps of its
authors' training); networks trained with another recipe pass that accuracy at other steps, so the
comparable checkpoint is chosen by clean test accuracy (``mnist.ablation.accuracy_level``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from polyinterp.errors import ConfigError


@dataclass(frozen=True)
class FigureStep:
    step: int
    label: str  # how it was chosen, for titles and the scorecard's "where"


def clean_accuracy(table: pd.DataFrame) -> pd.Series:
    """step → the MLP's clean test accuracy (k = 0), mean over seeds, from an attack table."""
    clean = table[(table.k == 0) & (table.predictor == "mlp") & (table.directions == "svd")]
    per_seed = clean.groupby(["step", "seed"])["accuracy"].first()  # identical under every basis
    return per_seed.groupby("step").mean().sort_index()


def accuracy_level_step(table: pd.DataFrame, level: float) -> FigureStep:
    """The first attacked step whose seed-mean clean accuracy reaches ``level``; when none does, the
    most accurate step (labelled so)."""
    acc = clean_accuracy(table)
    if not len(acc):
        raise ConfigError("the attack table has no k = 0 MLP rows; rerun rule mnist_svd_ablation")
    reached = acc[acc >= level]
    if len(reached):
        step = int(reached.index[0])
        return FigureStep(step, f"first step with test accuracy ≥ {level:g} ({acc[step]:.3f})")
    step = int(acc.idxmax())
    return FigureStep(step, f"most accurate step ({acc[step]:.3f}; none reaches {level:g})")


def load_attack_table(path) -> pd.DataFrame:
    """The attack table at ``path`` (:func:`polyinterp.io.load_parquet`: checked before it is read)."""
    from polyinterp.io import load_parquet

    return load_parquet(path)


def figure_steps(table: pd.DataFrame, requested: list, level: float) -> list[FigureStep]:
    """Resolve ``mnist.ablation.figure_steps`` entries (a step number, ``"last"`` or
    ``"accuracy_level"``) against the steps the attack table holds; duplicates are dropped."""
    steps = sorted(int(s) for s in table.step.unique())
    out: list[FigureStep] = []
    for item in requested:
        if item == "accuracy_level":
            chosen = accuracy_level_step(table, level)
        elif item == "last":
            chosen = FigureStep(steps[-1], "last step")
        elif isinstance(item, int) and item in steps:
            chosen = FigureStep(item, f"step {item}")
        else:
            raise ConfigError(f"config key 'mnist.ablation.figure_steps' names {item!r}, which is not an attacked step;"
                              f" use \"accuracy_level\", \"last\" or one of {steps} (or add it to mnist.ablation.steps).")
        if chosen.step not in [s.step for s in out]:
            out.append(chosen)
    return out
