"""Fidelity of the approximants at one checkpoint, on mixture samples and on MNIST test images.

Table schema (tidy, one row per (approximant, fit, distribution, metric)); see docs/outputs.md, "Tables":
    model str (the network's name, mnist.models), seed int64, step int64, approximant str {mlp (the
    network itself), linear, quadratic, quadratic_sgd, and the higher degrees of
    :mod:`polyinterp.mnist.degrees.approximants`: gaussian_deg{n}, quadratic_pc{p}, cubic_pc{p}},
    fit str {mixture, gaussian (fitted under the mixture's moment-matched Gaussian), none (the mlp
    rows)}, distribution str {mixture, mixture_exact, test}, metric str {fvu, fvu_flat, kl, accuracy}, value float64,
    se float64 (the standard error of a sampled value as an estimate of its expectation under the
    distribution sampled: delta method for the FVU ratio, sd/√n for KL, binomial for accuracy; 0 for
    the exact rows), mlp_train_loss float64, mlp_test_accuracy float64, ridge float64, n_samples int64

``fvu`` is ours, Σ_o E(f_o − g_o)² / Σ_o Var f_o (the headline; it has a closed form under the
mixture); ``fvu_flat`` is the paper authors' code's, Var(f − g) / Var(f) over the flattened [n, o]
outputs (:func:`polyinterp.approx.evaluate.metrics.fvu_flat_and_se`; never above ``fvu``), on the mixture samples
and the test images. Their KL is ours (KL(softmax f ‖ softmax g) in nats, summed over classes, mean
over samples), so it has no second row.
``mixture_exact`` rows are the FVU under the mixture computed without samples
(:func:`polyinterp.approx.evaluate.exact_fvu.exact_fvu`, n_samples 0); ``mixture`` rows are Monte Carlo on
seeded mixture samples (FVU as a cross-check, KL and accuracy, which have no closed form).

The MLP, α + βx and the metrics are float64; the quadratic form xᵀΓx of the quadratic approximants,
most of the run time, is evaluated in float32 (``QUAD_DTYPE``); the reported FVU and KL move by less
than 1e-6 relative against float64 (tested; see ``Approximant.__call__``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from polyinterp.approx import Approximant, GaussianMixture
from polyinterp.approx.evaluate.metrics import accuracy_and_se, fvu_and_se, fvu_flat_and_se, kl_and_se
from polyinterp.approx.evaluate.exact_fvu import exact_fvu
from polyinterp.device import resolve_device
from polyinterp.io import load_parquet, load_torch, save_parquet
from polyinterp.mnist.approximants import load_approximant_fits, load_gaussian_mixture
from polyinterp.mnist.data import load_mnist
from polyinterp.mnist.model import load_network, model_name, polynomial_network
from polyinterp.mnist.preprocess import apply_preprocess

COLUMNS = {
    "model": "string", "seed": "int64", "step": "int64", "approximant": "string", "fit": "string",
    "distribution": "string",
    "metric": "string", "value": "float64", "se": "float64", "mlp_train_loss": "float64",
    "mlp_test_accuracy": "float64", "ridge": "float64", "n_samples": "int64",
}
CHUNK = 8192


def is_single_gaussian_refit(approximant: str, fit: str) -> bool:
    """A linear / quadratic fitted under the moment-matched Gaussian (``mnist.approx.fits``) rather than
    the mixture; the Gaussian degree-n forms are fitted under it too but are their own approximants."""
    return fit == "gaussian" and not approximant.startswith("gaussian_deg")
QUAD_DTYPE = torch.float32


@torch.no_grad()
def _evaluate(fn, x: torch.Tensor) -> torch.Tensor:
    return torch.cat([fn(x[i : i + CHUNK]) for i in range(0, len(x), CHUNK)])


def mixture_samples(mixture: dict | GaussianMixture, n: int, seed: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` seeded samples of the class mixture (float64) and their component (class) labels;
    the same samples at every checkpoint of a seed, so curves over training are comparable.
    ``mixture``: the saved mixture (rule ``mnist_mixture``) or it already loaded by
    :func:`~polyinterp.mnist.approximants.load_gaussian_mixture` (the same samples either way)."""
    mix = mixture if isinstance(mixture, GaussianMixture) else load_gaussian_mixture(mixture, device)
    return mix.sample(n, seed=seed, return_labels=True)


@dataclass(frozen=True)
class EvaluationInputs:
    """The inputs of one sampled ``distribution`` (``mixture`` samples or ``test`` images): ``x`` [n, d]
    float64, their ``labels`` [n] and the network's outputs ``f`` [n, o] on them, shared by every
    approximant and fit compared with it."""

    distribution: str
    x: torch.Tensor
    labels: torch.Tensor
    f: torch.Tensor


@torch.no_grad()
def evaluation_inputs(ckpt: dict, model, mixture: dict | GaussianMixture, mnist, params: dict) -> list[EvaluationInputs]:
    """The mixture samples (``params['mixture_samples']``, seeded by the checkpoint's seed:
    :func:`mixture_samples`) and the preprocessed test images, with the network's outputs on each."""
    device = next(iter(model.parameters())).device
    x_mix, y_mix = mixture_samples(mixture, params["mixture_samples"], int(ckpt["seed"]), device)
    x_te = apply_preprocess(mnist.test_images, ckpt["preprocess"], dtype=torch.float64).to(device)
    y_te = torch.as_tensor(mnist.test_labels, device=device)
    return [EvaluationInputs(name, x, y, _evaluate(lambda v: model(v), x))
            for name, x, y in (("mixture", x_mix.to(device), y_mix.to(device)), ("test", x_te, y_te))]


