"""Diagonal bands: latents whose activation over the (x, a) plane depends on one combination x + c·a.

Detection (on a grid over (x, a) at a few fixed b): a function f(x + c·a) has every gradient parallel
to (1, c). The structure tensor J = Σ ∇f ∇fᵀ (finite differences over the grid) then has rank one:
its coherence (λ₁ − λ₂)/(λ₁ + λ₂) is 1 and its leading eigenvector gives c = v_a / v_x. A latent is a
*band* when, at every b slice, it is active on at least ``min_active_frac`` of the grid, its coherence
is at least ``coherence_min`` and |c| ≤ ``c_max``, and the slices agree on c (max − min ≤ ``c_tol``):
the direction is invariant across b. ``b_invariance_r2`` additionally scores how much of the
activation, pooled over all b slices, one bucketed function of x + c·a explains.

Slope search (on the SAE's random train / held-out activations, all b): for each candidate c on a
grid over ``c_range`` (then a ``refine``-times finer grid around the best), bucket the training points
by u = x + c·a into ``buckets`` equal-width bins, predict each held-out activation by its bin's
training mean, and score by R². The best c and its R² per latent; the median over band latents is
compared with Cardano's 1/3 (the shift x = t − a/3 that removes the quadratic term).
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import torch

from polyinterp.errors import ConfigError

log = logging.getLogger(__name__)
CARDANO_C = 1.0 / 3.0


# --------------------------------------------------------------------------------------- detection
def structure_direction(f: np.ndarray, xs: np.ndarray, as_: np.ndarray) -> tuple[float, float]:
    """(coherence, c) of ``f`` sampled as f[a_index, x_index]; c = NaN when the gradient has no x part."""
    fa, fx = np.gradient(f.astype(np.float64), as_, xs)
    j = np.array([[np.sum(fx * fx), np.sum(fx * fa)], [np.sum(fx * fa), np.sum(fa * fa)]])
    tr = j[0, 0] + j[1, 1]
    if tr <= 0:
        return 0.0, float("nan")
    vals, vecs = np.linalg.eigh(j)
    coherence = float((vals[1] - vals[0]) / (vals[1] + vals[0]))
    vx, va = vecs[0, 1], vecs[1, 1]
    c = float(va / vx) if abs(vx) > 1e-12 * max(1.0, abs(va)) else float("nan")
    return coherence, c


def bucket_r2_pooled(u: np.ndarray, z: np.ndarray, n_buckets: int) -> float:
    """In-sample R² of the bucket-mean model z ≈ g(u) with ``n_buckets`` equal-width bins (NaN if z constant)."""
    u, z = u.ravel(), z.ravel().astype(np.float64)
    sst = float(((z - z.mean()) ** 2).sum())
    if sst <= 0:
        return float("nan")
    lo, hi = u.min(), u.max()
    idx = np.clip(((u - lo) / max(hi - lo, 1e-12) * n_buckets).astype(int), 0, n_buckets - 1)
    cnt = np.bincount(idx, minlength=n_buckets)
    mean = np.bincount(idx, weights=z, minlength=n_buckets) / np.maximum(cnt, 1)
    return 1.0 - float(((z - mean[idx]) ** 2).sum()) / sst


def detect_bands(grid: np.ndarray, xs: np.ndarray, as_: np.ndarray, b_slices: np.ndarray, params: dict):
    """``grid`` [n_b, n_a, n_x, m] → (per-slice table, per-latent table with ``is_band``)."""
    n_b, _, _, m = grid.shape
    slices, latents = [], []
    for j in range(m):
        cs, ok = [], True
        for ib, b in enumerate(b_slices):
            f = grid[ib, :, :, j]
            active = float((f > 0).mean())
            coh, c = structure_direction(f, xs, as_)
            slices.append({"latent": j, "b": float(b), "active_frac": active, "coherence": coh, "c_grad": c})
            cs.append(c)
            ok &= active >= params["min_active_frac"] and coh >= params["coherence_min"] and np.isfinite(c) \
                and abs(c) <= params["c_max"]
        cs = np.asarray(cs, dtype=np.float64)
        finite = cs[np.isfinite(cs)]
        spread = float(finite.max() - finite.min()) if len(finite) == len(cs) else float("nan")
        c_med = float(np.median(finite)) if len(finite) else float("nan")
        inv = float("nan")
        if np.isfinite(c_med):
            a_mesh, x_mesh = np.meshgrid(as_, xs, indexing="ij")
            u = np.broadcast_to(x_mesh + c_med * a_mesh, grid.shape[:3])
            inv = bucket_r2_pooled(u, grid[:, :, :, j], params["buckets"])
        sl = [s for s in slices if s["latent"] == j]
        is_band = bool(ok and np.isfinite(spread) and spread <= params["c_tol"]
                       and np.isfinite(inv) and inv >= params["invariance_min"])
        latents.append({
            "latent": j, "is_band": is_band, "c_grad_median": c_med, "c_grad_spread": spread,
            "min_coherence": min(s["coherence"] for s in sl), "min_active_frac": min(s["active_frac"] for s in sl),
            "b_invariance_r2": inv,
        })
    return pd.DataFrame(slices), pd.DataFrame(latents)


def bands_step(*, model: str, sae: str, slices: str, latents: str, grid: str, params: dict) -> None:
    """Rule ``cubic_band_detection``: the latents of ``sae`` (read through the regressor ``model`` at
    the hidden layer ``sae`` was fitted on) over the (x, a) ``grid`` at each b slice, per-slice
    structure-tensor scores (``slices``) and the band verdict per latent (``latents``). ``grid`` keeps
    every latent's values, or with ``params["grid_latents"] == "bands"`` (the layer and checkpoint
    views: 256 latents on a paper-size grid are ~1 GB) only the band latents'; ``latent_ids`` names them."""
    from polyinterp.cubic.regressor.model import load_model
    from polyinterp.cubic.sae.probe import grid_inputs, latent_activations
    from polyinterp.cubic.sae.autoencoder import load_sae, sae_layer
    from polyinterp.device import resolve_device
    from polyinterp.io import load_torch, save_parquet, save_torch

    seed = int(params["seed"])
    device = resolve_device(params["device"])
    net, dictionary = load_model(model, device), load_sae(sae, device)
    ranges = load_torch(model)["ranges"]
    xs = torch.linspace(*ranges["x"], params["x_points"])
    as_ = torch.linspace(*ranges["a"], params["a_points"])
    bs = torch.tensor([float(b) for b in params["b_slices"]])
    lo, hi = ranges["b"]
    if not all(lo <= float(b) <= hi for b in bs):
        raise ConfigError(f"config key 'cubic.bands.b_slices' {params['b_slices']} leaves the training b range "
                          f"[{lo}, {hi}]; choose slices inside it.")
    z = latent_activations(net, dictionary, grid_inputs(xs, as_, bs), device, layer=sae_layer(sae))
    values = z.reshape(len(bs), len(as_), len(xs), dictionary.m).numpy()
    slices_df, latents_df = detect_bands(values, xs.numpy(), as_.numpy(), bs.numpy(), params)
    slices_df.insert(0, "seed", seed)
    latents_df.insert(0, "seed", seed)
    band = latents_df[latents_df.is_band]
    log.info("band latents (seed %d): %s", seed,
             ", ".join(f"{int(r.latent)} (c≈{r.c_grad_median:.3f})" for r in band.itertuples()) or "none")
    save_parquet(slices_df, slices)
    save_parquet(latents_df, latents)
    keep = list(range(dictionary.m))
    if params.get("grid_latents", "all") == "bands":
        keep = [int(v) for v in band.latent]
    save_torch({"seed": seed, "x": xs, "a": as_, "b": bs, "latents": torch.from_numpy(values[..., keep]).contiguous()
                if len(keep) < dictionary.m else torch.from_numpy(values), "latent_ids": keep}, grid)


