"""The configurable MNIST networks (mnist.models): construction, checkpoints, the library view of
each, the attack's fast GLU evaluator, and the approximants fitted under the moment-matched Gaussian
against Monte-Carlo least squares."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from polyinterp.approx import Approximant, GaussianMixture, SolverPlan
from polyinterp.errors import ConfigError
from polyinterp.mnist.attack.projected import project_out, projected_evaluator
from polyinterp.mnist.approximants import fit_approximants, load_approximants
from polyinterp.mnist.metrics import metrics_table
from polyinterp.mnist.model import (TRAINABLE_ACTIVATIONS, GLUNet, load_network, make_network, network_arch,
                                    polynomial_network)
from polyinterp.mnist.model_specs import ACTIVATIONS, resolve_models
from polyinterp.io import save_torch

D = 4
NETS = [("mlp", "relu"), ("mlp", "gelu"), ("glu", "relu"), ("glu", "gelu"), ("mlp", "gelu_tanh"), ("glu", "silu")]


def _net(arch, act, hidden=6, seed=0):
    torch.manual_seed(seed)
    net = make_network(D, hidden, 3, arch, act).double()
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.3 * torch.randn_like(p))  # biases away from 0: active and inactive units
    return net


def test_every_configurable_activation_has_a_module():
    assert tuple(TRAINABLE_ACTIVATIONS) == ACTIVATIONS


@pytest.mark.parametrize("arch,act", NETS)
def test_the_library_network_is_the_module(arch, act):
    net = _net(arch, act)
    x = torch.randn(200, D, dtype=torch.float64)
    assert torch.allclose(polynomial_network(net)(x), net(x), rtol=0, atol=1e-12)


@pytest.mark.parametrize("arch,act", NETS)
def test_a_checkpoint_rebuilds_the_same_network(arch, act):
    net = _net(arch, act).float()  # as trained and saved
    arch_info = network_arch(net)
    assert arch_info == {"d": D, "hidden": 6, "n_out": 3, "arch": arch, "activation": act}
    back = load_network({"arch": arch_info, "state": net.state_dict()})
    assert type(back) is type(net)
    x = torch.randn(50, D)
    assert torch.equal(back(x), net(x))


def test_the_default_relu_mlp_is_built_as_before():
    """The default ReLU MLP is constructed exactly as before models were configurable (same parameters
    from the same seed), so the default config's numbers stay."""
    torch.manual_seed(3)
    old = torch.nn.Sequential(torch.nn.Linear(D, 7), torch.nn.ReLU(), torch.nn.Linear(7, 10))
    torch.manual_seed(3)
    new = make_network(D, 7)
    assert all(torch.equal(a, b) for a, b in zip(old.state_dict().values(), new.state_dict().values()))


@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_the_attacks_glu_evaluator_equals_projecting_first(act):
    net = _net("glu", act).eval()
    x = torch.randn(300, D, dtype=torch.float64)
    evaluate = projected_evaluator(net, x)
    q, _ = torch.linalg.qr(torch.randn(D, 2, dtype=torch.float64))
    for dirs in (q.T[:0], q.T[:1], q.T):
        assert torch.allclose(evaluate(dirs), net(project_out(x, dirs)), rtol=0, atol=1e-12)
    assert isinstance(net, GLUNet)


def _mixture():
    g = torch.Generator().manual_seed(1)
    A = torch.randn(3, D, D, generator=g, dtype=torch.float64) / math.sqrt(D)
    covs = 0.3 * (A @ A.transpose(1, 2) + 0.3 * torch.eye(D, dtype=torch.float64))
    means = torch.randn(3, D, generator=g, dtype=torch.float64)
    return {"weights": torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64), "means": means, "covs": covs, "ridge": 0.01}


def _ckpt(net):
    return {"arch": network_arch(net), "state": {k: v.float() for k, v in net.state_dict().items()}, "model": "m",
            "step": 16, "seed": 0, "preprocess": {"pool": 14, "center": False}, "train_loss": 1.0,
            "test_accuracy": 0.5}


def _lstsq_features(x, degree):
    feats = [torch.ones(len(x), 1, dtype=x.dtype), x]
    if degree == 2:
        iu = torch.triu_indices(x.shape[1], x.shape[1])
        feats.append((x[:, :, None] * x[:, None, :])[:, iu[0], iu[1]])
    return torch.cat(feats, 1)


