import numpy as np
import pytest

from polyinterp.cubic.probes.landmarks import (
    bump_template,
    cubic_landmarks,
    landmark_table,
    pearson_columns,
    rank_latents,
)


def test_hand_derived_landmarks():
    # x³ − x = x(x − 1)(x + 1); y' = 3x² − 1; y'' = 6x
    lm = cubic_landmarks(0.0, -1.0)
    np.testing.assert_allclose(lm["root"], [-1, 0, 1], atol=1e-12)
    np.testing.assert_allclose(lm["critical"], [-1 / np.sqrt(3), 1 / np.sqrt(3)], atol=1e-12)
    np.testing.assert_allclose(lm["inflection"], [0.0])
    # x³ − 3x² + 2x = x(x − 1)(x − 2); y' = 3x² − 6x + 2 → 1 ± 1/√3; y'' = 6x − 6 → 1
    lm = cubic_landmarks(-3.0, 2.0)
    np.testing.assert_allclose(lm["root"], [0, 1, 2], atol=1e-12)
    np.testing.assert_allclose(lm["critical"], [1 - 1 / np.sqrt(3), 1 + 1 / np.sqrt(3)], atol=1e-12)
    np.testing.assert_allclose(lm["inflection"], [1.0])
    # x³ + x: one real root, y' = 3x² + 1 > 0: no critical points
    lm = cubic_landmarks(0.0, 1.0)
    assert lm["root"] == [0.0] and lm["critical"] == []
    # x³ − 2x² + x = x(x − 1)²: double root counted once; y' = (3x − 1)(x − 1)
    lm = cubic_landmarks(-2.0, 1.0)
    np.testing.assert_allclose(lm["root"], [0, 1], atol=1e-12)
    np.testing.assert_allclose(lm["critical"], [1 / 3, 1], atol=1e-12)
    assert lm["all"] == sorted(lm["root"] + lm["critical"] + lm["inflection"])


@pytest.mark.parametrize("seed", range(3))
def test_landmarks_against_numpy_roots(seed):
    rng = np.random.default_rng(seed)
    for a, b in rng.uniform(-3, 3, size=(50, 2)):
        lm = cubic_landmarks(a, b)
        r = np.roots([1, a, b, 0])
        real = np.sort(r[np.abs(r.imag) < 1e-9].real)
        np.testing.assert_allclose(lm["root"], real, atol=1e-7)
        c = np.roots([3, 2 * a, b])
        creal = np.sort(c[np.abs(c.imag) < 1e-9].real)
        np.testing.assert_allclose(lm["critical"], creal, atol=1e-7)
        np.testing.assert_allclose(lm["inflection"], np.roots([6, 2 * a]).real)


def test_pearson_matches_numpy_and_is_nan_for_constants():
    rng = np.random.default_rng(0)
    prof = rng.normal(size=(50, 4))
    prof[:, 2] = 0.0
    t = rng.normal(size=50)
    r = pearson_columns(prof, t)
    for j in (0, 1, 3):
        assert r[j] == pytest.approx(np.corrcoef(prof[:, j], t)[0, 1], abs=1e-12)
    assert np.isnan(r[2])
    assert np.isnan(pearson_columns(prof, np.ones(50))).all()


def test_table_finds_planted_root_and_inflection_detectors():
    xs = np.linspace(-2, 2, 101)
    a_grid, b_grid = np.linspace(-1, 1, 5), np.linspace(-1, 1, 4)
    lat = np.zeros((4, 5, 101, 3))
    for ib, b in enumerate(b_grid):
        for ia, a in enumerate(a_grid):
            lm = cubic_landmarks(a, b)
            lat[ib, ia, :, 0] = bump_template(xs, lm["root"], 0.15)
            lat[ib, ia, :, 1] = bump_template(xs, lm["inflection"], 0.15)
            lat[ib, ia, :, 2] = np.maximum(xs, 0)
    table = landmark_table(lat, xs, a_grid, b_grid, 0.15)
    assert len(table) == 4 * 5 * 4 * 3 and set(table.kind) == {"root", "critical", "inflection", "all"}
    root = table[(table.kind == "root") & (table.latent == 0)]
    np.testing.assert_allclose(root["corr"], 1.0, atol=1e-9)
    infl = table[(table.kind == "inflection") & (table.latent == 1)]
    np.testing.assert_allclose(infl["corr"], 1.0, atol=1e-9)
    rank = rank_latents(table, 0.5)
    top = rank[rank["rank"] == 1].set_index("kind").latent
    assert top["root"] == 0 and top["inflection"] == 1
    assert rank[(rank.kind == "root") & (rank.latent == 0)].frac_strong.iloc[0] == 1.0
