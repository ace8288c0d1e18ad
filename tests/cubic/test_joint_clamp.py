"""Joint clamping: one latent equals today's single clamp; several latents add up by the closed form;
interventions resolve from the config; the step's tables agree with the single clamp step."""

import numpy as np
import pandas as pd
import pytest
import torch

from polyinterp.cubic.interventions.clamping import clamp_step, clamped_outputs
from polyinterp.cubic.interventions.joint_clamp import joint_clamp_step, joint_clamped_output, landmark_top, resolve_interventions
from polyinterp.cubic.regressor.model import build_model
from polyinterp.cubic.sae.autoencoder import TopKSAE
from polyinterp.cubic.regressor.task import generator, sample_inputs
from polyinterp.errors import ConfigError
from polyinterp.figures.cubic.joint_clamp import joint_clamp_figure
from polyinterp.io import save_parquet, save_torch

RANGES = {"x": [-2.0, 2.0], "a": [-2.0, 2.0], "b": [-2.0, 2.0]}


def setup():
    model = build_model((3, 16, 15, 1), seed=0).eval()
    sae = TopKSAE(15, 12, 3)
    sae.init_weights(torch.Generator().manual_seed(0))
    inp = sample_inputs(400, RANGES, generator(0, 9))
    return model, sae, inp


def busiest(model, sae, inp, n):
    with torch.no_grad():
        z = sae.encode(model.hidden(inp))
    return [int(j) for j in (z > 0).sum(0).argsort(descending=True)[:n]]


@pytest.mark.parametrize("factor", [0.0, 0.5, 1.5, 2.0])
def test_joint_intervention_of_one_latent_is_the_single_clamp(factor):
    model, sae, inp = setup()
    j = busiest(model, sae, inp, 1)[0]
    single = clamped_outputs(model, sae, inp, j, [factor])[float(factor)]
    torch.testing.assert_close(joint_clamped_output(model, sae, inp, {j: factor}), single)


def test_joint_effect_is_the_sum_of_the_closed_form_effects():
    """head ∘ decode is affine in z: y(joint) − y(recon) = Σ_j (s_j − 1)·z_j·(w_out · W_dec[:, j])."""
    model, sae, inp = setup()
    j, k, m = busiest(model, sae, inp, 3)
    factors = {j: 1.5, k: 1.5, m: 0.0}
    with torch.no_grad():
        z = sae.encode(model.hidden(inp))
        recon = model.head(sae(model.hidden(inp)))
        expected = recon + sum((s - 1) * z[:, i] * (model.out.weight[0] @ sae.W_dec[:, i]) for i, s in factors.items())
    torch.testing.assert_close(joint_clamped_output(model, sae, inp, {}), recon)
    torch.testing.assert_close(joint_clamped_output(model, sae, inp, factors), expected, atol=1e-5, rtol=1e-4)


BEST = pd.DataFrame({"latent": [0, 1, 2, 3, 4], "is_band": [False, True, True, False, True],
                     "r2_best": [0.99, 0.7, 0.9, None, 0.5]})
RANKING = pd.DataFrame({"kind": ["root", "root", "inflection", "inflection", "all", "all"],
                        "latent": [3, 0, 4, 3, 1, 0], "mean_corr": [0.4, 0.2, 0.7, np.nan, 0.3, 0.1]})
PARAMS = {"max_band_latents": 2, "landmark_kind": "any"}


def spec(name, *clamps, each=False):
    return {"name": name, "each": each, "clamps": [{"latents": lat, "factor": s} for lat, s in clamps]}


def test_resolve_interventions():
    specs = [spec("bands", ("bands", 1.5)), spec("band", ("bands", 1.5), each=True),
             spec("landmark_zero", ("landmark_top", 0.0)), spec("blog", ([2, 1], 1.5), ([0], 0.0))]
    out = resolve_interventions(specs, BEST, RANKING, PARAMS, 12)
    assert [iv["name"] for iv in out] == ["bands", "band_2", "band_1", "landmark_zero", "blog"]
    assert out[0]["factors"] == {2: 1.5, 1: 1.5} and out[0]["selection"] == {2: "band", 1: "band"}
    assert out[1]["factors"] == {2: 1.5} and out[2]["factors"] == {1: 1.5}
    assert out[3]["factors"] == {4: 0.0} and out[3]["selection"] == {4: "landmark_any"}
    assert out[4]["factors"] == {2: 1.5, 1: 1.5, 0: 0.0} and set(out[4]["selection"].values()) == {"config"}
    # no band: the best live latents instead, marked as such
    fb = resolve_interventions(specs[:1], BEST.assign(is_band=False), RANKING, PARAMS, 12)
    assert fb[0]["factors"] == {0: 1.5, 2: 1.5} and set(fb[0]["selection"].values()) == {"fallback"}
    # a latent named twice gets the last factor
    assert resolve_interventions([spec("x", ([3], 2.0), ([3], 0.5))], BEST, RANKING, PARAMS, 12)[0]["factors"] == {3: 0.5}


def test_landmark_top():
    assert landmark_top(RANKING, "any") == 4 and landmark_top(RANKING, "root") == 3
    assert landmark_top(RANKING, "all") == 1 and landmark_top(RANKING, "critical") is None
    # nothing to select: the intervention is left out
    assert resolve_interventions([spec("z", ("landmark_top", 0.0))], BEST, RANKING,
                                 {**PARAMS, "landmark_kind": "critical"}, 12) == []


