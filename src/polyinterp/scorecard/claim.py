"""One claim of the scorecard and the table's columns: a claim is read from the tables as one value per
seed, and its row holds the reference, ours (mean, sd, min, max over seeds), the tolerance and the
verdict (:mod:`polyinterp.scorecard`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

COLUMNS = {"study": "string", "model": "string", "claim": "string", "reference": "string", "tolerance": "string",
           "criterion": "string", "where": "string", "ours_mean": "float64", "ours_sd": "float64",
           "ours_min": "float64", "ours_max": "float64", "n_seeds": "int64", "verdict": "string"}


@dataclass
class Claim:
    study: str
    claim: str
    reference: str
    tolerance: str
    criterion: str
    where: str
    values: list[float]  # one per seed (empty: not measurable in this run)
    ok: object  # callable(mean) -> bool; None when not comparable; "measured" for an open question;
    #             ("answer", callable(mean) -> bool) for an open yes-or-no question (verdict yes / no)
    model: str = "—"  # the MNIST network the claim was read on (mnist.models)

    def row(self) -> dict:
        v = np.asarray([x for x in self.values if x is not None and math.isfinite(x)], dtype=float)
        stats = dict(ours_mean=float(v.mean()) if len(v) else math.nan,
                     ours_sd=float(v.std(ddof=1)) if len(v) > 1 else math.nan,
                     ours_min=float(v.min()) if len(v) else math.nan, ours_max=float(v.max()) if len(v) else math.nan)
        if self.ok is None or not len(v):
            verdict = "not comparable"
        elif isinstance(self.ok, str) and self.ok == "measured":
            verdict = "measured"
        elif isinstance(self.ok, tuple) and self.ok[0] == "answer":
            verdict = "yes" if self.ok[1](stats["ours_mean"]) else "no"
        else:
            verdict = "reproduced" if self.ok(stats["ours_mean"]) else "differs"
        return dict(study=self.study, model=self.model, claim=self.claim, reference=self.reference, tolerance=self.tolerance,
                    criterion=self.criterion, where=self.where, **stats, n_seeds=int(len(v)), verdict=verdict)
