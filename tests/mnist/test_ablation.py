"""SVD ablation pieces against brute-force linear algebra."""

import numpy as np
import pytest
import torch
from torch import nn

from polyinterp.approx import Approximant
from polyinterp.mnist.ablation import (ablation_rows, accuracies, project_out, projected_evaluator,
                                       random_orthonormal, top_right_singular_vectors)
from polyinterp.mnist.schedule import panel_steps, resolve_steps
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


def _direct_rows(models, x, y, beta, k_max, draws, seed):
    """The direct route: project the inputs, then evaluate every model."""
    vh = top_right_singular_vectors(beta)
    gen, rows = torch.Generator().manual_seed(seed), []
    for k in range(k_max + 1):
        for name, acc in accuracies(models, project_out(x, vh[:k]), y).items():
            rows.append(dict(k=k, directions="svd", draw=0, model=name, accuracy=acc))
        for draw in range(draws):
            dirs = random_orthonormal(x.shape[1], k, gen)
            for name, acc in accuracies(models, project_out(x, dirs), y).items():
                rows.append(dict(k=k, directions="random", draw=draw, model=name, accuracy=acc))
    return rows


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


def test_ablation_rows_equal_the_direct_route():
    models, x, beta, _ = _problem(seed=1)
    y = models["quadratic"](x).argmax(1)
    fast = ablation_rows(models, x, y, beta, k_max=6, draws=3, seed=11)
    assert fast == _direct_rows(models, x, y, beta, k_max=6, draws=3, seed=11)
    assert len(fast) == 7 * 4 * 3


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
    rows = ablation_rows(models, x, y, beta, k_max=o, draws=1, seed=0)
    acc = {(r["k"], r["directions"], r["model"]): r["accuracy"] for r in rows}
    assert acc[(0, "svd", "quadratic")] == 1.0
    constant = {"linear": models["linear"].alpha, "quadratic": models["linear"].alpha,
                "mlp": models["mlp"](torch.zeros(1, d, dtype=torch.float64))[0]}
    for name, c in constant.items():
        assert acc[(o, "svd", name)] == float((y == c.argmax()).double().mean()), name
