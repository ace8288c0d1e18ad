"""docs/analysis.md quotes numbers only from published runs, and what it says of them holds there. Its
"why the reproduction differs" section quotes cells of docs/results.md's "Why it differs" table (the
paper and authors_code runs re-read from their published tables), and its statements are checked
against those runs. Its default-config section: each number of its default-config section is a value of that run's attack table, and each
statement ("N(0, I) attacks harder from step 256 on", "the linear approximant is at chance at k = 10",
"the random control keeps the clean accuracy") is checked against the run's attack_strength.parquet."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
ANALYSIS = REPO / "docs" / "analysis.md"
RUN = REPO / "docs" / "results" / "default" / "tables" / "mnist"


def default_section() -> str:
    text = ANALYSIS.read_text()
    return text[text.index("**Default config**"):text.index("**Authors'-code config**")]


@pytest.fixture(scope="module")
def attack() -> pd.DataFrame:
    return pd.read_parquet(RUN / "attack_strength.parquet")


def value(attack, k, basis, predictor, step, column="mean") -> float:
    row = attack[(attack.k == k) & (attack.basis == basis) & (attack.predictor == predictor) & (attack.step == step)]
    assert len(row) == 1, (k, basis, predictor, step)
    return float(row[column].iloc[0])


def test_every_number_of_the_default_section_is_in_the_published_attack_table():
    table = (RUN / "attack_strength.md").read_text()
    shown = set(re.findall(r"\b\d\.\d{3}\b", table))
    quoted = re.findall(r"\b\d\.\d{3}\b", default_section())
    assert len(quoted) > 20
    assert not [q for q in quoted if q not in shown], "numbers in docs/analysis.md that the published table lacks"


def test_the_sections_statements_hold_in_the_published_run(attack):
    steps = sorted(attack.step.unique())
    # At step 1024: the MLP below 0.5 at k = 4 under every basis, at chance (< 0.1) at k = 10 under two.
    assert all(value(attack, 4, b, "mlp", 1024) < 0.5 for b in ("mixture", "gaussian", "standard_normal"))
    assert all(value(attack, 10, b, "mlp", 1024) < 0.1 for b in ("gaussian", "standard_normal"))
    # The network recovers from step 2048 on: above 0.15 at k = 10 under every basis.
    later = [s for s in steps if s >= 2048]
    assert all(value(attack, 10, b, "mlp", s) > 0.15 for s in later for b in ("mixture", "gaussian", "standard_normal"))
    # N(0, I) attacks harder than the mixture at k = 4 from step 256 on.
    assert all(value(attack, 4, "standard_normal", "mlp", s) < value(attack, 4, "mixture", "mlp", s)
               for s in steps if s >= 256)
    # Each basis's own linear approximant is at chance at k = 10 at every checkpoint.
    own = {"mixture": "linear", "gaussian": "linear_gaussian", "standard_normal": "linear_standard_normal"}
    lows = [value(attack, 10, b, p, s) for b, p in own.items() for s in steps]
    assert 0.08 < min(lows) and max(lows) < 0.12
    # Random directions: from step 64 on within 0.005 of the clean accuracy at k = 10.
    assert all(abs(value(attack, 10, "any", "random", s) - value(attack, 10, "any", "random", s, "clean_accuracy"))
               < 0.005 for s in steps if s >= 64)


# -- the early FVU section ---------------------------------------------------------------------------
EARLY = RUN / "early_fvu.parquet"


def early_section() -> str:
    text = ANALYSIS.read_text()
    start = text.index("**Early FVU, default config.**")
    return text[start:text.index("\n## ", start)]


@pytest.fixture(scope="module")
def early() -> pd.DataFrame:
    return pd.read_parquet(EARLY)


def fvu(early, step, fit, definition, approximant="linear") -> float:
    row = early[(early.step == step) & (early.fit == fit) & (early.definition == definition)
                & (early.approximant == approximant)]
    assert len(row) == 1, (step, fit, definition, approximant)
    return float(row.value.iloc[0])


def test_every_number_of_the_early_section_is_in_the_published_early_table():
    table = (RUN / "early_fvu.md").read_text()
    shown = set(re.findall(r"\b\d\.\d+\b", table))
    quoted = [q for q in re.findall(r"\b\d\.\d{2,}\b", early_section())]
    assert len(quoted) > 15
    assert not [q for q in quoted if q not in shown], "numbers in the early section that the published table lacks"


def test_the_early_sections_statements_hold_in_the_published_run(early):
    paper, fits = 0.025, ["mixture_train", "gaussian_train", "gaussian_test", "mixture_test_uniform",
                          "standard_normal", "standard_normal_centred"]
    # The definition halves the headline and leaves it about 3x the paper's value.
    ratio = fvu(early, 16, "mixture_train", "flat") / fvu(early, 16, "mixture_train", "ours")
    assert 0.4 < ratio < 0.6
    assert 2.5 < fvu(early, 16, "mixture_train", "flat") / paper < 3.5
    # The test mixture is the lowest candidate fit under both definitions; the single Gaussians are higher.
    for d in ("ours", "flat"):
        assert min(fits, key=lambda f: fvu(early, 16, f, d)) == "mixture_test_uniform"
        assert fvu(early, 16, "gaussian_train", d) > fvu(early, 16, "mixture_train", d)
    assert fvu(early, 16, "standard_normal", "ours") > 10 * fvu(early, 16, "mixture_train", "ours")
    # The least-squares floor is above twice the paper's value at steps 16 and 32 under both definitions.
    for step in (16, 32):
        assert min(fvu(early, step, "ols_test", d) for d in ("ours", "flat")) > 2 * paper
        assert all(fvu(early, step, f, d) >= fvu(early, step, "ols_test", d) for f in fits for d in ("ours", "flat"))
    # 0.025 appears at step 64 (flat, mixture fits) and for the quadratic at step 16 (ours).
    for f in ("mixture_train", "mixture_test_uniform"):
        assert abs(fvu(early, 64, f, "flat") / paper - 1) < 0.25
    assert abs(fvu(early, 16, "mixture_train", "ours", "quadratic") / paper - 1) < 0.25


# ---- "Why the reproduction differs": the paper config's run beside the authors' recipe's ----------------

def why_analysis() -> str:
    text = ANALYSIS.read_text()
    return text[text.index("## Why the reproduction differs"):text.index("## The SVD attack: what the measurements say")]


def why_table() -> str:
    page = (REPO / "docs" / "results.md").read_text()
    return page.split("## Why it differs", 1)[1].split("\n## ", 1)[0]


def test_every_number_of_the_why_section_is_a_cell_of_the_published_why_table():
    cells = set(re.findall(r"(?<![\w.])\d+\.\d+(?![\w.])", why_table()))
    quoted = re.findall(r"(?<![\w.^])\d\.\d{3,4}(?![\w.])", why_analysis())
    assert len(quoted) >= 15
    assert not [q for q in quoted if q not in cells], "numbers the published why table lacks"


@pytest.fixture(scope="module")
def rescored():
    from polyinterp.results_page import rescored_mnist

    return {run: rescored_mnist(REPO / "docs" / "results" / run)[1].set_index("claim") for run in ("paper", "authors_code")}


def test_the_why_sections_statements_hold_in_the_published_runs(rescored):
    text, code = rescored["paper"], rescored["authors_code"]
    early = "linear FVU ≈ 0.025 early in training"
    # the recipe alone leaves our early FVU where it was; the authors' definition under their recipe is within 2×
    assert abs(text.loc[early, "ours_mean"] - code.loc[early, "ours_mean"]) < 0.01
    assert code.loc[f"{early}, the authors' FVU", "verdict"] == "reproduced"
    # the late rise: both fits rise under the code's recipe, the exact fit does not in every seed under the text's
    rise = "quadratic FVU rises after 2^16 steps"
    assert code.loc[rise, "ours_mean"] == 1.0 and code.loc[f"{rise}, the paper's SGD fit", "ours_mean"] == 1.0
    assert text.loc[rise, "verdict"] == "differs"
    # the attack: under the text recipe the MLP stays above 0.5 at k = 4 wherever it is read; under the code's
    # it falls below at 2^16 under every basis, and reaches chance by k = 10 under the Gaussian and N(0, I)
    for basis in ("mixture", "gaussian", "standard normal"):
        tag = f"SVD attack, β under {basis}"
        for at in ("at accuracy 0.96", "at 2^16", "at the last checkpoint"):
            assert text.loc[f"{tag}: MLP accuracy < 0.5 at k = 4, {at}", "ours_mean"] > 0.5
            assert text.loc[f"{tag}: MLP and quadratic approximant in lockstep, {at}", "verdict"] == "reproduced"
            assert code.loc[f"{tag}: MLP and linear approximant in lockstep, {at}", "verdict"] == "differs"
        assert code.loc[f"{tag}: MLP accuracy < 0.5 at k = 4, at 2^16", "ours_mean"] < 0.5
    for basis in ("gaussian", "standard normal"):
        assert code.loc[f"SVD attack, β under {basis}: MLP at chance by k = 10, at 2^16", "verdict"] == "reproduced"
    assert code.loc["SVD attack, β under mixture: MLP at chance by k = 10, at 2^16", "verdict"] == "differs"
    # the code's recipe first reaches 0.96 test accuracy at step 131072, the text's at 2048
    assert code.loc["SVD attack, β under mixture: MLP at chance by k = 10, at accuracy 0.96", "detail"] == "step 131072"
    assert text.loc["SVD attack, β under mixture: MLP at chance by k = 10, at accuracy 0.96", "detail"] == "step 2048"
    # the late linear FVU: the text recipe is the closer to the text's plateau
    final = "final linear FVU 0.15–0.18"
    assert abs(text.loc[final, "ours_mean"] - 0.18) < abs(code.loc[final, "ours_mean"] - 0.15)


def quadratic_and_linear_fvu(run: str) -> pd.DataFrame:
    """The exact FVU under the mixture of a published run, one column per seed, rows (approximant, step)."""
    m = pd.read_parquet(REPO / "docs" / "results" / run / "tables" / "mnist" / "metrics.parquet")
    m = m[(m.metric == "fvu") & (m.fit == "mixture") & (m.distribution == "mixture_exact")]
    return m.pivot_table(index=["approximant", "step"], columns="seed", values="value")


def test_the_why_sections_unquoted_statements_hold_in_the_published_metrics():
    text, code = quadratic_and_linear_fvu("paper"), quadratic_and_linear_fvu("authors_code")
    # late linear FVU: the text recipe's plateau from 2^14 on (within 5 % of its 2^18 value, every seed) ...
    last = text.loc[("linear", 2**18)]
    for step in (2**14, 2**15, 2**16, 2**17):
        assert ((text.loc[("linear", step)] / last - 1).abs() < 0.05).all(), step
    # ... while the code's recipe's climbs at every octave from 2^15 to 2^18 in every seed
    for a, b in ((2**14, 2**15), (2**15, 2**16), (2**16, 2**17), (2**17, 2**18)):
        assert (code.loc[("linear", b)] > code.loc[("linear", a)]).all(), (a, b)
    # the late rise: under the text recipe the SGD fit nearly doubles from 2^12 to 2^16, the exact fit moves
    # by under a quarter; from 2^16 on both stay within 10 % of their 2^16 value
    sgd = text.loc[("quadratic_sgd", 2**16)] / text.loc[("quadratic_sgd", 2**12)]
    exact = text.loc[("quadratic", 2**16)] / text.loc[("quadratic", 2**12)]
    assert (sgd > 1.8).all() and (sgd < 2.2).all()
    assert (exact < 1.25).all()
    for fit in ("quadratic", "quadratic_sgd"):
        for step in (2**17, 2**18):
            assert ((text.loc[(fit, step)] / text.loc[(fit, 2**16)] - 1).abs() < 0.10).all(), (fit, step)
