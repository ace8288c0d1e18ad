"""SVD ablation pieces against brute-force linear algebra."""

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from polyinterp.approx import MLP, Approximant, GaussianMixture
from polyinterp.mnist.attack.ablation import accuracies, attack_rows, random_orthonormal, top_right_singular_vectors
from polyinterp.mnist.attack.projected import (DirectionSets, Projection, batch_evaluator, project_out,
                                               projected_evaluator)
from polyinterp.mnist.attack.bases import BASES, basis_approximants, basis_distribution, check_bases
from polyinterp.mnist.attack.checkpoints import figure_steps
from polyinterp.rules import panel_steps, resolve_steps
from polyinterp.errors import ConfigError


def test_projection_removes_exactly_the_span():
    g = torch.Generator().manual_seed(0)
    beta = torch.randn(10, 30, generator=g, dtype=torch.float64)
    x = torch.randn(50, 30, generator=g, dtype=torch.float64)
    vh = top_right_singular_vectors(beta)
    _, s, vt = np.linalg.svd(beta.numpy())
    assert np.all(np.diff(s) <= 0)
    for k in (0, 1, 4, 10):
        p = project_out(x, vh[:k]).numpy()
        v = vt[:k]
        np.testing.assert_allclose(p, x.numpy() - x.numpy() @ v.T @ v, atol=1e-12)
        np.testing.assert_allclose(p @ v.T, 0, atol=1e-12)
    # all 10 directions removed: the linear map beta sees nothing of x any more
    np.testing.assert_allclose(project_out(x, vh[:10]) @ beta.T, 0, atol=1e-10)


def test_random_orthonormal_rows():
    q = random_orthonormal(40, 7, torch.Generator().manual_seed(1))
    np.testing.assert_allclose((q @ q.T).numpy(), np.eye(7), atol=1e-12)
    q2 = random_orthonormal(40, 7, torch.Generator().manual_seed(1))
    assert torch.equal(q, q2)


def test_resolve_and_panel_steps():
    steps = [0, 16, 32, 64, 128, 256]
    assert resolve_steps([64, "last", 256], steps, "k") == [64, 256]
    with pytest.raises(ConfigError, match="'mnist.ablation.steps'.*100"):
        resolve_steps([100], steps, "mnist.ablation.steps")
    assert panel_steps(steps, 3) == [16, 64, 256]
    assert panel_steps(steps, 10) == steps[1:]


def _problem(d=20, n=500, o=10, h=16, seed=0, gamma=None):
    """Random MLP, linear and quadratic approximants (random symmetric Γ unless given), inputs."""
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    alpha, beta = r(o), r(o, d)
    if gamma is None:
        gamma = r(o, d, d) / d
        gamma = gamma + gamma.transpose(1, 2)
    torch.manual_seed(seed)
    mlp = nn.Sequential(nn.Linear(d, h), nn.ReLU(), nn.Linear(h, o)).double().eval()
    models = {"mlp": mlp, "linear": Approximant(alpha, beta), "quadratic": Approximant(alpha, beta, gamma)}
    return models, r(n, d), beta, g


def _direct_rows(models, basis_betas, basis_models, x, y, k_max, draws, seed):
    """The direct route: project the inputs, then evaluate every model (random sets drawn afresh
    per basis from the same seed)."""
    rows = []
    for basis, beta in basis_betas.items():
        vh = top_right_singular_vectors(beta)
        everything = {**models, **basis_models.get(basis, {})}
        gen = torch.Generator().manual_seed(seed)
        for k in range(k_max + 1):
            for name, acc in accuracies(everything, project_out(x, vh[:k]), y).items():
                rows.append(dict(basis=basis, k=k, directions="svd", draw=0, predictor=name, accuracy=acc))
            for draw in range(draws):
                dirs = random_orthonormal(x.shape[1], k, gen)
                for name, acc in accuracies(everything, project_out(x, dirs), y).items():
                    rows.append(dict(basis=basis, k=k, directions="random", draw=draw, predictor=name, accuracy=acc))
    return rows


def _key(r):
    return (r["basis"], r["k"], r["directions"], r["draw"], r["predictor"])


