"""Why a claim differs: the criterion's distance, seeds that disagree, the cause beside each row that
differs, the late rise scored on both fits, lockstep with both approximants, and the "why it differs"
table across runs — on hand-built tables whose answers are known."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from polyinterp.scorecard.causes import add_causes
from polyinterp.scorecard.claim import COLUMNS, Claim, Within
from polyinterp.scorecard.mnist import attack_claims, late_rise_claims
from polyinterp.scorecard.why import holds, recipe_label, why_differs, why_markdown


def test_within_and_its_distance():
    band = Within(0.0125, 0.05, log=True)
    assert band(0.025) and band(0.0125) and not band(0.1)
    assert band.distance(0.03) == 0.0
    assert band.distance(0.1) == pytest.approx(math.log(2))       # a factor 2 above the top
    assert band.distance(0.005) == pytest.approx(math.log(2.5))    # a factor 2.5 below the bottom
    below = Within(hi=0.5, strict=True)
    assert not below(0.5) and below(0.49) and below.distance(0.7) == pytest.approx(0.2)
    above = Within(lo=0.5, strict=True)
    assert not above(0.5) and above.distance(0.5) == 0.0 and above.distance(0.2) == pytest.approx(0.3)
    assert math.isnan(band.distance(float("nan")))


def _row(values, ok, seeds=None, **kw):
    return Claim("mnist", kw.pop("claim", "c"), "r", "t", "crit", "w", values, ok, seeds=seeds, **kw).row()


def test_a_verdict_whose_seeds_disagree_says_so_with_each_value():
    r = _row([0.333, 0.667, 0.667], Within(lo=0.5, strict=True), seeds=[0, 1, 2])
    assert r["verdict"] == "reproduced" and r["seed_agreement"] == "reproduced in 2 of 3 seeds"
    assert r["per_seed"] == "seed 0: 0.333, seed 1: 0.667, seed 2: 0.667"
    r = _row([0.6, 0.7, 0.8], Within(lo=0.5, strict=True))
    assert r["verdict"] == "reproduced" and r["seed_agreement"] == ""
    r = _row([0.1, 0.2, 0.9], Within(lo=0.5, strict=True), seeds=[4, 5, 6])
    assert r["verdict"] == "differs" and r["seed_agreement"] == "differs in 2 of 3 seeds"
    assert r["per_seed"].startswith("seed 4: 0.1")
    assert r["distance"] == pytest.approx(0.5 - 0.4)
    assert _row([0.9], Within(lo=0.5))["per_seed"] == ""       # one seed: nothing to disagree
    assert _row([], None)["verdict"] == "not comparable"


def _table(rows):
    return add_causes(pd.DataFrame(rows)[list(COLUMNS)].astype(COLUMNS))


def test_every_row_that_differs_gets_a_cause_from_its_family():
    fam = "MLP at chance by k = 10"
    rows = [_row([0.3], Within(0.05, 0.15), claim=f"{fam}, at 0.96", family=fam, condition="first at 0.96"),
            _row([0.12], Within(0.05, 0.15), claim=f"{fam}, at 2^16", family=fam, condition="step 2^16"),
            _row([0.5], Within(0.05, 0.15), claim=f"{fam}, last", family=fam, condition="the last"),
            _row([0.9], Within(hi=0.5), claim="alone"),
            _row([0.2], Within(0.05, 0.15), claim="other family, first", family="o", condition="first"),
            _row([0.4], Within(0.05, 0.15), claim="other family, last", family="o", condition="last")]
    t = _table(rows).set_index("claim")
    assert t.cause[f"{fam}, at 0.96"] == "reproduced at step 2^16 (0.12), not at first at 0.96"
    assert t.cause[f"{fam}, at 2^16"] == ""                       # reproduced: no cause
    assert t.cause["alone"] == "differs under the one condition measured in this run (w)"
    # none of its conditions holds: the closest by the criterion's distance (0.2 is 0.05 outside, 0.4 is 0.25)
    assert t.cause["other family, last"] == "holds under none of the 2 conditions measured in this run; " \
                                            "closest: first (0.2)"
    assert t.cause["other family, first"].endswith("closest: this one")
    assert (t[t.verdict == "differs"].cause != "").all()


def _metrics(curves: dict, steps, seeds=(0, 1, 2)):
    rows = [dict(seed=s, step=step, approximant=name, distribution="mixture_exact", metric="fvu", value=c[i])
            for name, c in curves.items() for s in seeds for i, step in enumerate(steps)]
    return pd.DataFrame(rows)


def test_the_late_rise_is_scored_on_the_exact_and_the_sgd_fit_a_row_each():
    steps = [4096, 16384, 65536, 131072, 262144]
    flat = [0.0127, 0.0127, 0.0128, 0.0127, 0.0128]   # exact: no rise from 2^16 (ranks 2.5, 1, 2.5: ρ = 0)
    rising = [0.02, 0.022, 0.03, 0.04, 0.05]          # SGD: rises after 2^16 (ρ = 1)
    rows = pd.DataFrame([c.row() for c in late_rise_claims(_metrics({"quadratic": flat, "quadratic_sgd": rising},
                                                                     steps), "mixture_exact")])
    assert list(rows.family.unique()) == ["quadratic FVU rises after 2^16 steps"]
    exact, sgd = rows.iloc[0], rows.iloc[1]
    assert exact.condition.startswith("exact fit") and sgd.condition.startswith("the paper's SGD fit")
    assert exact.verdict == "differs" and exact.ours_mean == pytest.approx(0.0)
    assert sgd.verdict == "reproduced" and sgd.ours_mean == pytest.approx(1.0)
    t = _table(rows.to_dict("records")).set_index("claim")
    assert t.cause["quadratic FVU rises after 2^16 steps"].startswith("reproduced at the paper's SGD fit")
    # SGD at fewer than 3 checkpoints from 2^16: not comparable; no SGD fit at all: no SGD row
    few = _metrics({"quadratic": flat, "quadratic_sgd": rising}, steps)
    few = few[~((few.approximant == "quadratic_sgd") & (few.step > 65536))]
    assert [c.row()["verdict"] for c in late_rise_claims(few, "mixture_exact")] == ["differs", "not comparable"]
    assert len(late_rise_claims(_metrics({"quadratic": flat}, steps), "mixture_exact")) == 1


def test_lockstep_is_scored_against_the_linear_and_the_quadratic_approximant_over_the_drop():
    mlp = [0.97] + [0.6, 0.4, 0.3, 0.2, 0.15, 0.12, 0.11, 0.1, 0.1, 0.1]
    lin = [0.90] + [0.2] * 10          # falls at once: 0.4 behind the MLP at k = 1
    quad = [0.96] + [a - 0.02 for a in mlp[1:]]   # 0.02 behind over the drop, 0.01 at k = 0
    rows = [dict(seed=s, step=4096, basis="mixture", k=k, directions="svd", draw=0, predictor=p, accuracy=acc[k])
            for s in (0, 1) for p, acc in (("mlp", mlp), ("linear", lin), ("quadratic", quad)) for k in range(11)]
    t = pd.DataFrame([c.row() for c in attack_claims(pd.DataFrame(rows), 0.96)])
    t = t[t.claim.str.endswith("at accuracy 0.96")].set_index("family")
    linear = t.loc["SVD attack, β under mixture: MLP and linear approximant in lockstep"]
    quadratic = t.loc["SVD attack, β under mixture: MLP and quadratic approximant in lockstep"]
    assert linear.ours_mean == pytest.approx(0.4) and linear.verdict == "differs"
    assert quadratic.ours_mean == pytest.approx(0.02) and quadratic.verdict == "reproduced"
    assert "clean gap at k = 0: 0.07" in linear["where"] and "clean gap at k = 0: 0.01" in quadratic["where"]


def test_the_why_table_lines_up_conditions_across_runs_and_names_where_a_claim_holds():
    fam = "SVD attack: MLP at chance by k = 10"

    def run(first, last):
        return _table([_row([first], Within(0.05, 0.15), claim=f"{fam}, a", family=fam, condition="first at 0.96",
                            detail="step 2048"),
                       _row([last], Within(0.05, 0.15), claim=f"{fam}, c", family=fam, condition="the last"),
                       _row([0.01], Within(hi=0.05), claim="holds everywhere")])

    text, code = run(0.3, 0.45), run(0.2, 0.1)
    table = why_differs({"text": text, "code": code}, "text")
    assert list(table.columns) == ["claim", "condition", "text", "code", "holds"]
    assert list(table.claim) == [fam, fam]                     # a claim that holds in the reference: no rows
    assert table.loc[0, "text"] == "step 2048: 0.3 (differs)" and table.loc[1, "code"] == "0.1 (reproduced)"
    assert table.holds.iloc[0] == "reproduced under code, the last (0.1)"
    # holds under no condition: the closest one by the criterion's distance
    nowhere = why_differs({"text": text, "code": run(0.2, 0.5)}, "text")
    assert nowhere.holds.iloc[0] == "holds under no measured condition; closest: code, first at 0.96 (0.2)"
    md = why_markdown(table, "Why")
    assert f"**{fam}**: reproduced under code, the last (0.1)." in md and "| the last | 0.45 (differs) |" in md
    assert why_markdown(why_differs({"x": run(0.1, 0.1)}, "x"), "Why").strip().endswith("No claim differs.")
    assert holds([]) == "holds under no measured condition"


def test_recipe_labels():
    assert recipe_label({"optimizer": "adamw"}) == "the authors' code's recipe"
    assert recipe_label({"optimizer": "schedulefree_adamw"}) == "the paper's text recipe"