@pytest.mark.parametrize("arch,act", [("glu", "gelu"), ("mlp", "gelu"), ("glu", "relu")])
def test_gaussian_fits_are_least_squares_under_the_moment_matched_gaussian(arch, act):
    """fits [mixture, gaussian]: the Gaussian-fit linear and quadratic equal the brute-force least-squares
    fits on 4·10^5 samples of the moment-matched Gaussian (their difference, measured on fresh samples,
    is within Monte-Carlo error), and the mixture fits are the mixture's (they beat the Gaussian fits
    in exact mixture FVU)."""
    net = _net(arch, act, seed=5).float()
    ckpt, mixture = _ckpt(net), _mixture()
    mix = GaussianMixture(mixture["weights"], mixture["means"], mixture["covs"])
    plan = SolverPlan.build(mix, sweeps=1, lanczos_steps=0)
    params = {"tol": 1e-10, "max_iter": 500, "inner_dtype": "float64", "device": "cpu", "sgd": {"enabled": False},
              "fits": ["mixture", "gaussian"]}
    saved = fit_approximants(ckpt, mixture, params, plan)
    gauss = mix.moment_matched()
    x = gauss.sample(400_000, seed=11)
    f = polynomial_network(load_network(ckpt))(x)
    x_new = gauss.sample(100_000, seed=12)
    f_new = polynomial_network(load_network(ckpt))(x_new)
    for degree, name in ((1, "linear"), (2, "quadratic")):
        exact = Approximant.from_state_dict(saved["gaussian"][name])
        coef = torch.linalg.lstsq(_lstsq_features(x, degree), f).solution
        brute = _lstsq_features(x_new, degree) @ coef
        resid = float((f_new - exact(x_new)).square().mean())
        gap = float((brute - exact(x_new)).square().mean())
        # the brute-force fit's excess error is ≈ p/n of the residual (p features, n samples; 1–2× that
        # measured here, the residual being heteroscedastic); a fit under another distribution is far off
        p = _lstsq_features(x[:1], degree).shape[1]
        assert gap < 5 * p / len(x) * resid, (name, gap, resid)


def test_metrics_have_a_fit_column_and_the_mixture_fit_wins_under_the_mixture(tmp_path):
    net = _net("glu", "gelu", seed=7).float()
    ckpt, mixture = _ckpt(net), _mixture()
    mix = GaussianMixture(mixture["weights"], mixture["means"], mixture["covs"])
    params = {"tol": 1e-10, "max_iter": 500, "inner_dtype": "float64", "device": "cpu", "sgd": {"enabled": False},
              "fits": ["mixture", "gaussian"]}
    save_torch(fit_approximants(ckpt, mixture, params, SolverPlan.build(mix, sweeps=1, lanczos_steps=0)),
               tmp_path / "a.pt")
    assert set(load_approximants(tmp_path / "a.pt", fit="gaussian")) == {"linear", "quadratic"}
    g = torch.Generator().manual_seed(0)
    mnist = SimpleNamespace(test_images=torch.randint(0, 256, (300, 28, 28), generator=g, dtype=torch.uint8).numpy(),
                            test_labels=np.asarray(torch.randint(0, 3, (300,), generator=g)))
    df = metrics_table(ckpt, tmp_path / "a.pt", mixture, mnist, {"device": "cpu", "mixture_samples": 20000})
    assert set(df.model) == {"m"}
    assert set(zip(df.approximant, df.fit)) == {("mlp", "none"), ("linear", "mixture"), ("quadratic", "mixture"),
                                                ("linear", "gaussian"), ("quadratic", "gaussian")}
    exact = df[df.distribution == "mixture_exact"].set_index(["approximant", "fit"]).value
    for name in ("linear", "quadratic"):
        assert exact[name, "mixture"] <= exact[name, "gaussian"] + 1e-12  # the least-squares optimum under the mixture


def test_model_specs_defaults_overrides_and_refusals():
    train = {"hidden": 256, "lr": 0.002, "warmup_steps": 1000, "batch_size": 64, "weight_decay": 0.1,
             "checkpoints": {"first_pow": 4, "last_pow": 14, "per_octave": 1}}
    specs = resolve_models({"train": train, "models": [{"name": "a"}, {"name": "b", "arch": "glu", "activation": "gelu",
                                                                       "hidden": 128, "train": {"lr": 0.001}}]})
    assert [(s.name, s.arch, s.activation, s.hidden) for s in specs] == [("a", "mlp", "relu", 256), ("b", "glu", "gelu", 128)]
    assert specs[0].train["lr"] == 0.002 and specs[1].train["lr"] == 0.001 and "checkpoints" not in specs[1].train
    for models, key in (([{"name": "a"}, {"name": "a"}], r"mnist.models\[1\].name"),
                        ([{"name": "a", "activation": "softplus"}], r"mnist.models\[0\].activation"),
                        ([{"name": "a", "arch": "cnn"}], r"mnist.models\[0\].arch"),
                        ([{"name": "a", "train": {"momentum": 0.9}}], r"mnist.models\[0\].train.momentum"),
                        ([{"name": "a", "train": {"checkpoints": {}}}], r"mnist.models\[0\].train.checkpoints"),
                        ([], r"mnist.models")):
        with pytest.raises(ConfigError, match=key):
            resolve_models({"train": train, "models": models})
