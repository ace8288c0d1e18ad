import pandas as pd
import pytest
import torch

from polyinterp.cubic.interventions.clamping import choose_latents, clamped_outputs
from polyinterp.cubic.regressor.model import build_model
from polyinterp.cubic.sae.autoencoder import TopKSAE
from polyinterp.cubic.regressor.task import generator, sample_inputs
from polyinterp.errors import ConfigError


def setup():
    model = build_model((3, 16, 15, 1), seed=0).eval()
    sae = TopKSAE(15, 12, 3)
    sae.init_weights(torch.Generator().manual_seed(0))
    inp = sample_inputs(400, {"x": [-2, 2], "a": [-2, 2], "b": [-2, 2]}, generator(0, 9))
    return model, sae, inp


def test_factor_one_is_the_sae_reconstruction_and_zero_removes_the_latent():
    model, sae, inp = setup()
    with torch.no_grad():
        z = sae.encode(model.hidden(inp))
        j = int((z > 0).sum(0).argmax())
        out = clamped_outputs(model, sae, inp, j, [0.0, 1.0])
        torch.testing.assert_close(out[1.0], model.head(sae(model.hidden(inp))))
        z0 = z.clone()
        z0[:, j] = 0
        torch.testing.assert_close(out[0.0], model.head(sae.decode(z0)))


def test_output_is_affine_in_the_factor_with_the_closed_form_slope():
    model, sae, inp = setup()
    with torch.no_grad():
        z = sae.encode(model.hidden(inp))
        j = int((z > 0).sum(0).argmax())
        out = clamped_outputs(model, sae, inp, j, [0.0, 0.5, 1.0, 2.0])
        # y(s) − y(1) = (s − 1)·z_j·(w_out · W_dec[:, j]): head and decoder are both linear
        slope = z[:, j] * (model.out.weight[0] @ sae.W_dec[:, j])
        for s in (0.0, 0.5, 2.0):
            torch.testing.assert_close(out[s] - out[1.0], (s - 1) * slope, atol=1e-5, rtol=1e-4)
        assert float(slope.abs().max()) > 0


def test_choose_latents():
    best = pd.DataFrame({"latent": [0, 1, 2, 3], "is_band": [False, True, True, False], "r2_best": [0.99, 0.7, 0.9, None]})
    assert choose_latents(best, "bands", 5) == [(2, "band"), (1, "band")]
    assert choose_latents(best, "bands", 1) == [(2, "band")]
    assert choose_latents(best.assign(is_band=False), "bands", 2) == [(0, "fallback"), (2, "fallback")]
    assert choose_latents(best, [3, 1], 1) == [(3, "config"), (1, "config")]
    with pytest.raises(ConfigError):
        choose_latents(best, "all", 1)
