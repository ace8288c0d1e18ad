"""The scorecard's higher-degree rows (mnist+) on hand-made metrics tables with hand-derived answers."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from polyinterp.scorecard import Claim
from polyinterp.scorecard_degrees import degree_claims, rise_share

STEPS = [0, 16, 32, 64, 128]


def _metrics(curves: dict[str, list[float]], seed: int = 0) -> pd.DataFrame:
    rows = [dict(seed=seed, step=s, approximant=name, distribution="mixture_exact", metric="fvu", value=v)
            for name, vals in curves.items() for s, v in zip(STEPS, vals)]
    rows += [dict(seed=seed, step=s, approximant="mlp", distribution="test", metric="accuracy", value=0.9)
             for s in STEPS]
    return pd.DataFrame(rows)


def _rows(metrics):
    return {c.claim: c.row() for c in degree_claims(metrics)}


def test_a_cubic_gain_that_grows_by_more_than_the_rise_closes_it():
    # quadratic: min 0.05 at step 32, last 0.08: rise 0.03 (ratio 1.6). Gain quadratic_pc − cubic_pc:
    # 0.01 at step 32, 0.05 at the end: +0.04 = 4/3 of the rise -> yes
    m = _metrics({"quadratic": [0.5, 0.1, 0.05, 0.06, 0.08], "quadratic_pc10": [0.6, 0.2, 0.1, 0.15, 0.2],
                  "cubic_pc10": [0.55, 0.15, 0.09, 0.12, 0.15]})
    r = _rows(m)
    rise = r["quadratic FVU rises after its best checkpoint"]
    assert rise["ours_mean"] == pytest.approx(1.6) and rise["verdict"] == "measured"
    close = r["the cubic closes the rise of quadratic FVU (on 10 PCs)"]
    assert close["ours_mean"] == pytest.approx(4 / 3) and close["verdict"] == "yes"
    last = r["cubic on 10 PCs vs the full quadratic at the last checkpoint"]
    assert last["ours_mean"] == pytest.approx(0.15 / 0.08) and last["verdict"] == "measured"


def test_a_gain_that_does_not_grow_does_not_close_it():
    m = _metrics({"quadratic": [0.5, 0.1, 0.05, 0.06, 0.08], "quadratic_pc10": [0.6, 0.2, 0.1, 0.15, 0.2],
                  "cubic_pc10": [0.55, 0.15, 0.08, 0.13, 0.18]})  # gain 0.02 at t*, 0.02 at the end
    close = _rows(m)["the cubic closes the rise of quadratic FVU (on 10 PCs)"]
    assert close["ours_mean"] == pytest.approx(0.0, abs=1e-12) and close["verdict"] == "no"


def test_no_rise_after_the_minimum_is_not_comparable():
    m = _metrics({"quadratic": [0.5, 0.1, 0.08, 0.06, 0.05], "quadratic_pc10": [0.6, 0.2, 0.1, 0.1, 0.1],
                  "cubic_pc10": [0.5, 0.1, 0.05, 0.05, 0.05]})
    r = _rows(m)
    assert r["quadratic FVU rises after its best checkpoint"]["ours_mean"] == pytest.approx(1.0)
    close = r["the cubic closes the rise of quadratic FVU (on 10 PCs)"]
    assert close["verdict"] == "not comparable" and close["n_seeds"] == 0
    assert "no rise" in close["where"]


def test_seeds_are_read_separately_and_step_zero_is_ignored():
    # step 0 (the untrained network) has the lowest quadratic FVU here; it must not count as t*
    a = _metrics({"quadratic": [0.01, 0.1, 0.05, 0.06, 0.08], "quadratic_pc4": [0.6, 0.2, 0.1, 0.15, 0.2],
                  "cubic_pc4": [0.55, 0.15, 0.09, 0.12, 0.15]}, seed=0)
    b = _metrics({"quadratic": [0.5, 0.1, 0.05, 0.06, 0.07], "quadratic_pc4": [0.6, 0.2, 0.1, 0.15, 0.2],
                  "cubic_pc4": [0.55, 0.15, 0.09, 0.12, 0.19]}, seed=1)
    close = _rows(pd.concat([a, b]))["the cubic closes the rise of quadratic FVU (on 4 PCs)"]
    # seed 0 as the first test (4/3); seed 1: rise 0.02, gain 0.01 -> 0.01: share 0
    assert close["n_seeds"] == 2 and close["ours_min"] == pytest.approx(0.0, abs=1e-12)
    assert close["ours_max"] == pytest.approx(4 / 3) and close["verdict"] == "no"  # mean 2/3 < 1


def test_without_the_pc_fits_there_are_no_rows():
    assert degree_claims(_metrics({"quadratic": [0.5, 0.1, 0.05, 0.06, 0.08]})) == []


def test_rise_share_needs_both_pc_fits_at_the_minimum_and_the_end():
    q = pd.Series([0.1, 0.05, 0.08], index=[16, 32, 64])
    pc = pd.Series([0.2, 0.1], index=[16, 64])  # no fit at t* = 32
    ratio, share = rise_share(q, pc, pc)
    assert ratio == pytest.approx(1.6) and math.isnan(share)


def test_answer_verdicts():
    yes = Claim("mnist+", "q", "open", "—", "c", "w", [1.2, 0.9], ("answer", lambda m: m >= 1)).row()
    no = Claim("mnist+", "q", "open", "—", "c", "w", [0.2], ("answer", lambda m: m >= 1)).row()
    assert (yes["verdict"], no["verdict"]) == ("yes", "no")


def test_fvu_by_degree_prefers_exact_values_and_orders_by_degree():
    from polyinterp.mnist.degree_summary import fvu_by_degree, fvu_by_degree_markdown

    m = _metrics({"quadratic": [0.5, 0.1, 0.05, 0.06, 0.08], "cubic_pc4": [0.4, 0.09, 0.04, 0.05, 0.07],
                  "quadratic_pc4": [0.45, 0.1, 0.05, 0.06, 0.075], "linear": [0.6, 0.2, 0.15, 0.16, 0.17]})
    mc = m[m.approximant.isin(["quadratic", "cubic_pc4"])].assign(distribution="mixture", value=lambda d: d.value + 1)
    deg = m[m.approximant == "linear"].assign(approximant="gaussian_deg3", distribution="mixture")
    t = fvu_by_degree(pd.concat([m, mc, deg]))
    # exact rows win over Monte Carlo; the Gaussian form has only Monte Carlo
    assert set(t.distribution[t.approximant == "quadratic"]) == {"mixture_exact"}
    assert set(t.distribution[t.approximant == "gaussian_deg3"]) == {"mixture"}
    assert t[(t.step == 32) & (t.approximant == "cubic_pc4")].fvu_mean.item() == pytest.approx(0.04)
    assert list(t[t.step == 16].approximant) == ["linear", "gaussian_deg3", "quadratic_pc4", "cubic_pc4", "quadratic"]
    md = fvu_by_degree_markdown(t, "T")
    assert "| step | linear | gaussian_deg3 (MC) | quadratic_pc4 | cubic_pc4 | quadratic |" in md
    assert "| 32 | 0.15 | 0.15 | 0.05 | 0.04 | 0.05 |" in md