@torch.no_grad()
def fidelity_rows(approximants: dict, inputs: EvaluationInputs, with_mlp: bool = True) -> list[dict]:
    """Accuracy of the MLP (``with_mlp``), and FVU, KL and accuracy of each approximant against it, on
    ``inputs``, each with its standard error (``se``). An approximant is an :class:`~polyinterp.approx.Approximant` (its xᵀΓx in ``QUAD_DTYPE``)
    or any callable x [n, d] → [n, o] that chunks itself (the higher-degree forms)."""
    f, x, labels = inputs.f, inputs.x, inputs.labels

    def row(name, metric, value_se):
        return dict(approximant=name, distribution=inputs.distribution, metric=metric, value=value_se[0],
                    se=value_se[1])

    rows = [row("mlp", "accuracy", accuracy_and_se(f, labels))] if with_mlp else []
    for name, approx in approximants.items():
        # each chunks itself (an Approximant builds its float32 Γ once)
        g = approx(x, quad_dtype=QUAD_DTYPE) if isinstance(approx, Approximant) else approx(x).to(f.dtype)
        rows += [row(name, "fvu", fvu_and_se(f, g)), row(name, "fvu_flat", fvu_flat_and_se(f, g)),
                 row(name, "kl", kl_and_se(f, g)),
                 row(name, "accuracy", accuracy_and_se(g, labels))]
    return rows


def metrics_table(ckpt: dict, approx_path, mixture: dict, mnist, params: dict) -> pd.DataFrame:
    """The metrics of every approximant in ``approx_path``, of each fit it holds (FITS). The file is read,
    the mixture loaded and sampled, the test images preprocessed and the network evaluated once for
    all fits."""
    device = resolve_device(params["device"])
    model = load_network(ckpt, device).to(torch.float64)
    mix = load_gaussian_mixture(mixture, device)
    by_fit = load_approximant_fits(approx_path, device)
    # one exact_fvu call for every fit: the network's moments E f² (all h² unit pairs) once
    exact = exact_fvu(polynomial_network(model), {f"{fit}/{name}": g for fit, gs in by_fit.items()
                                                  for name, g in gs.items()}, mix)
    inputs = evaluation_inputs(ckpt, model, mix, mnist, params)
    frames = [fidelity_table(ckpt, model, gs, {name: exact[f"{fit}/{name}"] for name in gs}, mixture, mnist, params,
                             with_mlp=fit == "mixture", fit=fit, inputs=inputs)
              for fit, gs in by_fit.items() if gs]
    return pd.concat(frames, ignore_index=True)


def fidelity_table(ckpt: dict, model, approximants: dict, exact: dict[str, float], mixture: dict, mnist,
                   params: dict, with_mlp: bool = True, fit: str | dict = "mixture",
                   inputs: list[EvaluationInputs] | None = None) -> pd.DataFrame:
    """The metrics table (schema above) of ``approximants`` of the checkpoint's ``model``: Monte Carlo on
    ``params['mixture_samples']`` seeded mixture samples (the same samples at every checkpoint of a
    seed, for every approximant) and on the test images, plus one ``mixture_exact`` FVU row per entry
    of ``exact`` (name → value); the network's accuracy rows with ``with_mlp``. ``fit``: the
    distribution the approximants were fitted under, one for all or per name. ``inputs``: those of
    :func:`evaluation_inputs` when already made (several fits of one checkpoint share them)."""
    inputs = inputs or evaluation_inputs(ckpt, model, mixture, mnist, params)
    rows = [r for inp in inputs for r in fidelity_rows(approximants, inp, with_mlp)]
    rows += [dict(approximant=name, distribution="mixture_exact", metric="fvu", value=value, se=0.0)
             for name, value in exact.items()]
    df = pd.DataFrame(rows)
    fits = fit if isinstance(fit, dict) else {name: fit for name in approximants}
    df["fit"] = [("none" if a == "mlp" else fits[a]) for a in df.approximant]
    df.insert(0, "model", model_name(ckpt))
    df.insert(1, "seed", int(ckpt["seed"]))
    df.insert(2, "step", int(ckpt["step"]))
    df["mlp_train_loss"] = float(ckpt["train_loss"])
    df["mlp_test_accuracy"] = float(ckpt["test_accuracy"])
    df["ridge"] = float(mixture["ridge"])
    df["n_samples"] = [{inp.distribution: len(inp.x) for inp in inputs}.get(d, 0) for d in df["distribution"]]
    return df[list(COLUMNS)].astype(COLUMNS)


def metrics_step(*, ckpt: str, approx: str, mixture: str, data: str, metrics: str, params: dict) -> None:
    """Rule ``mnist_metrics`` for one (seed, step): the metrics of ``ckpt`` and its ``approx`` file
    under ``mixture`` samples and the test images of ``data``, written to ``metrics``."""
    df = metrics_table(load_torch(ckpt), approx, load_torch(mixture), load_mnist(data), params)
    save_parquet(df, metrics)


def metrics_all_step(*, parts: list[str], metrics: str) -> None:
    """Rule ``mnist_metrics_all``: the per-checkpoint tables ``parts`` in one tidy table ``metrics``, sorted
    by model (in the order of ``parts``, i.e. of ``mnist.models``), seed, step, approximant, fit,
    distribution and metric."""
    df = pd.concat([load_parquet(p) for p in parts], ignore_index=True).astype(COLUMNS)
    order = {m: i for i, m in enumerate(dict.fromkeys(df.model))}  # models in config (parts) order
    df = df.assign(_order=df.model.map(order)).sort_values(
        ["_order", "seed", "step", "approximant", "fit", "distribution", "metric"], kind="stable").drop(columns="_order")
    save_parquet(df.reset_index(drop=True), metrics)