def test_projected_evaluator_matches_projecting_first():
    g = torch.Generator().manual_seed(3)
    asym = torch.randn(10, 20, 20, generator=g, dtype=torch.float64) / 20  # Γ need not be symmetric
    for gamma in (None, asym):
        models, x, beta, gen = _problem(gamma=gamma)
        models["other"] = lambda v: torch.tanh(v[:, :10])  # no shortcut: projected directly
        vh = top_right_singular_vectors(beta)
        dir_sets = [vh[:k] for k in (0, 1, 4, 10)] + [random_orthonormal(20, k, gen) for k in (1, 7, 20)]
        with torch.no_grad():
            for name, model in models.items():
                evaluate = projected_evaluator(model, x)
                for dirs in dir_sets:
                    direct = model(project_out(x, dirs))
                    torch.testing.assert_close(evaluate(dirs), direct, rtol=0, atol=1e-10 * direct.abs().max())


def _roundoff_tolerance(models, x):
    """Elementwise tolerance for a model on projected inputs computed by the incremental route against
    the direct one: every term summed (g(x), the corrections in c = Vᵀx with ‖c‖ ≤ ‖x‖, the first layer)
    is at most S = max_o (|α_o| + ‖β_o‖‖x‖ + ‖Γ_o‖_F‖x‖²), resp. ‖W₂‖(‖W₁‖‖x‖ + ‖b₁‖) + ‖b₂‖ for a
    network, and a float64 sum of ~d² such terms is exact to d²·eps·S; 100·d² leaves room."""
    d, r = x.shape[1], float(x.norm(dim=1).max())
    out = {}
    for name, m in models.items():
        if isinstance(m, Approximant):
            gnorm = 0.0 if m.gamma is None else float(m.gamma.flatten(1).norm(dim=1).max())
            s = float(m.alpha.abs().max() + m.beta.norm(dim=1).max() * r) + gnorm * r * r
        else:
            s = 0.0
            for p in m.parameters():
                s = max(s, float(p.detach().norm()))
            s = s * (s * r + s) + s
        out[name] = 100 * d * d * torch.finfo(torch.float64).eps * s
    return out


def test_batched_evaluation_of_direction_sets_equals_projecting_first():
    """Nested (prefix) and stacked (side by side, empty ones too) direction sets, every model kind:
    each set's output against the model on the projected inputs."""
    from polyinterp.mnist.model import GLUNet

    g = torch.Generator().manual_seed(4)
    asym = torch.randn(10, 20, 20, generator=g, dtype=torch.float64) / 20
    models, x, beta, gen = _problem(gamma=asym, seed=4)
    torch.manual_seed(4)
    models["glu"] = GLUNet(20, 12, 10).double().eval()
    models["other"] = lambda v: torch.tanh(v[:, :10])
    vh = top_right_singular_vectors(beta)
    batches = [DirectionSets.nested(vh, 6), DirectionSets.nested(vh, 12),
               DirectionSets.stacked([random_orthonormal(20, k, gen) for k in (3, 0, 5, 3)]),
               DirectionSets.stacked([random_orthonormal(20, 0, gen)] * 2)]
    assert batches[1].spans[-1] == (0, 10) and len(batches[1]) == 13  # k beyond the rows: all of them
    assert batches[2].spans == ((0, 3), (3, 3), (3, 8), (8, 11))
    tol = _roundoff_tolerance({k: v for k, v in models.items() if k != "other"}, x)
    with torch.no_grad():
        for name, model in models.items():
            evaluate = batch_evaluator(model, x)
            for sets in batches:
                outs = evaluate(Projection.of(x, sets))
                assert len(outs) == len(sets)
                for i, out in enumerate(outs):
                    direct = model(project_out(x, sets[i]))
                    torch.testing.assert_close(out, direct, rtol=0, atol=tol.get(name, 1e-12))
        with pytest.raises(ValueError, match="Projection.of"):
            batch_evaluator(models["linear"], x)(Projection.of(x.clone(), batches[0]))


def test_attack_rows_equal_the_direct_route_for_every_basis():
    models, x, beta, g = _problem(seed=1)
    y = models["quadratic"](x).argmax(1)
    betas = {"mixture": beta, "gaussian": torch.randn(10, 20, generator=g, dtype=torch.float64),
             "standard_normal": torch.randn(10, 20, generator=g, dtype=torch.float64)}
    own = {b: {f"linear_{b}": Approximant(torch.zeros(10, dtype=torch.float64), betas[b])}
           for b in ("gaussian", "standard_normal")}
    fast = attack_rows(models, betas, own, x, y, k_max=6, draws=3, seed=11)
    direct = _direct_rows(models, betas, own, x, y, k_max=6, draws=3, seed=11)
    assert sorted(fast, key=_key) == sorted(direct, key=_key)
    assert len(fast) == 7 * (1 + 3) * (3 * 3 + 2 * 1)  # k × (svd + draws) × (3 models × 3 bases + 2 own)
    # random rows of the common models are the same draws under every basis
    rnd = {(r["basis"], r["k"], r["draw"], r["predictor"]): r["accuracy"] for r in fast if r["directions"] == "random"}
    assert all(rnd["gaussian", k, d, m] == rnd["mixture", k, d, m] for (b, k, d, m) in rnd if b == "mixture")


