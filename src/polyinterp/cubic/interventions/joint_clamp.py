"""Joint clamping: a named set of (latent, factor) pairs applied to the SAE code at once.

The blog scales two band latents by 1.5 while zeroing a third: z'_j = s_j·z_j for every j of the set,
then the regressor's head maps the decoded layer to y (as in :mod:`polyinterp.cubic.interventions.clamping`, which
clamps one latent at a time). The step ``cubic_joint_clamping`` resolves the configured interventions
(all band latents, each band latent alone, the strongest landmark latent, explicit indices), and asks
of every clamped curve whether it is a vertical stretch or a horizontal shift of the unclamped one
(:mod:`polyinterp.cubic.interventions.stretch_shift`).
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import torch

from polyinterp.cubic.interventions.clamping import choose_latents
from polyinterp.errors import ConfigError

log = logging.getLogger(__name__)


@torch.no_grad()
def joint_clamped_output(model, sae, inputs: torch.Tensor, factors: dict[int, float]) -> torch.Tensor:
    """Regressor output ``[n]`` with every latent j of ``factors`` scaled by ``factors[j]`` at once
    (the others untouched): head(decode(z ⊙ scale)), scale_j = factors[j], 1 elsewhere. With one
    latent this is :func:`clamped_outputs` at that factor; with none, the plain SAE reconstruction."""
    z = sae.encode(model.hidden(inputs))
    scale = torch.ones(z.shape[1], dtype=z.dtype, device=z.device)
    for j, s in factors.items():
        scale[int(j)] = float(s)
    return model.head(sae.decode(z * scale))


def landmark_top(ranking: pd.DataFrame, kind: str) -> int | None:
    """The latent with the highest mean landmark correlation of ``kind`` ("any": over every kind),
    from ``landmark_ranking.parquet``; None when every correlation is undefined."""
    rows = ranking if kind == "any" else ranking[ranking.kind == kind]
    rows = rows.dropna(subset=["mean_corr"])
    if rows.empty:
        return None
    return int(rows.sort_values(["mean_corr", "latent"], ascending=[False, True]).latent.iloc[0])


def _select(selector, best: pd.DataFrame, ranking: pd.DataFrame, params: dict) -> list[tuple[int, str]]:
    """(latent, selection) pairs of one clamp term's ``latents`` selector."""
    key = "cubic.joint_clamp.interventions"
    if isinstance(selector, list):
        return [(int(j), "config") for j in selector]
    if selector == "bands":
        return choose_latents(best, "bands", int(params["max_band_latents"]))
    if selector == "landmark_top":
        j = landmark_top(ranking, params["landmark_kind"])
        return [] if j is None else [(j, f"landmark_{params['landmark_kind']}")]
    raise ConfigError(f"config key '{key}' has a clamp with latents {selector!r}; use \"bands\", \"landmark_top\" "
                      "or a list of latent indices.")


def resolve_interventions(specs: list[dict], best: pd.DataFrame, ranking: pd.DataFrame, params: dict,
                          n_latents: int) -> list[dict]:
    """The configured interventions as concrete latent sets: a list of ``{"name", "factors": {latent:
    factor}, "selection": {latent: how it was chosen}}`` in config order.

    Each spec is ``{"name", "each", "clamps": [{"latents": selector, "factor"}]}``; a selector is
    "bands" (the band latents with the best slope-search R², at most ``max_band_latents``; the best
    live latents if none is a band, see :func:`choose_latents`), "landmark_top" (:func:`landmark_top`
    of ``landmark_kind``) or a list of latent indices. Terms apply together; a latent named by several
    terms gets the factor of the last. ``each: true`` (one term only) makes one intervention per
    selected latent, named ``<name>_<latent>``. An intervention that selects nothing is left out
    (logged). Raises ConfigError for a latent outside 0..n_latents−1, ``each`` with several terms, or
    a name used twice."""
    key = "cubic.joint_clamp.interventions"
    out: list[dict] = []
    for spec in specs:
        terms = []
        for term in spec["clamps"]:
            chosen = _select(term["latents"], best, ranking, params)
            for j, _ in chosen:
                if not 0 <= j < n_latents:
                    raise ConfigError(f"config key '{key}' ({spec['name']!r}) names latent {j}; the SAE has latents "
                                      f"0..{n_latents - 1}.")
            terms.append((chosen, float(term["factor"])))
        if spec["each"]:
            if len(terms) != 1:
                raise ConfigError(f"config key '{key}' ({spec['name']!r}) has each: true with {len(terms)} clamps; "
                                  "each: true takes exactly one clamp (or set each: false).")
            (chosen, s), = terms
            groups = [(f"{spec['name']}_{j}", [([(j, sel)], s)]) for j, sel in chosen]
        else:
            groups = [(spec["name"], terms)]
        for name, group in groups:
            factors, selection = {}, {}
            for chosen, s in group:
                for j, sel in chosen:
                    if j in factors and factors[j] != s:
                        log.warning("intervention %s: latent %d is named twice; its factor is %g (the last)", name, j, s)
                    factors[j], selection[j] = s, sel
            if not factors:
                log.warning("intervention %s selects no latent (no band or landmark latent found); left out", name)
                continue
            out.append({"name": name, "factors": factors, "selection": selection})
    names = [iv["name"] for iv in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"config key '{key}' gives the intervention name(s) {dup} twice; give each a unique name.")
    return out


