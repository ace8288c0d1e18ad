"""Benchmark of the approximant library at MNIST scale (not a test).

For d = 784, h ∈ {256, 512}, K ∈ {1, 10}: seconds, peak memory and CG iterations of the linear
approximant, the exact quadratic (cold, and warm-started from the solution for a slightly different
network, as from the previous checkpoint) and the SGD quadratic (the paper's baseline). Each
configuration runs in its own subprocess so that the peak resident memory is its own. For K > 1 the
solver plan (whitening, joint-diagonal basis and deflation vectors, once per mixture; rule
``mnist_solver_plan`` in the pipeline) is built first and timed separately ("plan s"); "seconds" is
the solve alone. "inner" is the precision of the products inside PCG (``--inner-dtype``, default
auto), "deflated" the number of eigenvectors deflated (+ the
coarse space's dimension p(p + 1)/2 when the plan has one). ``gaussian_deg<n>`` (e.g. ``gaussian_deg4``; K = 1
only) is the exact degree-n polynomial under one Gaussian in factored Hermite form
(``gaussian_polynomial_approximant``); its rows add the analytic FVU, the seconds it takes, and the
seconds to evaluate the polynomial on 10⁴ inputs. ``cubic_pc<p>`` (e.g. ``cubic_pc50``; any K) is the
exact quadratic and cubic under the mixture on its top-p whitened principal components, fitted together
as rule ``mnist_degree_approximants`` does; "seconds" covers both, "CG its" is the cubic's (the
quadratic's in the JSON as quadratic_iterations), with the same extra columns as ``gaussian_deg<n>``.

    python bench/approximants.py                       # CPU (and CUDA when present), table to stdout
    python bench/approximants.py --hidden 256 --K 10 --methods quadratic_exact --devices cpu
    python bench/approximants.py --hidden 256 --K 1 --methods gaussian_deg4 --devices cpu

The mixture is the MNIST class mixture written by the workflow (``--mixture``, default
``results/mnist/mixture.pt``) when that file exists, else a synthetic MNIST-like one (28×28 images
with constant border pixels, smooth low-rank class covariances plus a ridge). ``--ridge R`` replaces
the MNIST mixture's ridge by R × its mean within-class variance (the file records both).

Every exact row also reports "product s": one float64 Gram-operator product timed in the same
process, and the solve in those units ("× product"), so that a figure travels between machines, and
"seconds by part": the solve's setup (of it the coarse space's), right-hand side, start, iterations
and float64 residuals, and for the cold row the plan's parts (``fit_info["seconds_by_part"]``,
``SolverPlan.seconds_by_part``).

``--load N`` measures every configuration twice: on the machine as it is, then with N CPU-bound
processes started beside it (``python -c "while True: pass"``); the "load" column says which.
``--threads T``: torch's intra-op threads (default: torch's).

    python bench/approximants.py --hidden 256 --K 10 --methods quadratic_exact --ridge 1e-3 --load 1
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

from polyinterp.approx.solvers.logdet_newton import NEWTON_ITERATIONS
from polyinterp.approx.solvers.solver_plan import BASIS_METHODS, COARSE_RANK, COARSE_RITZ, LOGDET_SWEEPS

DEFAULT_MIXTURE = Path("results/mnist/mixture.pt")


def synthetic_mnist_like(K: int = 10, side: int = 28, rank: int = 60, ridge_rel: float = 1e-2, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    d = side * side
    yy, xx = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
    inside = ((yy >= 4) & (yy < side - 4) & (xx >= 4) & (xx < side - 4)).reshape(-1).double()

    def smooth_fields(n):
        f = torch.randn(n, 1, side, side, generator=g, dtype=torch.float64)
        k = torch.exp(-0.5 * (torch.arange(-6, 7, dtype=torch.float64) / 2.0) ** 2)
        k = (k[:, None] * k[None, :])[None, None] / k.sum() ** 2
        return torch.nn.functional.conv2d(f, k, padding=6).reshape(n, d) * inside

    means = 0.3 * torch.sigmoid(3 * smooth_fields(K))
    covs = []
    for _ in range(K):
        F = smooth_fields(rank) * (torch.arange(1, rank + 1, dtype=torch.float64) ** -0.8)[:, None]
        covs.append(F.T @ F)
    covs = torch.stack(covs)
    covs = covs / covs.diagonal(dim1=1, dim2=2).mean() * 0.05
    ridge = ridge_rel * float(covs.diagonal(dim1=1, dim2=2).mean())
    covs = covs + ridge * torch.eye(d, dtype=torch.float64)
    return {"weights": torch.full((K,), 1.0 / K, dtype=torch.float64), "means": means, "covs": covs,
            "source": "synthetic"}


def load_mixture(path: Path | None, ridge: float | None = None):
    """The mixture file's weights, means and covariances (else the synthetic one); with ``ridge``, the
    covariances' ridge replaced by ``ridge`` × the file's mean within-class variance."""
    if path is not None and path.exists():
        m = torch.load(path, weights_only=False)
        covs = m["covs"]
        if ridge is not None:
            if "ridge_abs" not in m or "mean_within_class_variance" not in m:
                raise SystemExit(f"{path} does not record its ridge; --ridge needs a mixture written by the workflow")
            eye = torch.eye(covs.shape[-1], dtype=covs.dtype)
            covs = covs + (ridge * m["mean_within_class_variance"] - m["ridge_abs"]) * eye
        return {"weights": m["weights"], "means": m["means"], "covs": covs, "source": str(path)}
    if ridge is not None:
        return {**synthetic_mnist_like(ridge_rel=ridge), "source": "synthetic"}
    return synthetic_mnist_like()


def gram_product_seconds(mix, device: str, repeats: int = 2) -> float:
    """Seconds of one float64 Gram-operator product (o = 10 outputs, whitened mixture), best of ``repeats``."""
    from polyinterp.approx.solvers.gram_operator import GramOperator

    op = GramOperator(mix)
    g = torch.Generator(device=device).manual_seed(5)
    theta = (torch.randn(10, generator=g, dtype=mix.dtype, device=device),
             torch.randn(10, mix.d, generator=g, dtype=mix.dtype, device=device),
             torch.randn(10, mix.d, mix.d, generator=g, dtype=mix.dtype, device=device))
    best = math.inf
    for _ in range(repeats):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = op(theta)
        float(out[2].sum())
        best = min(best, time.perf_counter() - t0)
    return best


def _peak_mb(device: str) -> float:
    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_one(cfg: dict) -> dict:
    """One (device, h, K, method) measurement, in this process."""
    from polyinterp.approx import MLP, GaussianMixture, SolverPlan, fidelity, linear_approximant, quadratic_approximant
    from polyinterp.approx.fits.hermite_ridge import gaussian_polynomial_approximant

    if cfg.get("threads"):
        torch.set_num_threads(int(cfg["threads"]))
    threads = torch.get_num_threads()
    rows = _run_one(cfg)
    for r in rows:
        r["threads"] = threads
    return rows


def _run_one(cfg: dict) -> list[dict]:
    from polyinterp.approx import MLP, GaussianMixture, SolverPlan, fidelity, linear_approximant, quadratic_approximant
    from polyinterp.approx.fits import quadratic_mixture
    from polyinterp.approx.fits.hermite_ridge import gaussian_polynomial_approximant

    if cfg.get("replace_factor"):  # this subprocess only
        for dt in list(quadratic_mixture.REPLACE_FACTOR):
            quadratic_mixture.REPLACE_FACTOR[dt] = cfg["replace_factor"]

    device, h, K, method = cfg["device"], cfg["h"], cfg["K"], cfg["method"]
    raw = load_mixture(Path(cfg["mixture"]) if cfg.get("mixture") else None, cfg.get("ridge"))
    mix = GaussianMixture(raw["weights"], raw["means"], raw["covs"], device=device)
    if K == 1:
        mix = mix.moment_matched()
    elif K != mix.K:
        raise SystemExit(f"the mixture has K = {mix.K}, asked for K = {K}")
    torch.manual_seed(cfg.get("seed", 0))
    net = torch.nn.Sequential(torch.nn.Linear(mix.d, h), torch.nn.ReLU(), torch.nn.Linear(h, 10))
    mlp = MLP.from_module(net).to(device)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    out = {**cfg, "d": mix.d, "mixture_source": raw["source"]}
    plan = None
    inner = cfg.get("inner_dtype", "auto")
    if method == "quadratic_exact" and K > 1:
        # once per mixture (the pipeline's rule mnist_solver_plan), shared by every checkpoint and seed
        plan = SolverPlan.build(mix, basis=cfg.get("basis", "newton"), sweeps=cfg.get("jd_sweeps", 2),
                                newton_iterations=cfg.get("newton_iterations", NEWTON_ITERATIONS),
                                lanczos_steps=cfg.get("deflation_steps", 120),
                                logdet_sweeps=cfg.get("logdet_sweeps", LOGDET_SWEEPS),
                                coarse_ritz=cfg.get("coarse_ritz", COARSE_RITZ), coarse_rank=cfg.get("coarse_rank", COARSE_RANK))
        out["plan_seconds"] = plan.seconds
        out["plan_seconds_by_part"] = plan.seconds_by_part
        if plan.basis_info is not None:
            out["newton_steps"] = plan.basis_info["iterations"]
            out["logdet_criterion"] = plan.basis_info["divergence"]
        out["product_seconds"] = gram_product_seconds(plan.whiten(mix), device)
    t0 = time.perf_counter()
    if method == "linear":
        res = linear_approximant(mlp, mix)
    elif method == "quadratic_exact":
        res = quadratic_approximant(mlp, mix, method="exact", tol=cfg["tol"], max_iter=cfg["max_iter"], plan=plan,
                                    preconditioner=cfg.get("preconditioner", "joint_diagonal"), inner_dtype=inner)
    elif method == "quadratic_sgd":
        res = quadratic_approximant(mlp, mix, method="sgd", steps=cfg["sgd_steps"], batch=cfg["sgd_batch"],
                                    seed=0)
    elif _gaussian_degree(method) is not None:
        if K != 1:
            raise SystemExit(f"{method} is the polynomial under one Gaussian; use --K 1")
        res = gaussian_polynomial_approximant(mlp, mix.means[0], mix.covs[0], degree=_gaussian_degree(method))
    elif _pc_components(method) is not None:
        from polyinterp.approx.fits.cubic_mixture import reduced_polynomial_approximants

        # as rule mnist_degree_approximants: the PC quadratic and cubic together (shared right-hand side)
        fits = reduced_polynomial_approximants(mlp, mix, components=_pc_components(method), degrees=(2, 3),
                                               tol=cfg["pc_tol"], max_iter=cfg["max_iter"],
                                               inner_dtype=cfg.get("pc_inner_dtype", "float32"))
        res = fits[3]
    else:
        raise SystemExit(f"unknown method {method}")
    _record(out, res, t0, device)
    if _pc_components(method) is not None:
        t1 = time.perf_counter()
        out["exact_fvu"] = res.fvu()  # E f² of the network: the bivariate moments of the hidden layer
        out["fvu_seconds"] = time.perf_counter() - t1
        out["quadratic_iterations"] = fits[2].fit_info.get("iterations")
        x = mix.sample(10_000, seed=7)
        t1 = time.perf_counter()
        float(res(x).sum())
        out["eval_seconds"] = time.perf_counter() - t1
    if _gaussian_degree(method) is not None:
        t1 = time.perf_counter()
        out["exact_fvu"] = res.fvu()  # a Python float: synchronises on CUDA
        out["fvu_seconds"] = time.perf_counter() - t1
        x = mix.sample(10_000, seed=7)
        t1 = time.perf_counter()
        float(res(x).sum())
        out["eval_seconds"] = time.perf_counter() - t1
    if cfg.get("fvu_samples"):
        x = mix.sample(cfg["fvu_samples"], seed=123)
        out["fvu"] = fidelity(mlp, res, x)["fvu"]
    rows = [out]
    if method == "quadratic_exact" and K > 1:
        # the next checkpoint: the same network after a small update (1 % relative weight change),
        # warm-started from the solution just computed, corrected by the change of the closed form
        g = torch.Generator(device=device).manual_seed(1)
        noise = lambda t: 1 + 0.01 * torch.randn(t.shape, generator=g, dtype=t.dtype, device=device)  # noqa: E731
        nxt = MLP(mlp.W1 * noise(mlp.W1), mlp.b1, mlp.W2 * noise(mlp.W2), mlp.b2, "relu")
        warm = {**cfg, "method": "quadratic_exact_warm", "d": mix.d, "mixture_source": raw["source"]}
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        res2 = quadratic_approximant(nxt, mix, method="exact", tol=cfg["tol"], max_iter=cfg["max_iter"], warm_start=res,
                                     warm_start_model=mlp, plan=plan, preconditioner=cfg.get("preconditioner", "joint_diagonal"),
                                     inner_dtype=inner)
        _record(warm, res2, t0, device)
        warm["product_seconds"] = out["product_seconds"]
        rows.append(warm)
    return rows


def _gaussian_degree(method: str) -> int | None:
    """n for a method ``gaussian_deg<n>``, else None."""
    tail = method.removeprefix("gaussian_deg")
    return int(tail) if tail != method and tail.isdigit() else None


def _pc_components(method: str) -> int | None:
    """p for a method ``cubic_pc<p>``, else None."""
    tail = method.removeprefix("cubic_pc")
    return int(tail) if tail != method and tail.isdigit() else None


def _record(out: dict, res, t0: float, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    out["seconds"] = time.perf_counter() - t0
    out["peak_mb"] = _peak_mb(device)
    info = res.fit_info
    out["iterations"] = info.get("iterations")
    out["residual"] = info.get("residual")
    out["converged"] = info.get("converged")
    out["start"] = info.get("start")
    hist = info.get("residual_history") or [None]
    out["initial_residual"] = hist[0]
    out["inner_dtype"] = info.get("inner_dtype", "")
    out["deflated"] = info.get("deflated", "")
    if info.get("coarse_dimension"):
        out["deflated"] = f"{out['deflated']} + {info['coarse_dimension']}"
    if info.get("seconds_by_part"):
        out["seconds_by_part"] = info["seconds_by_part"]
        out["true_residuals"] = info.get("true_residuals")


def main(argv=None):
    from polyinterp.approx.solvers.precision import INNER_DTYPES

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hidden", type=int, nargs="+", default=[256, 512])
    ap.add_argument("--K", type=int, nargs="+", default=[1, 10])
    ap.add_argument("--methods", nargs="+",
                    default=["linear", "quadratic_exact", "quadratic_sgd"],
                    help="quadratic_exact with K > 1 also times a warm start (row quadratic_exact_warm); "
                         "gaussian_deg<n> (e.g. gaussian_deg4): the degree-n polynomial under one Gaussian, K = 1 only; "
                         "cubic_pc<p> (e.g. cubic_pc50): the mixture quadratic and cubic on p principal components")
    ap.add_argument("--devices", nargs="+", default=None, help="default: cpu, and cuda when available")
    ap.add_argument("--mixture", default=str(DEFAULT_MIXTURE))
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--basis", default="newton", choices=list(BASIS_METHODS),
                    help="the solver plan's joint-diagonal basis: newton (log-det quasi-Newton steps), jacobi (the sweeps below)")
    ap.add_argument("--newton-iterations", type=int, default=NEWTON_ITERATIONS, help="--basis newton: the most steps")
    ap.add_argument("--jd-sweeps", type=int, default=2, help="--basis jacobi: Jacobi sweeps of the solver plan (once per mixture)")
    ap.add_argument("--logdet-sweeps", type=int, default=LOGDET_SWEEPS,
                    help="--basis jacobi: log-det Jacobi sweeps of the solver plan after --jd-sweeps (0: none)")
    ap.add_argument("--preconditioner", default="joint_diagonal", choices=["joint_diagonal", "moment_matched"])
    ap.add_argument("--deflation-steps", type=int, default=120, help="Lanczos steps of the plan's deflation (0: none)")
    ap.add_argument("--coarse-ritz", type=int, default=COARSE_RITZ,
                    help="lowest Ritz vectors whose leading directions span the plan's coarse space (0: none)")
    ap.add_argument("--coarse-rank", type=int, default=COARSE_RANK, help="leading directions from each of those Ritz vectors")
    ap.add_argument("--inner-dtype", default="auto", choices=sorted(INNER_DTYPES), help="precision inside PCG")
    ap.add_argument("--replace-factor", type=float, default=None,
                    help="reliable updates of the exact quadratic: a float64 residual once the recursive one fell by "
                         "this factor (default: quadratic_mixture.REPLACE_FACTOR for the inner precision)")
    ap.add_argument("--max-iter", type=int, default=500)
    ap.add_argument("--pc-tol", type=float, default=1e-8, help="relative residual of the cubic_pc<p> normal equations")
    ap.add_argument("--pc-inner-dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--sgd-steps", type=int, default=200)
    ap.add_argument("--sgd-batch", type=int, default=256)
    ap.add_argument("--fvu-samples", type=int, default=0, help="also report the FVU on this many mixture samples")
    ap.add_argument("--ridge", type=float, default=None,
                    help="the mixture's ridge, × its mean within-class variance (default: the file's)")
    ap.add_argument("--load", type=int, default=0, help="also measure with this many CPU-bound processes running")
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    ap.add_argument("--loaded-only", action="store_true", help="with --load: skip the measurement without the load")
    ap.add_argument("--json", default=None, help="also write the rows as JSON lines here")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        for row in run_one(json.loads(args.one)):
            print("RESULT " + json.dumps(row))
        return
    devices = args.devices or (["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])
    rows = []
    env = dict(os.environ)
    gauss = any(_gaussian_degree(m) is not None or _pc_components(m) is not None for m in args.methods)
    print("| load | device | h | K | ridge | method | seconds | plan s (once per mixture) | product s | × product "
          "| threads | peak MB | CG its | inner | deflated | residual | conv. | seconds by part |"
          + (" FVU |" if args.fvu_samples else "")
          + (" exact FVU | FVU s | eval s (10⁴ inputs) |" if gauss else ""))
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if args.fvu_samples else "")
          + ("---|---|---|" if gauss else ""))
    for load in (([] if args.loaded_only else [0]) + [args.load] if args.load else [0]):
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(load)]
        try:
            rows += _measure(args, devices, env, gauss, load)
        finally:
            for p in busy:
                p.kill()
                p.wait()
    if args.json:
        Path(args.json).write_text("".join(json.dumps(r) + "\n" for r in rows))


def _measure(args, devices, env, gauss: bool, load: int) -> list[dict]:
    rows = []
    for device in devices:
        for h in args.hidden:
            for K in args.K:
                for method in args.methods:
                    if _gaussian_degree(method) is not None and K != 1:
                        continue  # one Gaussian only
                    cfg = {"device": device, "h": h, "K": K, "method": method, "tol": args.tol,
                           "max_iter": args.max_iter, "sgd_steps": args.sgd_steps, "sgd_batch": args.sgd_batch,
                           "mixture": args.mixture, "fvu_samples": args.fvu_samples,
                           "basis": args.basis, "newton_iterations": args.newton_iterations,
                           "jd_sweeps": args.jd_sweeps, "logdet_sweeps": args.logdet_sweeps,
                           "preconditioner": args.preconditioner,
                           "deflation_steps": args.deflation_steps, "inner_dtype": args.inner_dtype,
                           "coarse_ritz": args.coarse_ritz, "coarse_rank": args.coarse_rank,
                           "replace_factor": args.replace_factor,
                           "ridge": args.ridge, "threads": args.threads,
                           "pc_tol": args.pc_tol, "pc_inner_dtype": args.pc_inner_dtype}
                    proc = subprocess.run([sys.executable, __file__, "--one", json.dumps(cfg)], capture_output=True,
                                          text=True, env=env)
                    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
                    if proc.returncode or not lines:
                        print(f"| {load} | {device} | {h} | {K} | {args.ridge or 'file'} | {method} | failed: "
                              f"{proc.stderr.strip()[-300:]} |",
                              flush=True)
                        continue
                    for ln in lines:
                        r = {**json.loads(ln[7:]), "load": load}
                        rows.append(r)
                        _print_row(r, args.fvu_samples, gauss)
    return rows


def _print_row(r: dict, fvu_samples: int, gauss: bool = False) -> None:
    method = r["method"]
    res = r["residual"]
    res_s = "" if res is None or (isinstance(res, float) and math.isnan(res)) else f"{res:.1e}"
    its = r["iterations"] if method != "quadratic_sgd" else f"{r['iterations']} steps"
    conv = r["converged"] if r["converged"] is not None else ""
    fvu = f" {r['fvu']:.4f} |" if fvu_samples and "fvu" in r else (" |" if fvu_samples else "")
    plan = f"{r['plan_seconds']:.1f}" if "plan_seconds" in r else ""
    if gauss:
        fvu += (f" {r['exact_fvu']:.4f} | {r['fvu_seconds']:.2f} | {r['eval_seconds']:.3f} |" if "exact_fvu" in r
                else " | | |")
    prod = r.get("product_seconds")
    prod_s, ratio = (f"{prod:.2f}", f"{r['seconds'] / prod:.1f}") if prod else ("", "")
    ridge = "file" if r.get("ridge") is None else f"{r['ridge']:g}"
    threads = f"{r.get('threads', '')}"
    print(f"| {r.get('load', 0)} | {r['device']} | {r['h']} | {r['K']} | {ridge} | {method} | {r['seconds']:.2f} | {plan} "
          f"| {prod_s} | {ratio} | {threads} | {r['peak_mb']:.0f} | {its} | "
          f"{r.get('inner_dtype') or ''} | {r.get('deflated', '')} | {res_s} | {conv} | {_parts(r)} |" + fvu, flush=True)


def _parts(r: dict) -> str:
    """The solve's (and the plan's) seconds by part, e.g. ``setup 9.1 (coarse 7.0), rhs 1.2, …; plan: …``."""
    parts = r.get("seconds_by_part") or {}
    items = []
    for k, v in parts.items():
        if k == "setup" and parts.get("coarse_setup"):
            items.append(f"setup {v:.1f} (coarse {parts['coarse_setup']:.1f})")
        elif k == "true_residuals" and r.get("true_residuals"):
            # the count includes the start's residual, whose time is in "start"
            items.append(f"float64 residuals ({r['true_residuals']} in all) {v:.1f}")
        elif k != "coarse_setup":
            items.append(f"{k} {v:.1f}")
    out = ", ".join(items)
    plan = r.get("plan_seconds_by_part") or {}
    if plan:
        out += "; plan: " + ", ".join(f"{k} {v:.1f}" for k, v in plan.items())
    return out

if __name__ == "__main__":
    main()
