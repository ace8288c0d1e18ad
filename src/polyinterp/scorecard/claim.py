"""One claim of the scorecard and the table's columns: a claim is read from the tables as one value per
seed, and its row holds the reference, ours (mean, sd, min, max over seeds, and each seed's value), the
tolerance and the verdict (:mod:`polyinterp.scorecard`).

A claim belongs to a ``family``: the statement of the source it tests. One family may be read under
several measured ``condition``\\ s (the fit, exact or the paper's SGD; the checkpoint the attack reads;
the FVU definition), one row each; :mod:`polyinterp.scorecard.causes` names, beside each row that
differs, the conditions of its family under which the claim holds."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

COLUMNS = {"study": "string", "model": "string", "claim": "string", "family": "string", "condition": "string",
           "reference": "string", "tolerance": "string", "criterion": "string", "where": "string",
           "ours_mean": "float64", "ours_sd": "float64", "ours_min": "float64", "ours_max": "float64",
           "n_seeds": "int64", "per_seed": "string", "detail": "string", "verdict": "string", "seed_agreement": "string",
           "distance": "float64", "cause": "string"}


@dataclass(frozen=True)
class Within:
    """The criterion ``lo ≤ m ≤ hi`` (``None``: no bound at that end; ``strict``: ``lo < m < hi``) and how far a value lies outside it:
    0 inside, else the gap to the nearer end, as ``|log(m / end)|`` when ``log`` (values spanning
    decades, e.g. an FVU against a factor-2 band) or ``|m − end|`` otherwise. The distance ranks the
    conditions of one family (the same criterion), never values of different claims."""
    lo: float | None = None
    hi: float | None = None
    log: bool = False
    strict: bool = False  # open ends: lo < m < hi

    def __call__(self, m: float) -> bool:
        if self.strict:
            return (self.lo is None or m > self.lo) and (self.hi is None or m < self.hi)
        return (self.lo is None or m >= self.lo) and (self.hi is None or m <= self.hi)

    def distance(self, m: float) -> float:
        if not math.isfinite(m):
            return math.nan
        if self(m):
            return 0.0
        end = self.lo if self.lo is not None and m <= self.lo else self.hi
        if self.log:
            return abs(math.log(m / end)) if m > 0 and end > 0 else math.inf
        return abs(m - end)


@dataclass
class Claim:
    study: str
    claim: str
    reference: str
    tolerance: str
    criterion: str
    where: str
    values: list[float]  # one per seed (empty: not measurable in this run)
    ok: object  # callable(mean) -> bool (a Within also ranks the conditions that differ); None when not
    #             comparable; "measured" for an open question; ("answer", callable(mean) -> bool) for an open
    #             yes-or-no question (verdict yes / no)
    model: str = "—"  # the MNIST network the claim was read on (mnist.models)
    family: str = ""  # the statement the claim tests (default: the claim itself)
    condition: str = ""  # the measured condition of this row within its family ("" : the only one)
    seeds: list[int] | None = None  # the seed of each value (default 0, 1, …)
    detail: str = ""  # what the condition resolved to in this run (e.g. the attacked step), for the why table

    def row(self) -> dict:
        pairs = [(s, float(x)) for s, x in zip(self.seeds or range(len(self.values)), self.values)
                 if x is not None and math.isfinite(x)]
        v = np.asarray([x for _, x in pairs], dtype=float)
        stats = dict(ours_mean=float(v.mean()) if len(v) else math.nan,
                     ours_sd=float(v.std(ddof=1)) if len(v) > 1 else math.nan,
                     ours_min=float(v.min()) if len(v) else math.nan, ours_max=float(v.max()) if len(v) else math.nan)
        agreement, distance = "", math.nan
        if self.ok is None or not len(v):
            verdict = "not comparable"
        elif isinstance(self.ok, str) and self.ok == "measured":
            verdict = "measured"
        elif isinstance(self.ok, tuple) and self.ok[0] == "answer":
            verdict = "yes" if self.ok[1](stats["ours_mean"]) else "no"
            agreement = _agreement(pairs, self.ok[1], verdict == "yes", "yes", "no")
        else:
            holds = bool(self.ok(stats["ours_mean"]))
            verdict = "reproduced" if holds else "differs"
            agreement = _agreement(pairs, self.ok, holds, "reproduced", "differs")
            if isinstance(self.ok, Within):
                distance = self.ok.distance(stats["ours_mean"])
        per_seed = ", ".join(f"seed {s}: {x:.4g}" for s, x in pairs) if len(pairs) > 1 else ""
        return dict(study=self.study, model=self.model, claim=self.claim, family=self.family or self.claim,
                    condition=self.condition, reference=self.reference, tolerance=self.tolerance,
                    criterion=self.criterion, where=self.where, **stats, n_seeds=int(len(v)), per_seed=per_seed, detail=self.detail,
                    verdict=verdict, seed_agreement=agreement, distance=distance, cause="")


def _agreement(pairs: list[tuple[int, float]], test, mean_holds: bool, yes: str, no: str) -> str:
    """"" when every seed's own value gives the verdict of the mean; else how many seeds agree with the
    mean's verdict, e.g. "reproduced in 2 of 3 seeds"."""
    if len(pairs) < 2:
        return ""
    holding = sum(bool(test(x)) for _, x in pairs)
    agreeing = holding if mean_holds else len(pairs) - holding
    if agreeing == len(pairs):
        return ""
    return f"{yes if mean_holds else no} in {agreeing} of {len(pairs)} seeds"