def test_ablation_rows_known_answer():
    """Γ and the MLP's first layer live in the row space of β: once its o = 10 SVD directions are
    removed, every model is constant, so its accuracy is that of its constant's argmax."""
    g = torch.Generator().manual_seed(5)
    d, o = 20, 10
    beta = torch.randn(o, d, generator=g, dtype=torch.float64)
    gamma = beta.T @ torch.randn(o, o, o, generator=g, dtype=torch.float64) @ beta
    gamma = gamma + gamma.transpose(1, 2)
    models, x, _, _ = _problem(d=d, o=o, gamma=gamma)
    models["linear"] = Approximant(models["linear"].alpha, beta)
    models["quadratic"] = Approximant(models["linear"].alpha, beta, gamma)
    with torch.no_grad():
        models["mlp"][0].weight.copy_(torch.randn(16, o, generator=g, dtype=torch.float64) @ beta)
    y = models["quadratic"](x).argmax(1)
    rows = attack_rows(models, {"mixture": beta}, {}, x, y, k_max=o, draws=1, seed=0)
    acc = {(r["k"], r["directions"], r["predictor"]): r["accuracy"] for r in rows}
    assert acc[(0, "svd", "quadratic")] == 1.0
    constant = {"linear": models["linear"].alpha, "quadratic": models["linear"].alpha,
                "mlp": models["mlp"](torch.zeros(1, d, dtype=torch.float64))[0]}
    for name, c in constant.items():
        assert acc[(o, "svd", name)] == float((y == c.argmax()).double().mean()), name


def _small_mlp(act, d=6, h=9, o=4, seed=0):
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(d, h), act, nn.Linear(h, o)).double()
    return net


@pytest.mark.parametrize("act", [nn.ReLU(), nn.GELU()], ids=["relu", "gelu"])
def test_standard_normal_beta_is_the_least_squares_fit_under_n01(act):
    """Independent route: ordinary least squares of the MLP's outputs on 4·10^5 N(0, I) samples."""
    d = 6
    net = _small_mlp(act, d=d)
    mix = GaussianMixture([0.3, 0.7], torch.randn(2, d, dtype=torch.float64), torch.eye(d)[None].repeat(2, 1, 1) * 0.5)
    fitted = basis_approximants(MLP.from_module(net), mix, None, ["standard_normal"])["standard_normal"]
    g = torch.Generator().manual_seed(7)
    x = torch.randn(400_000, d, generator=g, dtype=torch.float64)
    with torch.no_grad():
        f = net(x)
    X = torch.cat([torch.ones(len(x), 1, dtype=torch.float64), x], 1)
    coef = torch.linalg.lstsq(X, f).solution  # [1 + d, o]
    resid = f - X @ coef
    se = resid.std(0) / len(x) ** 0.5  # standard error of each slope (x has unit variance, independent columns)
    assert ((fitted.beta - coef[1:].T).abs() <= 5 * se[:, None]).all()
    assert ((fitted.alpha - coef[0]).abs() <= 5 * se).all()
    if isinstance(act, nn.ReLU):  # the closed form the paper's authors use: β = W₂ diag(Φ(b₁ᵢ/‖w₁ᵢ‖)) W₁
        w1, b1, w2 = net[0].weight, net[0].bias, net[2].weight
        phi = torch.distributions.Normal(0.0, 1.0).cdf(b1 / w1.norm(dim=1)).double()
        torch.testing.assert_close(fitted.beta, (w2 * phi) @ w1, rtol=1e-10, atol=1e-12)