# ------------------------------------------------------------------------------------ slope search
def _bucket_index(u: torch.Tensor, lo: float, hi: float, n_buckets: int) -> torch.Tensor:
    return ((u - lo) / max(hi - lo, 1e-12) * n_buckets).long().clamp_(0, n_buckets - 1)


def slope_r2(xa_tr: torch.Tensor, z_tr: torch.Tensor, xa_ho: torch.Tensor, z_ho: torch.Tensor,
             cs, n_buckets: int) -> torch.Tensor:
    """Held-out R² [len(cs), m] of the bucket-mean predictor of z from u = x + c·a, for each c.

    ``xa_*`` are [n, 2] (x, a); ``z_*`` [n, m]. Bins are equal-width over the training u range; an
    empty bin predicts the training mean. A latent constant on the held-out set scores NaN.
    """
    z_tr, z_ho = z_tr.double(), z_ho.double()
    m = z_tr.shape[1]
    mean_tr = z_tr.mean(0)
    sst = (z_ho - z_ho.mean(0)).pow(2).sum(0)
    out = torch.empty(len(cs), m, dtype=torch.float64)
    # The bucket sums of z_tr over its nonzero entries alone, taken in row order: each sum adds the same
    # terms in the same order as over every entry (a zero added to a sum that starts at +0 changes nothing),
    # so the same numbers, for a sixteenth of the additions with TopK codes (4 of 64 latents nonzero).
    rows, cols = z_tr.nonzero(as_tuple=True)
    vals = z_tr[rows, cols]
    x_tr, a_tr, x_ho, a_ho = (t.double() for t in (xa_tr[:, 0], xa_tr[:, 1], xa_ho[:, 0], xa_ho[:, 1]))
    resid = torch.empty_like(z_ho)
    for i, c in enumerate(cs):
        u_tr = x_tr + float(c) * a_tr
        u_ho = x_ho + float(c) * a_ho
        lo, hi = float(u_tr.min()), float(u_tr.max())
        idx_tr = _bucket_index(u_tr, lo, hi, n_buckets)
        idx_ho = _bucket_index(u_ho, lo, hi, n_buckets)
        sums = (torch.zeros(n_buckets * m, dtype=torch.float64)
                .index_add_(0, idx_tr.index_select(0, rows) * m + cols, vals).view(n_buckets, m))
        cnt = torch.bincount(idx_tr, minlength=n_buckets).double()
        means = torch.where(cnt[:, None] > 0, sums / cnt.clamp_min(1)[:, None], mean_tr[None, :])
        # (z_ho − means[idx_ho])² in one buffer for every c (the same operations, none of them allocating)
        torch.sub(z_ho, torch.index_select(means, 0, idx_ho, out=resid), out=resid)
        out[i] = 1 - resid.pow_(2).sum(0) / sst
    out[:, sst <= 0] = float("nan")
    return out


