"""Why the linear FVU early in training is not the paper's ≈ 0.025: each candidate cause, measured.

At the first checkpoints of a seed, the network's linear approximant is fitted under each candidate
distribution and its FVU on the test images is computed under each definition, so that a cause can be
read alone (one row against the headline row) and together (a row of several). The candidates, from
the paper's text and its authors' code (EleutherAI/polyapprox, branch quadratic-alice, experiments/):

- the **definition**: ``ours`` (Σ_o E(f_o − g_o)² / Σ_o Var f_o) or ``flat`` (their
  ``fvu_between_models``: Var(f − g) / Var(f) over the flattened [n, 10] logits);
- the **fit distribution** (:data:`FITS`): the study's class mixture of the training images (the
  headline), its moment-matched single Gaussian, N(μ, Σ) of the test images, the class mixture of the
  test images with uniform weights (their ``linear_mixture``), N(0, I) in pixel coordinates (their
  ``linear_01``), N(μ_train, I) (N(0, I) after centring the pixels), and least squares on the test
  images themselves (the lowest FVU, under either definition, any affine map reaches there: a floor
  for every other linear row, not itself a candidate cause);
- the **recipe**: the config's training recipe, recorded in the ``recipe`` column (run the
  ``authors_code`` config for the authors' code's recipe against the paper's text's);
- for reference, the exact quadratic approximant under the class mixture (``approximant`` quadratic).

Table schema (``results/mnist/<model>/seed<seed>/early_fvu.parquet``): model str, seed int64, step
int64, mlp_test_accuracy float64, recipe str, approximant str {linear, quadratic}, fit str (a key of
:data:`FITS`), definition str {ours, flat}, value float64 (on the 10 000 test images).
"""

from __future__ import annotations

import math

import pandas as pd
import torch

from polyinterp.approx import Approximant, GaussianMixture, linear_approximant
from polyinterp.approx.fits.linear import solve_covariance
from polyinterp.approx.evaluate.metrics import fvu_and_se, fvu_flat_and_se
from polyinterp.device import resolve_device
from polyinterp.io import atomic_path, load_parquet, load_torch, save_parquet
from polyinterp.mnist.approximants import load_approximants, load_gaussian_mixture
from polyinterp.mnist.data import load_mnist
from polyinterp.mnist.mixture import class_moments
from polyinterp.mnist.model import load_network, model_name, polynomial_network
from polyinterp.mnist.preprocess import apply_preprocess

# The paper's early linear FVU (the scorecard's claim "linear FVU ≈ 0.025 early in training").
PAPER_EARLY_LINEAR_FVU = 0.025

FITS = {
    "mixture_train": "class mixture of the training images (the study's, with its ridge): the headline",
    "gaussian_train": "its moment-matched single Gaussian N(μ, Σ) of the training images",
    "gaussian_test": "N(μ, Σ) of the test images (the authors' linear_ms)",
    "mixture_test_uniform": "class mixture of the test images, uniform weights (the authors' linear_mixture)",
    "standard_normal": "N(0, I) in pixel coordinates (the authors' linear_01)",
    "standard_normal_centred": "N(μ_train, I): N(0, I) in centred pixel coordinates",
    "ols_test": "least squares on the test images (the floor of every linear row; not a cause)",
}
DEFINITIONS = {"ours": fvu_and_se, "flat": fvu_flat_and_se}
# Added to the test set's covariances (absolute, pixels in [0, 1]), as the authors' sgd_experiment does:
# without it the constant border pixels make them singular.
TEST_MIXTURE_JITTER = 1e-6
COLUMNS = {"model": "string", "seed": "int64", "step": "int64", "mlp_test_accuracy": "float64", "recipe": "string",
           "approximant": "string", "fit": "string", "definition": "string", "value": "float64"}


def least_squares_linear(x: torch.Tensor, y: torch.Tensor) -> Approximant:
    """The affine map α + βx that minimises Σ_i ‖y_i − α − βx_i‖² over the rows of x [n, d], y [n, o]
    (minimum-norm β along directions x does not vary in, by :func:`solve_covariance`'s pseudo-inverse)."""
    x, y = x.to(torch.float64), y.to(torch.float64)
    xm, ym = x.mean(0), y.mean(0)
    xc = x - xm
    beta, info = solve_covariance(xc.T @ xc / len(x), (y - ym).T @ xc / len(x))
    return Approximant(ym - beta @ xm, beta, None, {"method": "least_squares", **info})


