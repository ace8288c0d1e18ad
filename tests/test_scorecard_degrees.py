"""The scorecard's higher-degree rows (mnist+) on hand-made metrics tables with hand-derived answers."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from polyinterp.scorecard.claim import Claim
from polyinterp.mnist.degrees.summary import fvu_by_degree, fvu_by_degree_markdown
from polyinterp.scorecard.degrees import degree_claims, rise_share

STEPS = [0, 16, 32, 64, 128]


def _metrics(curves: dict[str, list[float]], seed: int = 0) -> pd.DataFrame:
    rows = [dict(seed=seed, step=s, approximant=name, distribution="mixture_exact", metric="fvu", value=v)
            for name, vals in curves.items() for s, v in zip(STEPS, vals)]
    rows += [dict(seed=seed, step=s, approximant="mlp", distribution="test", metric="accuracy", value=0.9)
             for s in STEPS]
    df = pd.DataFrame(rows)
    fit = ["none" if a == "mlp" else "gaussian" if a.startswith("gaussian_deg") else "mixture" for a in df.approximant]
    return df.assign(model="mlp_relu", fit=fit)


def _rows(metrics):
    return {c.claim: c.row() for c in degree_claims(metrics)}


def test_a_cubic_that_does_not_rise_closes_it():
    # full quadratic: min 0.05 at step 32, last 0.08 (ratio 1.6). On 10 PCs the quadratic falls to 0.1
    # at step 32 and rises by 0.1; the cubic falls by 0.01 over the same steps: share 1 + 0.01/0.1
    m = _metrics({"quadratic": [0.5, 0.1, 0.05, 0.06, 0.08], "quadratic_pc10": [0.6, 0.2, 0.1, 0.15, 0.2],
                  "cubic_pc10": [0.55, 0.15, 0.09, 0.085, 0.08]})
    r = _rows(m)
    up = r["quadratic FVU rises after its best checkpoint"]
    assert up["ours_mean"] == pytest.approx(1.6) and up["verdict"] == "measured" and "best at step 32" in up["where"]
    close = r["the cubic closes the rise of quadratic FVU (on 10 PCs)"]
    assert close["ours_mean"] == pytest.approx(1.1) and close["verdict"] == "yes"
    last = r["cubic on 10 PCs vs the full quadratic at the last checkpoint"]
    assert last["ours_mean"] == pytest.approx(0.08 / 0.08) and last["verdict"] == "measured"


def test_a_cubic_that_rises_as_much_does_not_close_it():
    m = _metrics({"quadratic": [0.5, 0.1, 0.05, 0.06, 0.08], "quadratic_pc10": [0.6, 0.2, 0.1, 0.15, 0.2],
                  "cubic_pc10": [0.55, 0.15, 0.08, 0.13, 0.18]})  # +0.1, as the PC quadratic
    close = _rows(m)["the cubic closes the rise of quadratic FVU (on 10 PCs)"]
    assert close["ours_mean"] == pytest.approx(0.0, abs=1e-12) and close["verdict"] == "no"


def test_the_share_compares_the_cubic_with_its_own_quadratic_not_the_full_one():
    # the full quadratic rises by 0.01; the PC quadratic by 0.1 and the PC cubic by 0.06: 40 % removed.
    # (The gain's growth over the full quadratic's rise would say 400 %.)
    m = _metrics({"quadratic": [0.5, 0.1, 0.05, 0.055, 0.06], "quadratic_pc10": [0.6, 0.2, 0.1, 0.15, 0.2],
                  "cubic_pc10": [0.55, 0.15, 0.09, 0.12, 0.15]})
    close = _rows(m)["the cubic closes the rise of quadratic FVU (on 10 PCs)"]
    assert close["ours_mean"] == pytest.approx(0.4) and close["verdict"] == "no"


def test_no_rise_after_the_minimum_is_not_comparable():
    m = _metrics({"quadratic": [0.5, 0.1, 0.08, 0.06, 0.05], "quadratic_pc10": [0.6, 0.2, 0.1, 0.1, 0.1],
                  "cubic_pc10": [0.5, 0.1, 0.05, 0.05, 0.05]})
    r = _rows(m)
    assert r["quadratic FVU rises after its best checkpoint"]["ours_mean"] == pytest.approx(1.0)
    close = r["the cubic closes the rise of quadratic FVU (on 10 PCs)"]
    assert close["verdict"] == "not comparable" and close["n_seeds"] == 0
    assert "no rise of the PC quadratic" in close["where"]


def test_seeds_are_read_separately_and_step_zero_is_ignored():
    # seed 0's PC quadratic is lowest at step 0 (the untrained network): it must not count as t*
    a = _metrics({"quadratic": [0.5, 0.1, 0.05, 0.06, 0.08], "quadratic_pc4": [0.01, 0.2, 0.1, 0.15, 0.2],
                  "cubic_pc4": [0.55, 0.15, 0.09, 0.085, 0.08]}, seed=0)
    b = _metrics({"quadratic": [0.5, 0.1, 0.05, 0.06, 0.07], "quadratic_pc4": [0.6, 0.2, 0.1, 0.15, 0.2],
                  "cubic_pc4": [0.55, 0.15, 0.09, 0.12, 0.19]}, seed=1)
    close = _rows(pd.concat([a, b]))["the cubic closes the rise of quadratic FVU (on 4 PCs)"]
    # seed 0: 1.1 as in the first test; seed 1: the cubic rises by 0.1 as well: 0
    assert close["n_seeds"] == 2 and close["ours_min"] == pytest.approx(0.0, abs=1e-12)
    assert close["ours_max"] == pytest.approx(1.1) and close["verdict"] == "no"  # mean 0.55 < 1


def test_without_the_pc_fits_there_are_no_rows():
    assert degree_claims(_metrics({"quadratic": [0.5, 0.1, 0.05, 0.06, 0.08]})) == []


def test_rise_share_reads_the_checkpoints_both_fits_have():
    q = pd.Series([0.1, 0.05, 0.15], index=[16, 32, 64])
    c = pd.Series([0.1, math.nan, 0.12], index=[16, 32, 64])  # no cubic at 32: t* is 16 among {16, 64}
    share, t, why = rise_share(q, c)
    assert t == 16 and why == "" and share == pytest.approx(1 - 0.02 / 0.05)
    share, t, why = rise_share(q, pd.Series([0.1], index=[16]))
    assert math.isnan(share) and "fewer than two" in why


def test_answer_verdicts():
    yes = Claim("mnist+", "q", "open", "—", "c", "w", [1.2, 0.9], ("answer", lambda m: m >= 1)).row()
    no = Claim("mnist+", "q", "open", "—", "c", "w", [0.2], ("answer", lambda m: m >= 1)).row()
    assert (yes["verdict"], no["verdict"]) == ("yes", "no")


def test_fvu_by_degree_prefers_exact_values_and_orders_by_degree():
    from polyinterp.mnist.degrees.summary import fvu_by_degree, fvu_by_degree_markdown

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


def test_fvu_by_degree_keeps_models_apart_and_leaves_out_the_single_gaussian_fits():
    """Two models, and a Gaussian-fit quadratic row that duplicates gaussian_deg2: per model, the
    mixture fits' means only (the Gaussian fits of linear/quadratic are the degree-1/2 forms again)."""
    a = _metrics({"quadratic": [0.5, 0.1, 0.2, 0.3, 0.4], "gaussian_deg2": [0.6] * 5})
    b = _metrics({"quadratic": [0.9, 0.8, 0.7, 0.6, 0.5], "gaussian_deg2": [0.95] * 5}).assign(model="glu_gelu")
    dup = a[a.approximant == "quadratic"].assign(fit="gaussian", value=123.0)
    table = fvu_by_degree(pd.concat([b, a, dup], ignore_index=True))
    assert list(dict.fromkeys(table.model)) == ["glu_gelu", "mlp_relu"]  # first-appearance order
    at = table.set_index(["model", "approximant", "step"]).fvu_mean
    assert at["mlp_relu", "quadratic", 32] == 0.2 and at["glu_gelu", "quadratic", 32] == 0.7
    assert (table.fvu_mean < 100).all()
    md = fvu_by_degree_markdown(table, "t")
    assert "## glu_gelu" in md and "## mlp_relu" in md
