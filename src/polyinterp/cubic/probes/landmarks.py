"""Landmark correlations: does a latent's profile along x peak at the cubic's roots, critical points
or inflection point?

For y = x³ + a·x² + b·x = x·(x² + a·x + b):
  real roots        0 and (−a ± √(a² − 4b)) / 2 when a² ≥ 4b
  critical points   (−a ± √(a² − 3b)) / 3 when a² ≥ 3b      (roots of y' = 3x² + 2a·x + b)
  inflection point  −a / 3                                   (root of y'' = 6x + 2a)
For each landmark kind (and ``all`` of them together) the template along x is a sum of Gaussian
bumps of width ``bump_width`` at the landmarks; for every latent and every (a, b) on the grid the
table holds the Pearson correlation between the latent's activation along x and the template.
It is NaN where either is constant along x (the latent is silent on the line, or no landmark of the
kind is near the x range).
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd
import torch

from polyinterp.errors import ConfigError

log = logging.getLogger(__name__)
KINDS = ("root", "critical", "inflection", "all")


def _dedupe(values: list[float], tol: float = 1e-9) -> list[float]:
    out: list[float] = []
    for v in sorted(values):
        if not out or abs(v - out[-1]) > tol:
            out.append(v)
    return out


def cubic_landmarks(a: float, b: float) -> dict[str, list[float]]:
    """Real roots, critical points and inflection point of x³ + a·x² + b·x, each sorted ascending."""
    roots = [0.0]
    disc = a * a - 4 * b
    if disc >= 0:
        s = math.sqrt(disc)
        roots += [(-a - s) / 2, (-a + s) / 2]
    crit = []
    disc_c = a * a - 3 * b
    if disc_c >= 0:
        s = math.sqrt(disc_c)
        crit = [(-a - s) / 3, (-a + s) / 3]
    out = {"root": _dedupe(roots), "critical": _dedupe(crit), "inflection": [-a / 3]}
    out["all"] = sorted(out["root"] + out["critical"] + out["inflection"])
    return out


def bump_template(xs: np.ndarray, positions: list[float], width: float) -> np.ndarray:
    """Σ_p exp(−(x − p)² / (2·width²)) along ``xs``."""
    xs = np.asarray(xs, dtype=np.float64)
    out = np.zeros_like(xs)
    for p in positions:
        out += np.exp(-((xs - p) ** 2) / (2 * width * width))
    return out


def pearson_columns(profiles: np.ndarray, template: np.ndarray, eps: float = 1e-10) -> np.ndarray:
    """Pearson correlation of each column of ``profiles`` [n, m] with ``template`` [n]; NaN if constant."""
    p = profiles - profiles.mean(0, keepdims=True)
    t = template - template.mean()
    pn = np.sqrt((p**2).sum(0))
    tn = np.sqrt((t**2).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (t @ p) / (pn * tn)
    r[(pn < eps * max(1.0, np.abs(profiles).max(initial=0.0))) | (tn < eps)] = np.nan
    return np.clip(r, -1.0, 1.0)


def landmark_table(latents: np.ndarray, xs: np.ndarray, a_grid: np.ndarray, b_grid: np.ndarray, width: float) -> pd.DataFrame:
    """Correlations for ``latents`` shaped [n_b, n_a, n_x, m] (b slowest, as ``probe.grid_inputs``)."""
    n_b, n_a, n_x, m = latents.shape
    rows = {k: [] for k in ("latent", "a", "b", "kind", "n_landmarks", "corr")}
    lat_ids = np.arange(m)
    for ib, b in enumerate(b_grid):
        for ia, a in enumerate(a_grid):
            marks = cubic_landmarks(float(a), float(b))
            prof = latents[ib, ia].astype(np.float64)
            for kind in KINDS:
                r = pearson_columns(prof, bump_template(xs, marks[kind], width))
                rows["latent"].append(lat_ids)
                rows["a"].append(np.full(m, a))
                rows["b"].append(np.full(m, b))
                rows["kind"].append(np.full(m, kind, dtype=object))
                rows["n_landmarks"].append(np.full(m, len(marks[kind])))
                rows["corr"].append(r)
    return pd.DataFrame({k: np.concatenate(v) for k, v in rows.items()})


def rank_latents(table: pd.DataFrame, strong: float) -> pd.DataFrame:
    """Per (kind, latent): mean / median correlation over the grid (NaNs skipped), the fraction of grid
    points where it is defined and where it exceeds ``strong``; rank 1 = highest mean within a kind."""
    g = table.groupby(["kind", "latent"])["corr"]
    out = pd.DataFrame({
        "mean_corr": g.mean(), "median_corr": g.median(), "max_corr": g.max(),
        "frac_defined": g.apply(lambda s: float(s.notna().mean())),
        "frac_strong": g.apply(lambda s: float((s > strong).mean())),
    }).reset_index()
    out["rank"] = (
        out.groupby("kind")["mean_corr"].rank(ascending=False, method="first", na_option="bottom").astype(int)
    )
    return out.sort_values(["kind", "rank"]).reset_index(drop=True)


def landmarks_step(*, model: str, sae: str, table: str, ranking: str, params: dict) -> None:
    """Rule ``cubic_landmark_table``: each latent of ``sae`` (read through the regressor ``model`` at
    the hidden layer ``sae`` was fitted on) against the landmark bumps over the (a, b) grid
    (``table``) and the per-kind latent ``ranking``."""
    from polyinterp.cubic.regressor.model import load_model
    from polyinterp.cubic.sae.probe import grid_inputs, latent_activations
    from polyinterp.cubic.sae.autoencoder import load_sae, sae_layer
    from polyinterp.device import resolve_device
    from polyinterp.io import load_torch, save_parquet

    seed = int(params["seed"])
    if params["bump_width"] <= 0:
        raise ConfigError("config key 'cubic.landmarks.bump_width' must be positive.")
    device = resolve_device(params["device"])
    net, dictionary = load_model(model, device), load_sae(sae, device)
    ranges = load_torch(model)["ranges"]
    xs = torch.linspace(*ranges["x"], params["x_points"])
    a_grid = torch.linspace(*ranges["a"], params["a_points"])
    b_grid = torch.linspace(*ranges["b"], params["b_points"])
    z = latent_activations(net, dictionary, grid_inputs(xs, a_grid, b_grid), device, layer=sae_layer(sae))
    z = z.reshape(len(b_grid), len(a_grid), len(xs), dictionary.m).numpy()
    table_df = landmark_table(z, xs.numpy(), a_grid.numpy(), b_grid.numpy(), params["bump_width"])
    table_df.insert(0, "seed", seed)
    ranking_df = rank_latents(table_df, params["strong_corr"])
    ranking_df.insert(0, "seed", seed)
    for kind in KINDS:
        top = ranking_df[(ranking_df.kind == kind) & (ranking_df["rank"] <= 3)]
        log.info("top latents for %s: %s", kind,
                 ", ".join(f"{int(r.latent)} ({r.mean_corr:.3f})" for r in top.itertuples()))
    save_parquet(table_df, table)
    save_parquet(ranking_df, ranking)
