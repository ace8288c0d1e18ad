"""Clamping: scale chosen SAE latents, decode, substitute the 15-wide activation, finish the forward pass.

For each chosen latent j and factor s, the last hidden layer h(x, a, b) is replaced by
W_dec · z' + b_dec where z' is the SAE code of h with z'_j = s·z_j (s = 0 zeroes the latent), and the
regressor's last Linear maps it to y. At s = 1 this is the plain SAE reconstruction, so its gap to the
regressor's own output is the SAE's reconstruction error, shown beside every clamped curve.

Several latents clamped together: :mod:`polyinterp.cubic.interventions.joint_clamp`.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import torch

from polyinterp.errors import ConfigError

log = logging.getLogger(__name__)


def choose_latents(best: pd.DataFrame, spec, max_latents: int) -> list[tuple[int, str]]:
    """``spec`` "bands": the band latents with the best slope-search R² (up to ``max_latents``); if no
    latent is a band, the live latents with the best slope-search R² (selection "fallback").
    A list of ints: exactly those latents (selection "config")."""
    if isinstance(spec, list):
        return [(int(j), "config") for j in spec]
    if spec != "bands":
        raise ConfigError(f"config key 'cubic.clamp.latents' is {spec!r}; use \"bands\" or a list of latent indices.")
    ranked = best.dropna(subset=["r2_best"]).sort_values("r2_best", ascending=False)
    band = ranked[ranked.is_band]
    if len(band):
        return [(int(j), "band") for j in band.latent[:max_latents]]
    log.warning("no band latents; clamping the %d live latents with the best slope-search R² instead", max_latents)
    return [(int(j), "fallback") for j in ranked.latent[:max_latents]]


@torch.no_grad()
def clamped_outputs(model, sae, inputs: torch.Tensor, latent: int, factors) -> dict[float, torch.Tensor]:
    """Regressor outputs with latent ``latent`` of the SAE code scaled by each factor: {factor: [n]}."""
    z = sae.encode(model.hidden(inputs))
    out = {}
    for s in factors:
        zc = z.clone()
        zc[:, latent] *= float(s)
        out[float(s)] = model.head(sae.decode(zc))
    return out


def clamp_step(*, model: str, sae: str, slopes: str, curves: str, summary: str, params: dict) -> None:
    """Rule ``cubic_clamping``: scale each chosen latent of ``sae`` (from ``slopes``: the band
    latents, or configured indices) and record the regressor ``model``'s output ``curves`` over x
    for each configured polynomial, with one ``summary`` row per (latent, curve, factor)."""
    from polyinterp.cubic.regressor.model import load_model
    from polyinterp.cubic.sae.autoencoder import load_sae
    from polyinterp.cubic.regressor.task import cubic
    from polyinterp.device import resolve_device
    from polyinterp.io import load_parquet, load_torch, save_parquet

    seed = int(params["seed"])
    device = resolve_device(params["device"])
    net, dictionary = load_model(model, device), load_sae(sae, device)
    best = load_parquet(slopes)
    chosen = choose_latents(best, params["latents"], params["max_latents"])
    for j, _ in chosen:
        if not 0 <= j < dictionary.m:
            raise ConfigError(f"config key 'cubic.clamp.latents' names latent {j}; the SAE has latents 0..{dictionary.m - 1}.")
    factors = sorted({float(f) for f in params["factors"]} | {1.0})
    ranges = load_torch(model)["ranges"]
    xs = torch.linspace(*ranges["x"], params["x_points"])
    rows, summary_rows = [], []
    for ci, (a, b) in enumerate(params["polys"]):
        inp = torch.stack([xs, torch.full_like(xs, a), torch.full_like(xs, b)], 1).to(device)
        with torch.no_grad():
            y_model = net(inp).cpu().double().numpy()
            z = dictionary.encode(net.hidden(inp)).cpu()
        y_true = cubic(xs.double(), torch.tensor(a).double(), torch.tensor(b).double()).numpy()
        for j, sel in chosen:
            outs = {s: v.cpu().double().numpy() for s, v in clamped_outputs(net, dictionary, inp, j, factors).items()}
            y_sae = outs[1.0]
            active = float((z[:, j] > 0).double().mean())
            for s, y in outs.items():
                rows.append(pd.DataFrame({
                    "latent": j, "selection": sel, "factor": s, "curve": ci, "a": float(a), "b": float(b),
                    "x": xs.double().numpy(), "y_true": y_true, "y_model": y_model, "y_sae": y_sae, "y_clamped": y,
                    "latent_act": z[:, j].double().numpy(),
                }))
                summary_rows.append({
                    "latent": j, "selection": sel, "factor": s, "curve": ci, "a": float(a), "b": float(b),
                    "active_frac": active,
                    "rms_change": float(np.sqrt(np.mean((y - y_sae) ** 2))),
                    "rms_err_true": float(np.sqrt(np.mean((y - y_true) ** 2))),
                    "recon_rms": float(np.sqrt(np.mean((y_sae - y_model) ** 2))),
                    "model_rms": float(np.sqrt(np.mean((y_model - y_true) ** 2))),
                })
    curves_df = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
    summary_df = pd.DataFrame(summary_rows)
    curves_df.insert(0, "seed", seed)
    summary_df.insert(0, "seed", seed)
    log.info("clamped latents %s at factors %s on %d polynomials", [j for j, _ in chosen], factors, len(params["polys"]))
    save_parquet(curves_df, curves)
    save_parquet(summary_df, summary)
