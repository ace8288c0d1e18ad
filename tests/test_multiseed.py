"""Two seeds through the smoke DAG: per-seed jobs, tables across seeds, seed bands in fig2, the
cubic slope spread. Starts from the session's one-seed smoke run, so only seed 1 and the
aggregates are built."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pandas as pd
import pytest
from workflow_helpers import SMOKE, run_snakemake

pytestmark = pytest.mark.e2e


def test_two_seeds_give_per_seed_results_and_across_seed_aggregates(smoke_run, tmp_path, mnist_wheel):
    # results and Snakemake's metadata (without it a present aggregate would not be rebuilt for the
    # larger input set: the input-set rerun trigger reads the recorded inputs)
    tmp_path = tmp_path / "work"
    shutil.copytree(smoke_run, tmp_path, ignore=shutil.ignore_patterns("locks", "incomplete"))
    overlay = tmp_path / "seeds.yaml"
    overlay.write_text(f"seeds: [0, 1]\nmnist:\n  data:\n    wheel: {mnist_wheel}\n")
    targets = ["results/mnist/metrics.parquet", "results/figures/fig2.pdf", "results/cubic/slopes_spread.parquet",
               "results/figures/cubic_slopes.pdf"]
    proc = run_snakemake(tmp_path, *targets, "--cores", "2", configfiles=(SMOKE, overlay))
    log = proc.stdout + proc.stderr
    assert "mnist_train" in log and "cubic_train" in log  # seed 1 was trained ...
    assert "mnist_mixture" not in log  # ... on the shared mixture, which was not rebuilt

    df = pd.read_parquet(tmp_path / "results/mnist/metrics.parquet")
    assert set(df["seed"]) == {0, 1}
    steps = {s: set(df.loc[df["seed"] == s, "step"]) for s in (0, 1)}
    assert steps[0] == steps[1] and len(steps[0]) >= 5
    q = df[(df["approximant"] == "quadratic") & (df["metric"] == "fvu") & (df["distribution"] == "mixture")
           & (df["fit"] == "mixture")]
    by_seed = q.pivot(index="step", columns="seed", values="value")
    assert (by_seed[0] != by_seed[1]).any()  # different networks, not a copy of seed 0
    # fig2 draws the linear and the quadratic approximant (and the SGD fit), FVU and KL, each a mean
    # with a band over both seeds; fig_degrees the degrees beyond the paper
    from polyinterp.figures.mnist.curves import degrees_figure, fvu_figure

    metrics = str(tmp_path / "results/mnist/metrics.parquet")
    lines = fvu_figure(metrics=metrics, out=[str(tmp_path / "fig2_check.png")], params={})
    assert {ln["approximant"] for ln in lines} == {"linear", "quadratic", "quadratic_sgd"}
    lines += degrees_figure(metrics=metrics, out=[str(tmp_path / "degrees_check.png")], params={})
    assert {ln["approximant"] for ln in lines} == {"linear", "quadratic", "quadratic_sgd", "gaussian_deg1",
                                                   "gaussian_deg2", "gaussian_deg3", "gaussian_deg4",
                                                   "quadratic_pc8", "cubic_pc8"}
    assert all(ln["n_seeds"] == 2 for ln in lines)
    for ln in lines:
        assert all(lo <= m <= hi for lo, m, hi in zip(ln["min"], ln["mean"], ln["max"]))
    assert any(hi > lo for ln in lines for lo, hi in zip(ln["min"], ln["max"]))  # a real band

    # the across-seed spread, recomputed from the per-seed slope tables
    medians = []
    for seed in (0, 1):
        best = pd.read_parquet(tmp_path / f"results/cubic/seed{seed}/slopes.parquet")
        band = best[best.is_band]
        if len(band):
            medians.append(float(band.c_best.median()))
    spread = pd.read_parquet(tmp_path / "results/cubic/slopes_spread.parquet").iloc[0]
    assert spread.n_seeds == 2 and spread.n_seeds_with_bands == len(medians)
    if len(medians) == 2:
        assert spread.std_of_medians == pytest.approx(float(np.std(medians, ddof=1)), abs=1e-15)
        assert spread.min_median == min(medians) and spread.max_median == max(medians)
    else:
        assert math.isnan(spread.std_of_medians)

    # the cubic slope figure's seed band: per c, the mean / min / max over seeds of each seed's median
    # band-latent R² (recomputed here from the two scan tables)
    from polyinterp.figures.cubic.slopes import slopes_figure

    scans = [str(tmp_path / f"results/cubic/seed{seed}/slope_scan.parquet") for seed in (0, 1)]
    drawn = slopes_figure(scan=scans, slopes=[str(tmp_path / f"results/cubic/seed{seed}/slopes.parquet") for seed in (0, 1)],
                          seeds=str(tmp_path / "results/cubic/slopes_per_seed.parquet"), out=[str(tmp_path / "sl.png")])
    meds = []
    for path in scans:
        scan = pd.read_parquet(path)
        coarse = scan[(scan.stage == "coarse") & scan.is_band]
        if len(coarse):
            meds.append(coarse.groupby("c").r2.median())
    if not meds:
        pytest.skip("neither smoke seed has band latents: the seed band has nothing to check")
    both = pd.concat(meds, axis=1)
    np.testing.assert_allclose(drawn["seed_band"]["max"], both.max(axis=1).to_numpy())
    np.testing.assert_allclose(drawn["seed_band"]["min"], both.min(axis=1).to_numpy())
    assert max(drawn["seed_band"]["n_seeds"]) == len(meds)
