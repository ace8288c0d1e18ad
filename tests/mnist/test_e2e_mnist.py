"""End to end on the smoke config: every MNIST table has its schema and sane values."""

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

from polyinterp.mnist.attack.ablation import COLUMNS as ABLATION_COLUMNS
from polyinterp.mnist.attack.bases import BASES, basis_model_name
from polyinterp.mnist.metrics import COLUMNS as METRIC_COLUMNS

pytestmark = pytest.mark.e2e
ARROW_TYPES = {"int64": {"int64"}, "float64": {"double"}, "string": {"string", "large_string"}}


def assert_schema(path, columns: dict) -> None:
    """Column names, order and Arrow types as documented in the README's table schemas."""
    schema = pq.read_schema(path)
    assert schema.names == list(columns)
    for name, dtype in columns.items():
        assert str(schema.field(name).type) in ARROW_TYPES[dtype], (name, schema.field(name).type)


def test_metrics_table_schema_and_ranges(smoke_run):
    path = smoke_run / "results/mnist/metrics.parquet"
    assert_schema(path, METRIC_COLUMNS)
    everything = pd.read_parquet(path)
    assert set(everything.model) == {"mlp_relu"}
    # fit column: the network's rows "none"; linear/quadratic fitted under the mixture and under its
    # moment-matched Gaussian; the Gaussian degree-n forms "gaussian"; the other fits "mixture"
    fits = set(zip(everything.approximant, everything.fit))
    assert {("mlp", "none"), ("linear", "gaussian"), ("quadratic", "gaussian"), ("gaussian_deg2", "gaussian"),
            ("linear", "mixture"), ("quadratic", "mixture"), ("quadratic_sgd", "mixture"), ("cubic_pc8", "mixture")} <= fits
    gx = everything[everything.distribution == "mixture_exact"].pivot_table(
        index=["step", "approximant"], columns="fit", values="value").dropna()
    assert len(gx) == 2 * everything.step.nunique()  # linear and quadratic at every checkpoint
    assert (gx["mixture"] <= gx["gaussian"] + 1e-12).all(), gx  # the mixture fit is optimal under the mixture
    df = everything[(everything.fit != "gaussian") | everything.approximant.str.startswith("gaussian_deg")]
    degrees = {"gaussian_deg1", "gaussian_deg2", "gaussian_deg3", "gaussian_deg4", "quadratic_pc8", "cubic_pc8"}
    assert set(df.approximant) == {"mlp", "linear", "quadratic", "quadratic_sgd"} | degrees
    assert set(df.distribution) == {"mixture", "mixture_exact", "test"}
    assert df.value.notna().all()
    for metric, (lo, hi) in {"fvu": (0, np.inf), "kl": (0, np.inf), "accuracy": (0, 1)}.items():
        values = df[df.metric == metric].value
        assert len(values) and values.between(lo, hi).all(), metric
    assert df.mlp_test_accuracy.between(0, 1).all() and (df.mlp_train_loss > 0).all()
    # quadratic FVU <= linear FVU at every checkpoint (the quadratic basis contains the linear one;
    # the exact fit is optimal under the mixture, so on mixture samples only MC error can reverse it)
    fvu = df[(df.metric == "fvu") & (df.distribution == "mixture")].pivot(index=["seed", "step"], columns="approximant", values="value")
    n = df[df.distribution == "mixture"].n_samples.iloc[0]
    slack = 5 * fvu["linear"] * np.sqrt(2 / n)
    assert (fvu["quadratic"] <= fvu["linear"] + slack).all(), fvu
    # exact (sample-free) mixture FVU: one row per checkpoint and approximant; the exact quadratic
    # minimises it, so it is no worse than the SGD quadratic anywhere; Monte Carlo agrees with it
    exact = df[df.distribution == "mixture_exact"]
    assert (exact.metric == "fvu").all() and (exact.n_samples == 0).all()
    ex = exact.pivot(index=["seed", "step"], columns="approximant", values="value")
    # the PC fits have exact values too; the Gaussian degree-n forms only Monte Carlo
    assert set(ex.columns) == {"linear", "quadratic", "quadratic_sgd", "quadratic_pc8", "cubic_pc8"}
    assert len(ex) == df.groupby(["seed", "step"]).ngroups
    assert ex.notna().all().all() and (ex > 0).all().all()
    # the cubic on 8 PCs contains the quadratic on them; the full quadratic contains the 8-PC quadratic
    assert (ex["cubic_pc8"] <= ex["quadratic_pc8"] + 1e-12).all(), ex
    assert (ex["quadratic"] <= ex["quadratic_pc8"] + 1e-12).all(), ex
    assert (ex["quadratic"] <= ex["quadratic_sgd"] + 1e-9).all(), ex
    assert (ex["quadratic"] <= ex["linear"] + 1e-12).all(), ex
    rel = (fvu[ex.columns] - ex).abs() / ex
    assert (rel.stack() < 0.25).all(), rel  # 10^4 samples: a few per cent of Monte-Carlo error
    # every sampled value has its standard error; the exact FVU lies within 5 of them of the sampled one
    sampled = df[df.distribution != "mixture_exact"]
    assert (sampled.se >= 0).all() and (sampled[sampled.metric != "accuracy"].se > 0).all()
    assert np.isfinite(sampled.se).all() and (exact.se == 0).all()
    se = df[(df.metric == "fvu") & (df.distribution == "mixture")].pivot(index=["seed", "step"], columns="approximant", values="se")
    assert ((fvu[ex.columns] - ex).abs() <= 5 * se[ex.columns]).stack().all(), (fvu[ex.columns] - ex) / se[ex.columns]
    # the trained MLP beats chance by far at the last checkpoint
    last = df[df.step == df.step.max()]
    assert last[(last.approximant == "mlp") & (last.distribution == "test")].value.min() > 0.6