def c_grid(c_range, step: float) -> np.ndarray:
    lo, hi = (float(v) for v in c_range)
    if not lo < hi or step <= 0:
        raise ConfigError(f"config key 'cubic.slopes.c_range' {c_range} / c_step {step}: need low < high and a positive step.")
    n = int(round((hi - lo) / step))
    return np.round(lo + step * np.arange(n + 1), 12)


def slope_search(xa_tr, z_tr, xa_ho, z_ho, params: dict):
    """Coarse scan over ``c_range`` then a ``refine``-times finer scan around each latent's best c.

    Returns (scan table [stage, latent, c, r2], best table [latent, c_best, r2_best]).
    """
    coarse = c_grid(params["c_range"], params["c_step"])
    r2 = slope_r2(xa_tr, z_tr, xa_ho, z_ho, coarse, params["buckets"]).numpy()
    m = z_tr.shape[1]
    rows = [{"stage": "coarse", "latent": j, "c": float(c), "r2": float(r2[i, j])}
            for i, c in enumerate(coarse) for j in range(m)]
    best = []
    fine_step = params["c_step"] / params["refine"]
    for j in range(m):
        col = r2[:, j]
        if not np.isfinite(col).any():
            best.append({"latent": j, "c_best": float("nan"), "r2_best": float("nan")})
            continue
        c0 = coarse[int(np.nanargmax(col))]
        fine = np.round(c0 + fine_step * np.arange(-params["refine"], params["refine"] + 1), 12)
        fine = fine[(fine >= coarse[0] - 1e-12) & (fine <= coarse[-1] + 1e-12)]
        r2f = slope_r2(xa_tr, z_tr[:, j : j + 1], xa_ho, z_ho[:, j : j + 1], fine, params["buckets"])[:, 0].numpy()
        rows += [{"stage": "fine", "latent": j, "c": float(c), "r2": float(v)} for c, v in zip(fine, r2f)]
        k = int(np.nanargmax(r2f))
        best.append({"latent": j, "c_best": float(fine[k]), "r2_best": float(r2f[k])})
    return pd.DataFrame(rows), pd.DataFrame(best)


