import numpy as np
import pandas as pd
import pytest
import torch

from polyinterp.cubic.probes.bands import detect_bands, slope_r2, slope_search, structure_direction, summarize_slopes

SLOPES = {"c_range": [-1.0, 1.0], "c_step": 0.02, "refine": 10, "buckets": 80}
BANDS = {"min_active_frac": 0.01, "coherence_min": 0.8, "c_max": 2.0, "c_tol": 0.1, "invariance_min": 0.6, "buckets": 60}


def planted_band(c, n, seed):
    g = torch.Generator().manual_seed(seed)
    xa = torch.rand(n, 2, generator=g, dtype=torch.float64) * 4 - 2
    u = xa[:, 0] + c * xa[:, 1]
    z = torch.relu(torch.sin(2.0 * u) + 0.3 * u) + 0.01 * torch.randn(n, generator=g, dtype=torch.float64)
    return xa, z[:, None]


@pytest.mark.parametrize("c", [0.3333, -0.52, 0.071])
def test_slope_search_finds_planted_c(c):
    xa_tr, z_tr = planted_band(c, 60000, 0)
    xa_ho, z_ho = planted_band(c, 20000, 1)
    scan, best = slope_search(xa_tr, z_tr, xa_ho, z_ho, SLOPES)
    assert best.c_best.iloc[0] == pytest.approx(c, abs=0.01)
    assert best.r2_best.iloc[0] > 0.95
    coarse = scan[scan.stage == "coarse"]
    assert len(coarse) == 101 and coarse.r2.max() <= best.r2_best.iloc[0] + 1e-12


def test_slope_r2_peaks_at_the_planted_c_and_is_nan_for_constants():
    xa, z = planted_band(0.3, 30000, 2)
    z = torch.cat([z, torch.ones(30000, 1, dtype=torch.float64)], 1)
    r2 = slope_r2(xa[:20000], z[:20000], xa[20000:], z[20000:], [-0.5, 0.0, 0.3, 0.6], 50)
    assert float(r2[2, 0]) > 0.95
    assert float(r2[0, 0]) < 0.5 and float(r2[1, 0]) < float(r2[2, 0]) - 0.2 and float(r2[3, 0]) < float(r2[2, 0]) - 0.2
    assert torch.isnan(r2[:, 1]).all()


def test_slope_r2_on_sparse_codes_against_dense_sums_and_a_bucket_loop():
    """TopK-like codes (most entries exactly 0, a few empty buckets): slope_r2, which sums only the nonzero
    entries, equals the dense bucket sums of every entry bit for bit, and a per-bucket numpy loop to 1e-12."""
    g = torch.Generator().manual_seed(9)
    n_tr, n_ho, m, buckets = 3000, 1000, 6, 40
    xa = torch.rand(n_tr + n_ho, 2, generator=g, dtype=torch.float64) * 4 - 2
    xa[1] = torch.tensor([10.0, 0.0], dtype=torch.float64)  # u = 10 at every c: empty buckets between 3 and 10
    z = torch.relu(torch.randn(n_tr + n_ho, m, generator=g)) * (torch.rand(n_tr + n_ho, m, generator=g) < 0.15)
    z[:, 4] = 0.0
    z[0, 4] = 1.0  # a latent that fires once in training, never held out: NaN
    cs = [-0.7, 0.0, 0.33]
    r2 = slope_r2(xa[:n_tr], z[:n_tr], xa[n_tr:], z[n_tr:], cs, buckets)
    zt, zh = z[:n_tr].double(), z[n_tr:].double()
    for i, c in enumerate(cs):
        u_tr, u_ho = xa[:n_tr, 0] + c * xa[:n_tr, 1], xa[n_tr:, 0] + c * xa[n_tr:, 1]
        lo, hi = float(u_tr.min()), float(u_tr.max())
        b_tr = ((u_tr - lo) / (hi - lo) * buckets).long().clamp_(0, buckets - 1)
        b_ho = ((u_ho - lo) / (hi - lo) * buckets).long().clamp_(0, buckets - 1)
        dense = torch.zeros(buckets, m, dtype=torch.float64).index_add_(0, b_tr, zt)
        cnt = torch.bincount(b_tr, minlength=buckets).double()
        assert bool((cnt == 0).any())
        means = torch.where(cnt[:, None] > 0, dense / cnt.clamp_min(1)[:, None], zt.mean(0)[None, :])
        want = 1 - (zh - means[b_ho]).pow(2).sum(0) / (zh - zh.mean(0)).pow(2).sum(0)
        want[4] = float("nan")
        assert torch.equal(r2[i].isnan(), want.isnan()) and torch.equal(r2[i][~want.isnan()], want[~want.isnan()])
        zt_np, zh_np, bt, bh = zt.numpy(), zh.numpy(), b_tr.numpy(), b_ho.numpy()
        for j in (0, 1, 5):
            pred = np.array([zt_np[bt == b, j].mean() if (bt == b).any() else zt_np[:, j].mean() for b in range(buckets)])
            loop = 1 - ((zh_np[:, j] - pred[bh]) ** 2).sum() / ((zh_np[:, j] - zh_np[:, j].mean()) ** 2).sum()
            assert float(r2[i, j]) == pytest.approx(loop, rel=1e-12, abs=1e-12)


