"""fig1: for one digit, the linear coefficient image and the top eigenvector of the quadratic
interaction matrix at checkpoints across training, each annotated with its FVU."""

from __future__ import annotations

import math

import pandas as pd
import torch

from polyinterp.io import load_torch, save_figure


def top_eigenvector(gamma: torch.Tensor) -> tuple[float, torch.Tensor]:
    """Eigenpair of the symmetric matrix with the largest |eigenvalue| (sign: positive mass)."""
    vals, vecs = torch.linalg.eigh(gamma.to(torch.float64))
    i = int(vals.abs().argmax())
    v = vecs[:, i]
    return float(vals[i]), v * (1 if v.sum() >= 0 else -1)


def features_figure(*, approx: list[str], metrics: str, out: list[str], params: dict) -> list[dict]:
    """fig1: for digit ``params['digit']``, one column per ``approx`` file (checkpoints across
    training): the linear coefficient image and the top eigenvector of the quadratic matrix, each
    titled with its mixture FVU from ``metrics``. Returns the panels drawn (step, row, fvu, eigval)."""
    return plot_features(approx, metrics, int(params["digit"]), out)


def plot_features(approx_paths, metrics_path, digit: int, out_paths) -> list[dict]:
    import matplotlib.pyplot as plt

    metrics = pd.read_parquet(metrics_path)
    exact = (metrics.distribution == "mixture_exact").any()
    fvu = metrics[(metrics.metric == "fvu") & (metrics.distribution == ("mixture_exact" if exact else "mixture"))]
    fig, axes = plt.subplots(2, len(approx_paths), figsize=(1.7 * len(approx_paths), 4.0), squeeze=False)
    drawn = []
    for col, path in enumerate(approx_paths):
        saved = load_torch(path)
        seed, step = saved["seed"], saved["step"]
        beta = saved["linear"]["beta"][digit]
        side = int(math.isqrt(beta.numel()))
        eigval, eigvec = top_eigenvector(saved["quadratic"]["gamma"][digit])
        at = fvu[(fvu.seed == seed) & (fvu.step == step)].set_index("approximant")["value"]
        panels = [(beta, f"step {step}\nFVU {at.get('linear', float('nan')):.3f}"),
                  (eigvec, f"FVU {at.get('quadratic', float('nan')):.3f} λ={eigval:.2g}")]
        drawn += [{"digit": digit, "seed": int(seed), "step": int(step), "row": "linear",
                   "fvu": float(at.get("linear", float("nan")))},
                  {"digit": digit, "seed": int(seed), "step": int(step), "row": "quadratic_top_eigenvector",
                   "fvu": float(at.get("quadratic", float("nan"))), "eigval": eigval}]
        for row, (img, title) in enumerate(panels):
            ax = axes[row, col]
            lim = float(img.abs().max()) or 1.0
            ax.imshow(img.reshape(side, side).numpy(), cmap="RdBu_r", vmin=-lim, vmax=lim)
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(title, fontsize=7)
    axes[0, 0].set_ylabel("linear β", fontsize=8)
    axes[1, 0].set_ylabel("top eigvec of Γ", fontsize=8)
    fig.suptitle(f"digit {digit}: linear coefficients and top quadratic eigenvector over training (seed {seed})", fontsize=9)
    save_figure(fig, *out_paths)
    return drawn
