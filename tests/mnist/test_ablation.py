"""SVD ablation pieces against brute-force linear algebra."""

import numpy as np
import pytest
import torch

from polyinterp.mnist.ablation import project_out, random_orthonormal, top_right_singular_vectors
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