def test_structure_tensor_recovers_direction_and_coherence():
    xs, as_ = np.linspace(-2, 2, 81), np.linspace(-2, 2, 81)
    A, X = np.meshgrid(as_, xs, indexing="ij")
    coh, c = structure_direction(np.maximum(X + 0.3 * A - 0.2, 0), xs, as_)
    assert coh > 0.99 and c == pytest.approx(0.3, abs=0.005)
    coh_prod, _ = structure_direction(X * A, xs, as_)
    assert coh_prod < 0.3
    coh0, c0 = structure_direction(np.zeros_like(X), xs, as_)
    assert coh0 == 0.0 and np.isnan(c0)


def test_detect_bands_accepts_bands_and_rejects_b_dependent_direction():
    xs, as_, bs = np.linspace(-2, 2, 61), np.linspace(-2, 2, 61), np.array([-1.0, 0.0, 1.0])
    B, A, X = np.meshgrid(bs, as_, xs, indexing="ij")
    grid = np.stack([
        np.maximum(np.sin(2 * (X + A / 3)), 0),          # band, c = 1/3, same at every b
        np.maximum(X + (0.3 + 0.4 * B) * A, 0),            # one direction per slice, but it turns with b
        np.maximum(X * A, 0),                              # no single direction
        np.zeros_like(X),                                  # dead
    ], -1)
    slices, latents = detect_bands(grid, xs, as_, bs, BANDS)
    assert len(slices) == 4 * 3
    assert list(latents.is_band) == [True, False, False, False]
    assert latents.c_grad_median.iloc[0] == pytest.approx(1 / 3, abs=0.02)
    assert latents.c_grad_spread.iloc[1] == pytest.approx(0.8, abs=0.05)
    assert latents.b_invariance_r2.iloc[0] > 0.95


def test_summary_median_and_spread_across_seeds():
    t = [pd.DataFrame({"seed": s, "latent": [0, 1, 2], "is_band": [True, True, False],
                       "c_best": [0.2 + s / 10, 0.3 + s / 10, 5.0], "r2_best": 0.9}) for s in range(3)]
    per_seed, spread = summarize_slopes(t)
    np.testing.assert_allclose(per_seed.median_c, [0.25, 0.35, 0.45])
    assert list(per_seed.n_band_latents) == [2, 2, 2] and per_seed.band_latents.iloc[0] == "0,1"
    assert spread.median_of_medians.iloc[0] == pytest.approx(0.35)
    assert spread.std_of_medians.iloc[0] == pytest.approx(0.1)