def _empty(columns: dict) -> pd.DataFrame:
    return pd.DataFrame({k: pd.Series(dtype=v) for k, v in columns.items()})


SETS_COLUMNS = {"seed": "int64", "intervention": "object", "latent": "int64", "factor": "float64", "selection": "object"}
CURVE_COLUMNS = {"seed": "int64", "intervention": "object", "curve": "int64", "a": "float64", "b": "float64",
                 "x": "float64", "y_true": "float64", "y_model": "float64", "y_sae": "float64",
                 "y_clamped": "float64", "y_stretch": "float64", "y_shift": "float64"}
FIT_COLUMNS = {"seed": "int64", "intervention": "object", "n_latents": "int64", "latents": "object",
               "factors": "object", "curve": "int64", "a": "float64", "b": "float64", "rms_effect": "float64",
               "effect_rel": "float64", "stretch_s": "float64", "stretch_c": "float64", "r2_stretch": "float64",
               "effect_r2_stretch": "float64", "shift_delta": "float64", "shift_c": "float64", "r2_shift": "float64",
               "effect_r2_shift": "float64", "shift_at_bound": "bool", "a_over_3": "float64",
               "delta_over_a3": "float64", "verdict": "object"}


def joint_clamp_step(*, model: str, sae: str, slopes: str, ranking: str, sets: str, curves: str, fits: str,
                     params: dict) -> None:
    """Rule ``cubic_joint_clamping``: apply each configured intervention (a named set of (latent,
    factor), resolved by :func:`resolve_interventions` from ``slopes`` and the landmark ``ranking``)
    to ``sae`` inside ``model``; for each polynomial of ``polys`` record the curves over x and fit the
    clamped curve by a stretch s·ŷ(x) + c and a shift ŷ(x − δ) + c of the SAE reconstruction ŷ
    (:mod:`polyinterp.cubic.interventions.stretch_shift`; ŷ(x − δ) by running the model at x − δ, which leaves the
    training x range by up to |δ|). Writes the resolved ``sets``, the ``curves`` and one ``fits`` row
    per (intervention, polynomial) with both fits, δ beside a/3 and the verdict. Runs in float64."""
    from polyinterp.cubic.regressor.model import load_model
    from polyinterp.cubic.sae.autoencoder import load_sae
    from polyinterp.cubic.interventions.stretch_shift import delta_grid, fit_shift, fit_stretch, verdict
    from polyinterp.cubic.regressor.task import cubic
    from polyinterp.device import resolve_device
    from polyinterp.io import load_parquet, load_torch, save_parquet

    seed = int(params["seed"])
    if params["landmark_kind"] not in ("any", "root", "critical", "inflection", "all"):
        raise ConfigError(f"config key 'cubic.joint_clamp.landmark_kind' is {params['landmark_kind']!r}; use any, "
                          "root, critical, inflection or all.")
    device = resolve_device(params["device"])
    net = load_model(model, device).double()
    dictionary = load_sae(sae, device).double()
    interventions = resolve_interventions(params["interventions"], load_parquet(slopes), load_parquet(ranking),
                                          params, dictionary.m)
    ranges = load_torch(model)["ranges"]
    xs = np.linspace(*ranges["x"], int(params["x_points"]))
    shift, rule = params["shift"], params["verdict"]
    delta_grid(shift["delta_range"], shift["delta_step"])  # a bad range fails here, before any work

    def inputs(x: np.ndarray, a: float, b: float) -> torch.Tensor:
        x = torch.as_tensor(np.asarray(x, np.float64))
        return torch.stack([x, torch.full_like(x, a), torch.full_like(x, b)], 1).to(device)

    set_rows = [{"seed": seed, "intervention": iv["name"], "latent": j, "factor": s, "selection": iv["selection"][j]}
                for iv in interventions for j, s in iv["factors"].items()]
    curve_rows, fit_rows = [], []
    for ci, (a, b) in enumerate(params["polys"]):
        a, b = float(a), float(b)
        inp = inputs(xs, a, b)
        with torch.no_grad():
            y_model = net(inp).cpu().numpy()
        y_sae = joint_clamped_output(net, dictionary, inp, {}).cpu().numpy()
        y_true = cubic(torch.from_numpy(xs), torch.tensor(a, dtype=torch.float64),
                       torch.tensor(b, dtype=torch.float64)).numpy()

        def y_hat(x, a=a, b=b):
            return joint_clamped_output(net, dictionary, inputs(x, a, b), {}).cpu().numpy()

        for iv in interventions:
            y = joint_clamped_output(net, dictionary, inp, iv["factors"]).cpu().numpy()
            st = fit_stretch(y_sae, y)
            sh = fit_shift(xs, y, y_hat, shift["delta_range"], shift["delta_step"])
            rms = float(np.sqrt(np.mean((y - y_sae) ** 2)))
            sd = float(y_sae.std())
            rel = rms / sd if sd > 0 else float("nan")
            a3 = a / 3.0
            curve_rows.append(pd.DataFrame({
                "seed": seed, "intervention": iv["name"], "curve": ci, "a": a, "b": b, "x": xs, "y_true": y_true,
                "y_model": y_model, "y_sae": y_sae, "y_clamped": y, "y_stretch": st["pred"], "y_shift": sh["pred"],
            }))
            fit_rows.append({
                "seed": seed, "intervention": iv["name"], "n_latents": len(iv["factors"]),
                "latents": ",".join(str(j) for j in iv["factors"]),
                "factors": ",".join(f"{s:g}" for s in iv["factors"].values()),
                "curve": ci, "a": a, "b": b, "rms_effect": rms, "effect_rel": rel,
                "stretch_s": st["s"], "stretch_c": st["c"], "r2_stretch": st["r2"], "effect_r2_stretch": st["effect_r2"],
                "shift_delta": sh["delta"], "shift_c": sh["c"], "r2_shift": sh["r2"], "effect_r2_shift": sh["effect_r2"],
                "shift_at_bound": sh["at_bound"], "a_over_3": a3,
                "delta_over_a3": sh["delta"] / a3 if a3 != 0 else float("nan"),
                "verdict": verdict(rel, st["effect_r2"], sh["effect_r2"], r2_min=float(rule["r2_min"]),
                                   margin=float(rule["margin"]), min_effect=float(rule["min_effect"])),
            })
    sets_df = pd.DataFrame(set_rows) if set_rows else _empty(SETS_COLUMNS)
    curves_df = pd.concat(curve_rows, ignore_index=True) if curve_rows else _empty(CURVE_COLUMNS)
    fits_df = pd.DataFrame(fit_rows) if fit_rows else _empty(FIT_COLUMNS)
    for row in fits_df.itertuples():
        log.info("seed %d, %s on (a=%g, b=%g): stretch s=%.3f R²eff=%.3f | shift δ=%.3f (a/3=%.3f) R²eff=%.3f → %s",
                 seed, row.intervention, row.a, row.b, row.stretch_s, row.effect_r2_stretch, row.shift_delta,
                 row.a_over_3, row.effect_r2_shift, row.verdict)
    save_parquet(sets_df, sets)
    save_parquet(curves_df, curves)
    save_parquet(fits_df, fits)