def test_svd_ablation_table(smoke_run):
    path = smoke_run / "results/mnist/mlp_relu/svd_ablation.parquet"
    assert_schema(path, ABLATION_COLUMNS)
    df = pd.read_parquet(path)
    assert df.accuracy.between(0, 1).all()
    assert sorted(df.k.unique()) == list(range(11))
    metrics = pd.read_parquet(smoke_run / "results/mnist/metrics.parquet")
    # every checkpoint × every basis × (svd, random), as the smoke config asks (the defaults)
    covered = set(zip(df.step, df.basis, df.directions))
    assert covered == {(int(t), b, d) for t in metrics.step.unique() for b in BASES for d in ("svd", "random")}
    # each basis's own linear approximant is attacked under it (the mixture's is "linear")
    for basis in BASES:
        assert set(df[df.basis == basis].predictor) >= {"mlp", "linear", "quadratic", basis_model_name(basis)}
    labels = np.load(smoke_run / "results/data/mnist.npz")["test_labels"]
    last = df[df.step == df.step.max()]
    for basis in BASES:
        at = last[last.basis == basis]
        svd = at[(at.directions == "svd") & (at.predictor == "mlp")].set_index("k").accuracy
        rnd = at[(at.directions == "random") & (at.predictor == "mlp")].groupby("k").accuracy.mean()
        assert svd[10] < rnd[10], basis  # the top SVD directions hurt more than random ones
    for step in df.step.unique():
        at = df[(df.step == step) & (df.directions == "svd")]
        # k = 10 = o removes the whole row space of the mixture linear approximant's β: it is then the
        # constant α, so its accuracy is the test frequency of class argmax α (exact, whatever the training)
        alpha = torch.load(smoke_run / f"results/mnist/mlp_relu/seed0/approx/step{step}.pt", weights_only=False)["linear"]["alpha"]
        lin10 = at[(at.basis == "mixture") & (at.predictor == "linear") & (at.k == 10)].accuracy.iloc[0]
        assert lin10 == pytest.approx(float(np.mean(labels == int(alpha.argmax()))), abs=1e-12)
        # k = 0 removes nothing: under every basis the fast route gives the metrics step's test accuracies
        # (float32 and float64 evaluations may split a tie on one or two of the 10 000 images)
        for model in ("mlp", "linear"):
            m = metrics[(metrics.step == step) & (metrics.approximant == model) & (metrics.distribution == "test")
                        & (metrics.fit != "gaussian")
                        & (metrics.metric == "accuracy")].value.iloc[0]
            for basis in BASES:
                k0 = at[(at.basis == basis) & (at.predictor == model) & (at.k == 0)].accuracy.iloc[0]
                assert k0 == pytest.approx(m, abs=2e-4)


