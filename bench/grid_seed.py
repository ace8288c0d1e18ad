"""Benchmark: rule ``cubic_grid_seed`` (one seed's single-polynomial grid) as the pipeline runs it.

    PYTHONPATH=src .venv/bin/python bench/grid_seed.py [--config workflow/configs/paper.yaml]
        [--seed 0] [--points N] [--steps S] [--sae-steps S] [--threads 1] [--keep DIR] [--compare DIR]

Builds the rule's params from ``config.yaml`` with ``--config`` over it (default: the paper config's
7 × 7 grid), as the workflow does (``polyinterp.rules.seed_params``), optionally keeps the first
``--points`` grid points and overrides the network's and the SAE's steps, and runs the rule's step
function (``polyinterp.steps.STEPS["cubic_grid_seed"]``) into a temporary folder (or ``--keep DIR``)
on ``--threads`` torch threads (the rule's ``threads: 1``). Prints wall and CPU seconds of the step
and the peak RSS of the process. Uses only names that exist before and after the grid was batched,
so the same file runs at either commit (copy it out of the tree for the older one). ``--compare DIR``
compares the files written with those a previous run kept in DIR (same arguments): per point the
largest difference of the network's and the SAE's weights and of every metric but the timings.
Not a test: times depend on the machine and on what else runs.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import torch

from polyinterp.config import load_yaml
from polyinterp.rules import point_files, seed_params
from polyinterp.steps import STEPS

ROOT = Path(__file__).resolve().parents[1]


def merged(base: dict, over: dict) -> dict:
    """``over`` merged into ``base`` key by key (as Snakemake merges --configfile)."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def compare(files: dict, other: Path, folder: Path) -> None:
    """Per point, the largest absolute difference against the same files under ``other``."""
    from polyinterp.io import load_parquet, load_torch

    worst = 0.0
    for i, model in enumerate(files["model"]):
        row = []
        for key in ("model", "sae"):
            a = load_torch(files[key][i])["state"]
            b = load_torch(other / Path(files[key][i]).relative_to(folder))["state"]
            diff = max(float((a[n].double() - b[n].double()).abs().max()) for n in a)
            row.append(f"{key} weights {diff:.3g}")
            worst = max(worst, diff)
        a = load_parquet(files["metrics"][i])
        b = load_parquet(other / Path(files["metrics"][i]).relative_to(folder))
        cols = [c for c in a.columns if "second" not in c and a[c].dtype.kind == "f"]
        diff = max(abs(float(a[c].iloc[0]) - float(b[c].iloc[0])) for c in cols)
        worst_col = max(cols, key=lambda c: abs(float(a[c].iloc[0]) - float(b[c].iloc[0])))
        row.append(f"metrics {diff:.3g} ({worst_col})")
        print(f"  {Path(model).parent.name}: " + ", ".join(row))
    print(f"largest weight difference over all points: {worst:.3g}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=str(ROOT / "workflow/configs/paper.yaml"), help="overlay on config.yaml")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--points", type=int, default=None, help="first N grid points only (default: all)")
    ap.add_argument("--steps", type=int, default=None, help="network steps (default: the config's)")
    ap.add_argument("--sae-steps", type=int, default=None, help="SAE steps (default: the config's)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--keep", default=None, help="write the files here (kept) instead of a temporary folder")
    ap.add_argument("--compare", default=None, help="a --keep folder of an earlier run to compare with")
    args = ap.parse_args()

    cfg = load_yaml(ROOT / "config.yaml")
    if args.config:
        cfg = merged(cfg, load_yaml(args.config))
    cubic = cfg["cubic"]
    if args.steps is not None:
        cubic["grid"]["train"]["steps"] = args.steps
    if args.sae_steps is not None:
        cubic["grid"]["sae"]["steps"] = args.sae_steps
    params = seed_params(cubic, args.seed, "cpu")
    if args.points is not None:
        params["points"] = params["points"][: args.points]
    torch.set_num_threads(args.threads)
    module, _, func = STEPS["cubic_grid_seed"].partition(":")
    step = getattr(__import__(module, fromlist=[func]), func)

    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="grid_seed_"))
    pattern = str(folder / f"seed{args.seed}" / "a{ia}_b{ib}")
    files = {k: point_files(pattern + "/" + name, cubic, [args.seed])[: len(params["points"])]
             for k, name in (("model", "model.pt"), ("sae", "sae.pt"), ("metrics", "metrics.parquet"))}
    print(f"{len(params['points'])} grid points, {cubic['grid']['train']['steps']} network steps, "
          f"{cubic['grid']['sae']['steps']} SAE steps, seed {args.seed}, {args.threads} thread(s), into {folder}")
    wall, cpu = time.perf_counter(), time.process_time()
    step(**files, params=params)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"cubic_grid_seed: {wall:.1f} s wall, {cpu:.1f} s CPU, peak RSS {peak:.0f} MiB")
    if args.compare:
        compare(files, Path(args.compare), folder)


if __name__ == "__main__":
    main()
