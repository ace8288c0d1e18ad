"""End to end with two networks side by side (mnist.models): a ReLU MLP and a GELU GLU on the smoke
config. The smoke run's results are copied and the second model added, so only its jobs and the
tables and figures that compare models run again."""

import re
import shutil

import pandas as pd
import pytest

from polyinterp.mnist.attack.ablation import COLUMNS as ABLATION_COLUMNS
from polyinterp.mnist.attack.summary import COLUMNS as SUMMARY_COLUMNS
from polyinterp.mnist.metrics import COLUMNS as METRIC_COLUMNS
from polyinterp.scorecard import COLUMNS as SCORECARD_COLUMNS
from workflow_helpers import SMOKE, run_snakemake

pytestmark = pytest.mark.e2e
MODELS = ("mlp_relu", "glu_gelu")


@pytest.fixture(scope="module")
def two_models(smoke_run, tmp_path_factory):
    work = tmp_path_factory.mktemp("two_models")
    shutil.copytree(smoke_run / "results", work / "results")
    overlay = work / "overlay.yaml"
    overlay.write_text((smoke_run / "overlay.yaml").read_text()
                       + "  models:\n    - {name: mlp_relu, arch: mlp, activation: relu}\n"
                         "    - {name: glu_gelu, arch: glu, activation: gelu, hidden: 16}\n")
    proc = run_snakemake(work, "--cores", "2", configfiles=(SMOKE, overlay))
    return work, proc.stdout + proc.stderr


def test_only_the_new_model_and_the_comparisons_run(two_models):
    _, log = two_models
    ran = set(re.findall(r"^(?:local)?rule (\w+):", log, re.M))
    assert {"mnist_train", "mnist_approximants", "fig_models_fvu", "scorecard"} <= ran, ran
    assert not ran & {"mnist_data", "mnist_mixture", "mnist_solver_plan"}, ran  # shared inputs are reused
    assert not any(r.startswith("cubic") for r in ran), ran
    assert "results/mnist/glu_gelu/seed0/approx/step16.pt" in log  # the first analysed checkpoint (not step 0)
    assert "output: results/mnist/mlp_relu/" not in log  # the first model's jobs are not rerun


def test_every_table_has_the_model_and_fit_columns(two_models):
    work, _ = two_models
    res = work / "results"
    metrics = pd.read_parquet(res / "mnist/metrics.parquet")
    assert list(metrics.columns) == list(METRIC_COLUMNS)
    assert list(dict.fromkeys(metrics.model)) == list(MODELS)  # config order
    for model in MODELS:
        sub = metrics[metrics.model == model]
        assert {"linear", "quadratic", "quadratic_sgd", "cubic_pc8"} <= set(sub.approximant)
        exact = sub[(sub.distribution == "mixture_exact")].pivot_table(index=["step", "approximant"], columns="fit",
                                                                        values="value")
        both = exact[["mixture", "gaussian"]].dropna()
        assert len(both) == 2 * sub.step.nunique()
        assert (both["mixture"] <= both["gaussian"] + 1e-12).all()
        assert (sub.value.notna()).all()
    for model in MODELS:
        table = pd.read_parquet(res / f"mnist/{model}/svd_ablation.parquet")
        assert list(table.columns) == list(ABLATION_COLUMNS) and set(table.model) == {model}
    summary = pd.read_parquet(res / "mnist/attack_strength.parquet")
    assert list(summary.columns) == list(SUMMARY_COLUMNS) and list(dict.fromkeys(summary.model)) == list(MODELS)
    card = pd.read_parquet(res / "scorecard.parquet")
    assert list(card.columns) == list(SCORECARD_COLUMNS)
    mnist_claims = card[card.study.isin(["mnist", "mnist+", "fit"])]
    assert set(mnist_claims.model) == set(MODELS)
    per_model = mnist_claims.groupby("model").claim.apply(list)
    assert per_model["mlp_relu"] == per_model["glu_gelu"]  # the same claims for each model
    measurable = card[card.verdict != "not comparable"]
    assert measurable.ours_mean.notna().all()
    assert "| glu_gelu |" in (res / "scorecard.md").read_text()


def test_every_figure_of_every_model(two_models):
    work, _ = two_models
    names = ["fig2", "fig3", "fig_fits", "fig_models"] + [f"fig{n}_{m}" for n in (1, 4, 5, 6) for m in MODELS]
    for name in names:
        for ext in ("pdf", "png"):
            path = work / f"results/figures/{name}.{ext}"
            assert path.stat().st_size > 5_000, path


def test_fig_models_draws_the_last_checkpoint_of_each_model(two_models, tmp_path):
    from polyinterp.figures.mnist.models import models_figure

    work, _ = two_models
    metrics = work / "results/mnist/metrics.parquet"
    rows = models_figure(metrics=str(metrics), out=[str(tmp_path / "m.png")], params={"run": "smoke"})
    df = pd.read_parquet(metrics)
    last = df.step.max()
    for r in rows:
        want = df[(df.model == r["model"]) & (df.step == last) & (df.approximant == r["approximant"])
                  & (df.fit == r["fit"]) & (df.distribution == r["distribution"]) & (df.metric == "fvu")]
        assert r["mean"] == pytest.approx(want.value.mean())
    keys = {(r["model"], r["approximant"], r["fit"]) for r in rows if r["panel"] == "mixture"}
    for model in MODELS:
        assert {(model, "quadratic", "mixture"), (model, "quadratic", "gaussian")} <= keys