def candidate_distributions(mix: GaussianMixture, x_test: torch.Tensor, y_test: torch.Tensor,
                            pixel_origin: torch.Tensor | None = None) -> dict[str, GaussianMixture]:
    """The Gaussian (mixture) of each candidate of :data:`FITS` but the two read elsewhere
    (``mixture_train``: the saved approximant; ``ols_test``: the test images), in the preprocessed
    coordinates of ``mix`` and ``x_test``. ``pixel_origin``: where the raw pixel vector 0 lies in those
    coordinates (−mean image when the preprocessing centres; default 0), the mean of ``standard_normal``;
    ``standard_normal_centred`` is centred on the training images' mean."""
    kw = dict(dtype=mix.dtype, device=mix.device)
    eye = torch.eye(mix.d, **kw)
    x = x_test.to(**kw)
    xc = x - x.mean(0)
    origin = torch.zeros(mix.d, **kw) if pixel_origin is None else pixel_origin.to(**kw).reshape(mix.d)
    _, means, covs = class_moments(x, y_test, n_classes=mix.K)
    return {
        "gaussian_train": mix.moment_matched(),
        "gaussian_test": GaussianMixture.single(x.mean(0), xc.T @ xc / (len(x) - 1) + TEST_MIXTURE_JITTER * eye, **kw),
        "mixture_test_uniform": GaussianMixture(torch.full((mix.K,), 1.0 / mix.K, **kw), means.to(**kw),
                                                covs.to(**kw) + TEST_MIXTURE_JITTER * eye, **kw),
        "standard_normal": GaussianMixture.single(origin, eye, **kw),
        "standard_normal_centred": GaussianMixture.single(mix.total_mean(), eye, **kw),
    }


def pixel_origin(spec: dict) -> torch.Tensor | None:
    """The raw pixel vector 0 in the coordinates of a preprocessing ``spec``: −mean image when it centres."""
    return -torch.as_tensor(spec["mean"], dtype=torch.float64).reshape(-1) if spec.get("center") else None


def recipe_label(train: dict) -> str:
    """A network's training recipe (its ``mnist.train`` keys), as the table's ``recipe`` column shows it."""
    keys = ("optimizer", "lr", "batch_size", "warmup_steps", "schedule")
    return ", ".join(f"{k} {train[k]}" for k in keys if k in train)


@torch.no_grad()
def early_fvu_rows(ckpt: dict, approx_path, mix: GaussianMixture, x_test: torch.Tensor,
                   y_test: torch.Tensor, recipe: str) -> list[dict]:
    """The rows (schema: module docstring) of one checkpoint, whose network was trained by ``recipe``."""
    device = mix.device
    net = load_network(ckpt, device).to(torch.float64)
    f = net(x_test)
    saved = load_approximants(approx_path, device, "mixture")
    fits = {"mixture_train": saved["linear"]}
    mlp = polynomial_network(net)
    dists = candidate_distributions(mix, x_test, y_test, pixel_origin(ckpt["preprocess"]))
    fits.update({name: linear_approximant(mlp, dist) for name, dist in dists.items()})
    fits["ols_test"] = least_squares_linear(x_test, f)
    candidates = [("linear", name, g) for name, g in fits.items()] + [("quadratic", "mixture_train", saved["quadratic"])]
    rows = []
    for approximant, fit, g in candidates:
        out = g(x_test)
        for definition, measure in DEFINITIONS.items():
            rows.append(dict(approximant=approximant, fit=fit, definition=definition, value=measure(f, out)[0]))
    base = dict(model=model_name(ckpt), seed=int(ckpt["seed"]), step=int(ckpt["step"]),
                mlp_test_accuracy=float(ckpt["test_accuracy"]), recipe=recipe)
    return [{**base, **r} for r in rows]


