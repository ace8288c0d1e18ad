"""The cubic study's claims (the blog): the regressor's fit, the SAE's R² and L0, band latents and the
median band slope c against Cardano's 1/3, from ``results/cubic/summary.parquet``."""

from __future__ import annotations

import pandas as pd

from polyinterp.scorecard.claim import Claim, Within


def cubic_claims(summary: pd.DataFrame) -> list[Claim]:
    s = summary.sort_values("seed")
    seeds = [int(x) for x in s.seed]
    return [
        Claim("cubic", "regressor rel-MSE ≤ 1e-4", "≤ 1e-4", "—", "validation MSE / Var(y)", "final model",
              s.rel_mse_val.tolist(), Within(hi=1e-4), seeds=seeds),
        Claim("cubic", "SAE R² ≥ 0.995", "≥ 0.995", "—", "held-out R² of the TopK SAE (64 latents, k = 4)",
              "held-out activations", s.sae_r2_heldout.tolist(), Within(lo=0.995), seeds=seeds),
        Claim("cubic", "SAE L0 = 4", "4", "± 0.05", "mean number of active latents (held-out)", "held-out activations",
              s.sae_l0.tolist(), Within(3.95, 4.05), seeds=seeds),
        Claim("cubic", "band latents exist", "≥ 1", "—", "number of latents passing the band criteria",
              "band detection", s.n_band_latents.astype(float).tolist(), Within(lo=1), seeds=seeds),
        Claim("cubic", "median band slope c ≈ 0.3", "0.3 (Cardano: 1/3)", "± 0.1",
              "per-seed median best c over band latents (mean, spread across seeds)", "slope search",
              s.median_c.tolist(), Within(0.2, 0.4), seeds=seeds),
    ]