def slopes_step(*, acts: str, sae: str, bands: str, scan: str, best: str, params: dict) -> None:
    """Rule ``cubic_slope_search``: slope search over c for every live latent of ``sae`` on ``acts``
    (the R² ``scan`` and each latent's ``best`` c), band latents flagged from ``bands``."""
    from polyinterp.cubic.sae.activations import load_activations
    from polyinterp.cubic.sae.autoencoder import load_sae
    from polyinterp.device import resolve_device
    from polyinterp.io import load_parquet, save_parquet

    seed = int(params["seed"])
    device = resolve_device(params["device"])
    blob = load_activations(acts)
    dictionary = load_sae(sae, device)
    band_table = load_parquet(bands)
    with torch.no_grad():
        z_tr = torch.cat([dictionary.encode(c.to(device)).cpu() for c in blob["train"]["acts"].split(65536)])
        z_ho = torch.cat([dictionary.encode(c.to(device)).cpu() for c in blob["heldout"]["acts"].split(65536)])
    alive = torch.nonzero((z_tr > 0).any(0)).flatten()
    xa_tr, xa_ho = blob["train"]["inputs"][:, :2], blob["heldout"]["inputs"][:, :2]
    scan_df, best_df = slope_search(xa_tr, z_tr[:, alive], xa_ho, z_ho[:, alive], params)
    ids = alive.numpy()
    scan_df["latent"] = ids[scan_df["latent"].to_numpy()]
    best_df["latent"] = ids[best_df["latent"].to_numpy()]
    at = slope_r2(xa_tr, z_tr[:, alive], xa_ho, z_ho[:, alive], [CARDANO_C, 0.0], params["buckets"]).numpy()
    best_df["r2_at_cardano"] = at[0]
    best_df["r2_at_zero"] = at[1]
    best_df = best_df.merge(band_table[["latent", "is_band", "c_grad_median"]], on="latent", how="left")
    best_df["is_band"] = best_df["is_band"].fillna(False).astype(bool)
    scan_df = scan_df.merge(best_df[["latent", "is_band"]], on="latent", how="left")
    scan_df.insert(0, "seed", seed)
    best_df.insert(0, "seed", seed)
    band = best_df[best_df.is_band]
    if len(band):
        log.info("seed %d: median best c over %d band latents = %.4f (Cardano 1/3 = %.4f)",
                 seed, len(band), float(band.c_best.median()), CARDANO_C)
    else:
        log.warning("seed %d: no band latents detected; the median slope is undefined (NaN)", seed)
    save_parquet(scan_df, scan)
    save_parquet(best_df, best)


def summarize_slopes(best_tables: list[pd.DataFrame]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-seed median c over band latents, and its spread across seeds, beside Cardano's 1/3."""
    per_seed = []
    for t in best_tables:
        band = t[t.is_band]
        per_seed.append({
            "seed": int(t.seed.iloc[0]) if len(t) else -1, "n_band_latents": int(len(band)),
            "band_latents": ",".join(str(int(v)) for v in sorted(band.latent)),
            "median_c": float(band.c_best.median()) if len(band) else float("nan"),
            "mean_c": float(band.c_best.mean()) if len(band) else float("nan"),
            "median_r2": float(band.r2_best.median()) if len(band) else float("nan"),
            "cardano_c": CARDANO_C,
        })
    per_seed = pd.DataFrame(per_seed)
    med = per_seed.median_c.dropna()
    spread = pd.DataFrame([{
        "n_seeds": int(len(per_seed)), "n_seeds_with_bands": int(len(med)),
        "median_of_medians": float(med.median()) if len(med) else float("nan"),
        "mean_of_medians": float(med.mean()) if len(med) else float("nan"),
        "std_of_medians": float(med.std(ddof=1)) if len(med) > 1 else float("nan"),
        "min_median": float(med.min()) if len(med) else float("nan"),
        "max_median": float(med.max()) if len(med) else float("nan"),
        "cardano_c": CARDANO_C,
    }])
    return per_seed, spread