def early_fvu_step(*, ckpts: list[str], approx: list[str], mixture: str, data: str, table: str, params: dict) -> None:
    """Rule ``mnist_early_fvu`` for one (model, seed): the candidates' FVU at each checkpoint of
    ``ckpts`` (with its ``approx`` file, in the same order), written to ``table``. ``params``: ``device``
    and ``train``, the network's training keys (for the ``recipe`` column)."""
    device = resolve_device(params["device"])
    mix = load_gaussian_mixture(load_torch(mixture), device)
    mnist = load_mnist(data)
    rows = []
    for ckpt_path, approx_path in zip(ckpts, approx, strict=True):
        ckpt = load_torch(ckpt_path)
        x_test = apply_preprocess(mnist.test_images, ckpt["preprocess"], dtype=torch.float64).to(device)
        y_test = torch.as_tensor(mnist.test_labels, device=device)
        rows += early_fvu_rows(ckpt, approx_path, mix, x_test, y_test, recipe_label(params["train"]))
    save_parquet(pd.DataFrame(rows)[list(COLUMNS)].astype(COLUMNS), table)


def closeness(value: float, reference: float = PAPER_EARLY_LINEAR_FVU) -> float:
    """|log(value / reference)|: how many e-folds a value is from the reference (0: equal)."""
    return abs(math.log(value / reference)) if value > 0 else math.inf


def candidate_causes(linear_rows: pd.DataFrame) -> pd.DataFrame:
    """The linear rows of candidate causes: every fit but ``ols_test`` (a floor, not a cause)."""
    return linear_rows[(linear_rows.approximant == "linear") & (linear_rows.fit != "ols_test")]


def early_fvu_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Seed means per (model, step, approximant, fit, definition), with the clean test accuracy and
    :func:`closeness` to the paper's 0.025."""
    keys = ["model", "step", "recipe", "approximant", "fit", "definition"]
    out = (table.groupby(keys, sort=False)
           .agg(value=("value", "mean"), mlp_test_accuracy=("mlp_test_accuracy", "mean"), n_seeds=("seed", "nunique"))
           .reset_index())
    out["closeness"] = [closeness(v) for v in out.value]
    return out


def _row_label(approximant: str, fit: str) -> str:
    return f"{fit}" if approximant == "linear" else f"{approximant} ({fit})"


def early_fvu_markdown(summary: pd.DataFrame) -> str:
    """Per model and step, one row per candidate fit (and the quadratic for reference), one column per
    definition, and the candidate cause (:func:`candidate_causes`) closest to the paper's 0.025."""
    lines = ["# Early linear FVU: each candidate cause", "",
             f"FVU on the test images of the linear approximant fitted under each distribution, under our definition "
             f"and the authors' code's (flattened variance); the paper's value is {PAPER_EARLY_LINEAR_FVU}. "
             "Rows: " + "; ".join(f"`{k}`: {v}" for k, v in FITS.items()) + ".", ""]
    for (model, step), at in summary.groupby(["model", "step"], sort=False):
        recipe = at.recipe.iloc[0]
        lines += [f"**{model}, step {int(step)}** (test accuracy {at.mlp_test_accuracy.iloc[0]:.3f}; "
                  f"mean over {int(at.n_seeds.max())} seed(s); recipe: {recipe})", "",
                  "| approximant, fit | ours | flat (authors') |", "|---|---|---|"]
        wide = at.pivot_table(index=["approximant", "fit"], columns="definition", values="value", sort=False)
        for (approximant, fit), row in wide.iterrows():
            lines.append(f"| {_row_label(approximant, fit)} | {row.get('ours', math.nan):.4g} | "
                         f"{row.get('flat', math.nan):.4g} |")
        lin = candidate_causes(at)
        best = lin.loc[lin.closeness.idxmin()]
        lines += ["", f"Closest candidate to {PAPER_EARLY_LINEAR_FVU} (of the linear rows but `ols_test`): `{best.fit}` "
                  f"under the `{best.definition}` definition, {best.value:.4g} ({math.exp(best.closeness):.2f}× off).", ""]
    return "\n".join(lines)


def early_fvu_summary_step(*, tables: list[str], summary: str, markdown: str) -> None:
    """Rule ``mnist_early_fvu_summary``: every (model, seed) table of rule ``mnist_early_fvu`` as seed
    means (``summary``, Parquet) and a Markdown table per model and step (``markdown``)."""
    df = pd.concat([load_parquet(t) for t in tables], ignore_index=True)
    out = early_fvu_summary(df)
    save_parquet(out, summary)
    with atomic_path(markdown) as tmp:
        tmp.write_text(early_fvu_markdown(out))
