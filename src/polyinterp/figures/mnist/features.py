"""fig1: for one digit, at checkpoints across training (the paper's 2^12 and 2^14 among them), what
drives the output under the data, then apart the raw coefficients: the mixture fit's linear pattern
and the whitened top feature of its quadratic matrix Γ, its filter β and raw top eigenvector of Γ,
and the N(0, I) fit's β and top eigenvector of Γ (the paper's authors')."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from polyinterp.approx import feature_summary, psd_sqrt, quadratic_gaussian, top_eigenpair
from polyinterp.errors import DataError
from polyinterp.figures.style import run_title
from polyinterp.io import load_parquet, load_torch, save_figure
from polyinterp.mnist.approximants import load_gaussian_mixture
from polyinterp.mnist.model import load_network, model_name, polynomial_network

# (row key in the returned data, row label on the left of the figure), top to bottom, in three groups
# (GROUPS): under the data (what the network uses), the raw coefficients, the authors' N(0, I) fit
ROWS = (
    ("mixture_linear_pattern", "linear: pattern Σβ"),
    ("mixture_gamma_whitened", "quadratic: top\nwhitened feature\nΣ½v of Σ½ΓΣ½"),
    ("mixture_beta", "linear: filter β"),
    ("mixture_gamma_raw", "quadratic: top\neigenvector of Γ"),
    ("standard_normal_beta", "linear: β"),
    ("standard_normal_gamma", "quadratic: top\neigenvector of Γ"),
)
GROUPS = (("fitted under the class mixture, seen through the data's covariance Σ (what the network uses)", 2),
          ("the same fit's raw coefficients (the ridge weights near-constant border pixels)", 2),
          ("fitted under N(0, I), as the paper's authors drew them", 2))


def features_figure(*, approx: list[str], ckpt: list[str], mixture: str, metrics: str, out: list[str],
                    params: dict) -> list[dict]:
    """fig1: for digit ``params['digit']``, one column per checkpoint (``approx`` and ``ckpt``, the same
    (seed, step)s in the same order) and six rows in three groups (:data:`GROUPS`). Under the data, what
    the network uses: (a) the mixture fit's linear pattern Σβ (Σ: the total covariance of ``mixture``),
    (b) the top whitened feature Σ^{1/2}v of Σ^{1/2}ΓΣ^{1/2} with λ and its share of the quadratic
    term's variance. Apart, the raw coefficients: (c) the filter β with βᵀΣβ, (d) the top raw
    eigenvector of Γ with λ and its coordinate's share (kept to show the ridge artifact: near-constant
    pixels). Every mixture panel is annotated with its approximant's FVU under the mixture from
    ``metrics`` (exact where the table has it). Then (e), (f): β and the top eigenvector of Γ of the
    checkpoint's MLP fit under N(0, I) (preprocessed coordinates), (f) with λ and its share under
    N(0, I). The title names the model, ``params['run']`` and the seed.

    Returns one dict per panel, checkpoint by checkpoint in :data:`ROWS` order: digit, seed, step, row
    (a key of :data:`ROWS`), and where the row has them eigval, variance_share, fvu, variance (βᵀΣβ
    for the pattern, βᵀβ for the N(0, I) β)."""
    if len(approx) != len(ckpt):
        raise DataError(f"fig1_features needs one ckpt per approx file, got {len(approx)} approx and {len(ckpt)} ckpt")
    return plot_features(approx, ckpt, mixture, metrics, int(params["digit"]), out, params.get("run"))


def _fvu_table(metrics_path) -> pd.DataFrame:
    metrics = load_parquet(metrics_path)
    exact = (metrics.distribution == "mixture_exact").any()
    return metrics[(metrics.metric == "fvu") & (metrics.distribution == ("mixture_exact" if exact else "mixture"))
                   & (metrics.fit == "mixture")]


def _column(saved: dict, ck: dict, digit: int, cov: torch.Tensor, cov_sqrt: torch.Tensor, fvu: pd.Series,
            approx_path, ckpt_path) -> list[tuple[dict, torch.Tensor, str]]:
    """The six panels of one checkpoint: (data, image, title) per row of :data:`ROWS`."""
    seed, step = int(saved["seed"]), int(saved["step"])
    if (int(ck["seed"]), int(ck["step"])) != (seed, step):
        raise DataError(f"{ckpt_path} is seed {ck['seed']} step {ck['step']} but {approx_path} is seed {seed} "
                        f"step {step}: pass the checkpoints of the approx files, in the same order")
    s = feature_summary(saved["quadratic"]["gamma"][digit], saved["linear"]["beta"][digit], cov, cov_sqrt=cov_sqrt)
    w = s.whitened
    mlp = polynomial_network(load_network(ck, "cpu"))
    d = cov.shape[0]
    std = quadratic_gaussian(mlp, torch.zeros(d, dtype=torch.float64), torch.eye(d, dtype=torch.float64))
    g_beta, g_gamma = std.beta[digit], std.gamma[digit]
    g_lam, g_vec = top_eigenpair(g_gamma)
    g_share = g_lam ** 2 / float(g_gamma.square().sum()) if float(g_gamma.abs().max()) > 0 else 0.0
    fvu_lin, fvu_quad = float(fvu.get("linear", float("nan"))), float(fvu.get("quadratic", float("nan")))
    lam_w, share_w = float(w.eigvals[0]), float(w.variance_share[0])
    g_var = float(g_beta @ g_beta)
    base = {"digit": digit, "seed": seed, "step": step}
    lin, quad = f"FVU {fvu_lin:.3f}", f"FVU {fvu_quad:.3f}"
    panels = {
        "mixture_beta": ({"fvu": fvu_lin}, s.beta, f"{lin}, βᵀΣβ {s.linear_variance:.2g}"),
        "mixture_linear_pattern": ({"fvu": fvu_lin, "variance": s.linear_variance}, s.linear_pattern,
                                   f"step {step}\n{lin}"),
        "mixture_gamma_raw": ({"fvu": fvu_quad, "eigval": s.raw_eigval, "variance_share": s.raw_variance_share},
                              s.raw_eigvec, f"{quad}\nλ {s.raw_eigval:.2g}, share {s.raw_variance_share:.1g}"),
        "mixture_gamma_whitened": ({"fvu": fvu_quad, "eigval": lam_w, "variance_share": share_w}, w.patterns[0],
                                   f"{quad}\nλ {lam_w:.2g}, share {share_w:.2f}"),
        "standard_normal_beta": ({"variance": g_var}, g_beta, f"step {step}\nβᵀβ {g_var:.2g}"),
        "standard_normal_gamma": ({"eigval": g_lam, "variance_share": g_share}, g_vec,
                                  f"λ {g_lam:.2g}, share {g_share:.2f}"),
    }
    panels = [panels[key] for key, _ in ROWS]
    return [({**base, "row": key, **extra}, img, title) for (key, _), (extra, img, title) in zip(ROWS, panels)]


def plot_features(approx_paths, ckpt_paths, mixture_path, metrics_path, digit: int, out_paths,
                  run: str | None = None) -> list[dict]:
    import matplotlib.pyplot as plt

    fvu = _fvu_table(metrics_path)
    mix_saved = load_torch(mixture_path)
    cov = load_gaussian_mixture(mix_saved, torch.device("cpu")).total_cov()
    cov_sqrt = psd_sqrt(cov)
    side = int(math.isqrt(cov.shape[0]))
    ncol = len(approx_paths)
    fig = plt.figure(figsize=(1.2 + 1.6 * ncol, 0.9 + 1.85 * len(ROWS) + 0.5 * len(GROUPS)))
    subfigs = fig.subfigures(len(GROUPS), 1, height_ratios=[n for _, n in GROUPS])
    axes, start = [], 0
    for sub, (title, n) in zip(subfigs, GROUPS):
        sub.suptitle(title, fontsize=8, fontweight="bold")
        axes.extend(sub.subplots(n, ncol, squeeze=False))
        start += n
    axes = np.array([list(r) for r in axes], dtype=object)
    drawn, seed, model = [], None, None
    for col, (apath, cpath) in enumerate(zip(approx_paths, ckpt_paths)):
        saved, ck = load_torch(apath), load_torch(cpath)
        if saved.get("preprocess") != mix_saved.get("preprocess"):
            raise DataError(f"{apath} was fitted in preprocessing {saved.get('preprocess')} but {mixture_path} is in "
                            f"{mix_saved.get('preprocess')}: rebuild both from one config")
        seed, model = int(saved["seed"]), model_name(saved)
        at = fvu[(fvu.model == model) & (fvu.seed == seed)
                 & (fvu.step == int(saved["step"]))].set_index("approximant")["value"]
        for row, (data, img, title) in enumerate(_column(saved, ck, digit, cov, cov_sqrt, at, apath, cpath)):
            drawn.append(data)
            ax = axes[row, col]
            img = img.detach().to(torch.float64).cpu()
            lim = float(img.abs().max()) or 1.0
            ax.imshow(img.reshape(side, side).numpy(), cmap="RdBu_r", vmin=-lim, vmax=lim)
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(title, fontsize=6.5)
    for row, (_, label) in enumerate(ROWS):
        axes[row, 0].set_ylabel(label, fontsize=7)
    fig.suptitle(run_title(f"digit {digit} over training: the approximants' features at each checkpoint (FVU under "
                           "the mixture; share: of the quadratic term's variance)", models=[model], seeds=[seed],
                           run=run), fontsize=9, y=1.02)
    save_figure(fig, *out_paths)
    return drawn
