"""Stretch or shift: planted stretches and shifts on synthetic curves, a hand-derived case, the verdict."""

import numpy as np
import pytest

from polyinterp.cubic.interventions.stretch_shift import delta_grid, effect_r2, fit_shift, fit_stretch, r2_score, verdict
from polyinterp.errors import ConfigError

X = np.linspace(-2.0, 2.0, 201)


def f(x):
    """A smooth curve with no symmetry that would make a shift look like a stretch."""
    x = np.asarray(x, np.float64)
    return x**3 - 0.8 * x**2 - x + 0.3 * np.sin(3.0 * x)


@pytest.mark.parametrize("s, c", [(1.37, -0.2), (0.5, 0.0), (2.0, 1.25)])
def test_stretch_fit_recovers_a_planted_stretch(s, c):
    fit = fit_stretch(f(X), s * f(X) + c)
    assert fit["s"] == pytest.approx(s, abs=1e-3) and fit["c"] == pytest.approx(c, abs=1e-3)
    assert fit["r2"] == pytest.approx(1.0, abs=1e-3) and fit["effect_r2"] == pytest.approx(1.0, abs=1e-3)
    shift = fit_shift(X, s * f(X) + c, f, [-1.0, 1.0], 0.01)
    assert shift["effect_r2"] < fit["effect_r2"] - 0.05   # a stretch is not a shift of this curve


@pytest.mark.parametrize("delta, c, step", [(0.237, 0.5, 0.01), (-0.6183, 0.0, 0.05), (0.0, -1.0, 0.02)])
def test_shift_fit_recovers_a_planted_shift(delta, c, step):
    y = f(X - delta) + c
    fit = fit_shift(X, y, f, [-1.0, 1.0], step)
    assert fit["delta"] == pytest.approx(delta, abs=1e-3) and fit["c"] == pytest.approx(c, abs=1e-3)
    assert fit["r2"] == pytest.approx(1.0, abs=1e-3) and not fit["at_bound"]
    np.testing.assert_allclose(fit["pred"], y, atol=1e-3)
    if delta != 0.0:
        assert fit["effect_r2"] == pytest.approx(1.0, abs=1e-3)
        assert fit_stretch(f(X), y)["effect_r2"] < fit["effect_r2"] - 0.05


def test_shift_of_a_parabola_by_hand():
    """(x − δ)² + c = x² + βx exactly for δ = −β/2, c = −β²/4."""
    beta = 0.6
    fit = fit_shift(X, X**2 + beta * X, np.square, [-1.0, 1.0], 0.07)
    assert fit["delta"] == pytest.approx(-beta / 2, abs=1e-6) and fit["c"] == pytest.approx(-beta**2 / 4, abs=1e-6)


def test_shift_beyond_the_range_is_flagged():
    fit = fit_shift(X, f(X - 1.5), f, [-1.0, 1.0], 0.05)
    assert fit["at_bound"] and fit["delta"] == pytest.approx(1.0, abs=1e-6)


def test_r2_definitions():
    y, base = np.array([0.0, 1.0, 2.0, 3.0]), np.array([0.0, 1.0, 1.0, 3.0])
    assert r2_score(y, y) == 1.0 and np.isnan(r2_score(np.ones(4), np.ones(4)))
    assert effect_r2(y, base, base) == 0.0 and effect_r2(y, base, y) == 1.0
    assert effect_r2(y, base, np.array([0.0, 1.0, 1.5, 3.0])) == pytest.approx(0.75)   # half the change: 1 − 0.25
    assert np.isnan(effect_r2(base, base, base))
    flat = fit_stretch(np.ones(4), y)
    assert np.isnan(flat["s"]) and flat["c"] == pytest.approx(1.5)


def test_verdict_rule():
    rule = {"r2_min": 0.9, "margin": 0.05, "min_effect": 0.01}
    assert verdict(0.001, 1.0, 0.2, **rule) == "no_effect"
    assert verdict(float("nan"), 1.0, 0.2, **rule) == "no_effect"
    assert verdict(0.5, 0.8, 0.7, **rule) == "neither"
    assert verdict(0.5, 0.97, 0.95, **rule) == "indistinguishable"
    assert verdict(0.5, 0.99, 0.3, **rule) == "stretch"
    assert verdict(0.5, float("nan"), 0.95, **rule) == "shift"


def test_delta_grid():
    np.testing.assert_allclose(delta_grid([-1.0, 1.0], 0.5), [-1.0, -0.5, 0.0, 0.5, 1.0])
    np.testing.assert_allclose(delta_grid([0.0, 1.0], 0.4), [0.0, 0.4, 0.8, 1.0])
    with pytest.raises(ConfigError, match=r"cubic\.joint_clamp\.shift\.delta_range"):
        delta_grid([1.0, -1.0], 0.1)
    with pytest.raises(ConfigError, match="delta_step"):
        delta_grid([-1.0, 1.0], 5.0)