@pytest.mark.parametrize("specs, match", [
    ([spec("x", ([12], 0.0))], "latent 12"),
    ([spec("x", ("bands", 1.5), ([0], 0.0), each=True)], "each: true"),
    ([spec("x", ([1], 0.0)), spec("x", ([2], 0.0))], "twice"),
    ([spec("band_2", ([2], 1.5)), spec("band", ("bands", 1.5), each=True)], "twice"),
    ([spec("x", ("all", 0.0))], "landmark_top"),
])
def test_bad_interventions_name_the_key(specs, match):
    with pytest.raises(ConfigError, match=r"cubic\.joint_clamp\.interventions") as err:
        resolve_interventions(specs, BEST, RANKING, PARAMS, 12)
    assert match in str(err.value)


def write_inputs(tmp_path):
    model, sae, inp = setup()
    save_torch({"state": model.state_dict(), "widths": model.widths, "ranges": RANGES}, tmp_path / "model.pt")
    save_torch(sae.state(), tmp_path / "sae.pt")
    j, k = busiest(model, sae, inp, 2)
    best = pd.DataFrame({"latent": [j, k], "is_band": [True, True], "r2_best": [0.9, 0.8], "c_best": [0.3, 0.4]})
    save_parquet(best, tmp_path / "slopes.parquet")
    save_parquet(RANKING.assign(latent=[k, j, k, j, j, k]), tmp_path / "ranking.parquet")
    return j, k


JOINT = {"seed": 3, "device": "cpu", "max_band_latents": 2, "landmark_kind": "inflection",
         "polys": [[0.0, -1.0], [1.0, -2.0]], "x_points": 41,
         "shift": {"delta_range": [-1.0, 1.0], "delta_step": 0.05},
         "verdict": {"r2_min": 0.9, "margin": 0.05, "min_effect": 0.01}}


def test_joint_step_agrees_with_the_single_clamp_step(tmp_path):
    j, k = write_inputs(tmp_path)
    files = {n: str(tmp_path / f"{n}.parquet") for n in ("sets", "curves", "fits")}
    params = {**JOINT, "interventions": [spec("bands", ("bands", 1.5)), spec("band", ("bands", 1.5), each=True),
                                         spec("landmark_zero", ("landmark_top", 0.0))]}
    joint_clamp_step(model=str(tmp_path / "model.pt"), sae=str(tmp_path / "sae.pt"),
                     slopes=str(tmp_path / "slopes.parquet"), ranking=str(tmp_path / "ranking.parquet"),
                     params=params, **files)
    clamp_step(model=str(tmp_path / "model.pt"), sae=str(tmp_path / "sae.pt"), slopes=str(tmp_path / "slopes.parquet"),
               curves=str(tmp_path / "single.parquet"), summary=str(tmp_path / "single_summary.parquet"),
               params={"seed": 3, "device": "cpu", "latents": "bands", "max_latents": 2, "factors": [1.5],
                       "polys": JOINT["polys"], "x_points": 41})
    sets, curves, fits = (pd.read_parquet(p) for p in files.values())
    single = pd.read_parquet(tmp_path / "single.parquet")
    assert (sets.seed == 3).all() and (curves.seed == 3).all() and (fits.seed == 3).all()
    assert list(dict.fromkeys(sets.intervention)) == ["bands", f"band_{j}", f"band_{k}", "landmark_zero"]
    assert sets[sets.intervention == "landmark_zero"].latent.tolist() == [k]   # inflection: highest mean_corr
    assert len(fits) == 4 * 2 and len(curves) == 4 * 2 * 41
    for lat in (j, k):   # each band latent alone = today's single clamp (float64 here, float32 there)
        mine = curves[curves.intervention == f"band_{lat}"].sort_values(["curve", "x"])
        theirs = single[(single.latent == lat) & (single.factor == 1.5)].sort_values(["curve", "x"])
        np.testing.assert_allclose(mine.y_clamped, theirs.y_clamped, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(mine.y_sae, theirs.y_sae, rtol=1e-4, atol=1e-5)
    # the stored fits are the fits of the stored curves
    for row in fits.itertuples():
        c = curves[(curves.intervention == row.intervention) & (curves.curve == row.curve)]
        np.testing.assert_allclose(c.y_stretch, row.stretch_s * c.y_sae + row.stretch_c, atol=1e-9)
        assert row.rms_effect == pytest.approx(float(np.sqrt(np.mean((c.y_clamped - c.y_sae) ** 2))))
        assert row.a_over_3 == pytest.approx(row.a / 3)
        assert row.verdict in {"no_effect", "neither", "indistinguishable", "stretch", "shift"}
    # δ = 0 reproduces ŷ: the shift fit is never worse than "nothing changed"
    assert (fits.effect_r2_shift.dropna() >= -1e-9).all()
    # the figure draws every intervention and polynomial and states the table's verdicts
    drawn = joint_clamp_figure(curves=files["curves"], fits=files["fits"],
                               out=[str(tmp_path / "fig.pdf"), str(tmp_path / "fig.png")])
    assert drawn["interventions"] == list(dict.fromkeys(fits.intervention)) and drawn["curves"] == [0, 1]
    assert drawn["verdicts"] == fits.verdict.value_counts().to_dict()
    changed = fits[fits.verdict != "no_effect"].verdict
    if len(changed):
        assert drawn["overall"].startswith(f"verdict: {changed.value_counts().idxmax()} in ")
    assert (tmp_path / "fig.png").stat().st_size > 5000