def test_every_mnist_figure_exists(smoke_run):
    names = ["fig1_mlp_relu", "fig2", "fig3", "fig4_mlp_relu", "fig5_mlp_relu", "fig6_mlp_relu", "fig_models",
             "fig_fits", "fig_degrees"]
    for n in names:
        for ext in ("pdf", "png"):
            path = smoke_run / f"results/figures/{n}.{ext}"
            assert path.stat().st_size > 5_000, path


def _numpy_network(state: dict):
    """The saved ReLU MLP as a numpy function (its state dict read directly, not through the package)."""
    w1, b1, w2, b2 = (state[k].double().numpy() for k in ("0.weight", "0.bias", "2.weight", "2.bias"))
    return lambda x: np.maximum(x @ w1.T + b1, 0) @ w2.T + b2


def _numpy_polynomial(saved: dict):
    alpha, beta = saved["alpha"].double().numpy(), saved["beta"].double().numpy()
    gamma = saved["gamma"].double().numpy() if "gamma" in saved else None
    return lambda x: alpha + x @ beta.T + (0 if gamma is None else np.einsum("ni,oij,nj->no", x, gamma, x))


def test_flat_fvu_rows_equal_an_independent_computation(smoke_run):
    """metrics.parquet's fvu_flat rows on the test images, for every checkpoint and every approximant of
    the approx files (both fits), equal numpy's var(f − g) / var(f) over the flattened logits, computed
    from the saved checkpoint and approximant files read with torch.load; and the early-FVU table's
    headline row is the metrics table's FVU."""
    from polyinterp.mnist.data import load_mnist

    df = pd.read_parquet(smoke_run / "results/mnist/metrics.parquet")
    flat = df[(df.metric == "fvu_flat") & (df.distribution == "test")]
    ours = df[(df.metric == "fvu") & (df.distribution == "test")]
    assert set(flat.approximant) == set(ours.approximant) - {"mlp"} and len(flat) == len(ours)
    key = ["seed", "step", "approximant", "fit"]
    both = flat.merge(ours, on=key, suffixes=("_flat", "_ours"))
    assert (both.value_flat <= both.value_ours * (1 + 1e-9)).all()
    images = load_mnist(smoke_run / "results/data/mnist.npz").test_images.astype(np.float64) / 255.0
    checked = 0
    for (seed, step), at in flat.groupby(["seed", "step"]):
        folder = smoke_run / f"results/mnist/mlp_relu/seed{seed}"
        ckpt = torch.load(folder / f"ckpt/step{step}.pt", weights_only=True)
        pool = ckpt["preprocess"]["pool"]  # average pooling by hand, no centring in the smoke config
        assert not ckpt["preprocess"]["center"]
        side = 28 // pool
        x = images.reshape(-1, side, pool, side, pool).mean((2, 4)).reshape(len(images), -1)
        f = _numpy_network(ckpt["state"])(x)
        saved = torch.load(folder / f"approx/step{step}.pt", weights_only=True)
        for fit, group in (("mixture", saved), ("gaussian", saved.get("gaussian", {}))):
            for name in ("linear", "quadratic", "quadratic_sgd"):
                if name in group:
                    g = _numpy_polynomial(group[name])(x)
                    row = at[(at.approximant == name) & (at.fit == fit)]
                    assert len(row) == 1, (step, name, fit)
                    # the quadratic form is evaluated in float32 by the metrics (≤ 1e-6 relative)
                    assert row.value.iloc[0] == pytest.approx(np.var(f - g) / np.var(f), rel=1e-6), (step, name, fit)
                    checked += 1
    assert checked >= 5 * flat.step.nunique()
    from polyinterp.mnist.early_fvu import COLUMNS as EARLY_COLUMNS

    assert_schema(smoke_run / "results/mnist/mlp_relu/seed0/early_fvu.parquet", EARLY_COLUMNS)
    early = pd.read_parquet(smoke_run / "results/mnist/mlp_relu/seed0/early_fvu.parquet")
    head = early[(early.approximant == "linear") & (early.fit == "mixture_train") & (early.definition == "ours")]
    assert len(head) == 3
    for r in head.itertuples():
        m = ours[(ours.seed == 0) & (ours.step == r.step) & (ours.approximant == "linear") & (ours.fit == "mixture")]
        assert r.value == pytest.approx(m.value.iloc[0], rel=1e-9)
    assert "Closest candidate to 0.025" in (smoke_run / "results/mnist/early_fvu.md").read_text()