def test_basis_distributions():
    g = torch.Generator().manual_seed(2)
    covs = torch.randn(3, 5, 5, generator=g, dtype=torch.float64)
    covs = covs @ covs.transpose(1, 2) + 0.1 * torch.eye(5)
    mix = GaussianMixture([0.2, 0.3, 0.5], torch.randn(3, 5, generator=g, dtype=torch.float64), covs)
    assert basis_distribution("mixture", mix) is mix
    one = basis_distribution("gaussian", mix)
    assert one.K == 1
    torch.testing.assert_close(one.means[0], mix.total_mean())
    torch.testing.assert_close(one.covs[0], mix.total_cov())
    sn = basis_distribution("standard_normal", mix)
    assert torch.equal(sn.means[0], torch.zeros(5, dtype=torch.float64))
    assert torch.equal(sn.covs[0], torch.eye(5, dtype=torch.float64))


def test_unknown_or_repeated_basis_is_refused_by_name():
    with pytest.raises(ConfigError, match="'mnist.ablation.bases'.*'whitened'"):
        check_bases(["mixture", "whitened"])
    with pytest.raises(ConfigError, match="distinct"):
        check_bases(["mixture", "mixture"])
    assert check_bases(BASES) == list(BASES)


def _clean_table(acc_by_step, seeds=(0, 1)):
    return pd.DataFrame([dict(seed=s, step=st, basis=b, k=0, directions="svd", draw=0, predictor="mlp", accuracy=a + 0.01 * s)
                         for st, a in acc_by_step.items() for s in seeds for b in ("mixture", "standard_normal")])


def test_figure_steps_by_accuracy_level_last_and_number():
    t = _clean_table({0: 0.1, 512: 0.93, 1024: 0.955, 2048: 0.97, 4096: 0.96})  # seed means: +0.005
    steps = figure_steps(t, ["accuracy_level", "last", 512, "last"], 0.96)
    assert [s.step for s in steps] == [1024, 4096, 512]  # 0.955 + 0.005 reaches 0.96; duplicates dropped
    assert "≥ 0.96" in steps[0].label
    assert figure_steps(t, ["accuracy_level"], 0.99)[0].step == 2048  # none reaches: the most accurate
    with pytest.raises(ConfigError, match="'mnist.ablation.figure_steps'.*300"):
        figure_steps(t, [300], 0.96)


def test_attack_summary_is_the_seed_mean_of_the_table():
    from polyinterp.mnist.attack.summary import attack_summary_markdown, attack_summary_table

    rows = []
    for seed in (0, 1):
        for step, clean in ((0, 0.1), (64, 0.9), (1024, 0.97)):
            for basis in ("standard_normal", "mixture"):  # out of order on purpose
                own = "linear" if basis == "mixture" else "linear_standard_normal"
                for k in range(11):
                    for model in ("mlp", own, "quadratic", "quadratic_sgd"):
                        acc = clean if k == 0 else clean / (1 + k + seed + (basis == "mixture"))
                        rows.append(dict(model="mlp_relu", seed=seed, step=step, basis=basis, k=k, directions="svd",
                                         draw=0, predictor=model, accuracy=acc))
                    for draw in (0, 1):
                        rows.append(dict(model="mlp_relu", seed=seed, step=step, basis=basis, k=k,
                                         directions="random", draw=draw, predictor="mlp",
                                         accuracy=clean - 0.01 * (k + draw)))
    df = pd.DataFrame(rows)
    out = attack_summary_table(df)
    assert sorted(out.k.unique()) == [4, 10]
    assert list(out.basis.drop_duplicates()) == ["mixture", "standard_normal", "any"]
    assert "quadratic_sgd" not in set(out.predictor)
    r = out[(out.k == 4) & (out.basis == "mixture") & (out.predictor == "mlp") & (out.step == 1024)].iloc[0]
    assert r["mean"] == pytest.approx(np.mean([0.97 / 6, 0.97 / 7])) and r["min"] == pytest.approx(0.97 / 7)
    assert r.clean_accuracy == pytest.approx(0.97) and r.n_seeds == 2
    rnd = out[(out.k == 10) & (out.predictor == "random") & (out.step == 64)].iloc[0]
    assert rnd["mean"] == pytest.approx(0.9 - 0.01 * 10.5) and rnd.basis == "any"
    md = attack_summary_markdown(out, "t")
    assert "| 1024 | 0.970 |" in md and md.count("Top ") == 2


def test_figure_steps_that_are_not_attacked_are_refused_by_name():
    from polyinterp.rules import check_figure_steps

    check_figure_steps(["accuracy_level", "last", 64], [0, 16, 64])
    with pytest.raises(ConfigError, match="'mnist.ablation.figure_steps' names step 32, which is not attacked"):
        check_figure_steps([32], [0, 16, 64])
