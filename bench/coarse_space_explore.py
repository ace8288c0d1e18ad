"""Exploration behind bench/README.md "A coarse space of cross forms": iterations of
the exact mixture quadratic (h = 256, K = 10, float32 products) with coarse spaces W S Wᵀ built from
(``--mode top``/``bottom``) each class's leading or trailing eigenvectors of QᵀM_kQ, ``--per-class`` of them,
or (``--mode ritz``) the leading directions of the lowest Ritz vectors of a ``--lanczos``-step Lanczos run
on the forms (``--configs steps:count:rank,...``). ``--pool 2`` is the 2 × 2-pooled d = 196 mixture. Not a
test; run from the repository root with the default mixture at /work/default_run (edit the path):

    PYTHONPATH=src python bench/coarse_space_explore.py --ridge 1e-4 --pool 1 --per-class "" --mode ritz \
        --lanczos 120 --f32 --configs 120:20:4,120:12:8
"""
import sys, time, torch
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src")); sys.path.insert(0, str(Path(__file__).resolve().parent))
from approximants import load_mixture
from pathlib import Path
from polyinterp.approx import MLP, GaussianMixture, SolverPlan
from polyinterp.approx.fits.quadratic_mixture import quadratic_mixture
from polyinterp.approx.solvers.mixture_preconditioner import second_moments
import argparse
ap = argparse.ArgumentParser()
ap.add_argument("--ridge", type=float, default=1e-4)
ap.add_argument("--pool", type=int, default=2)
ap.add_argument("--per-class", type=str, default="0,4,8")
ap.add_argument("--mode", default="top")
ap.add_argument("--lanczos", type=int, default=60)
ap.add_argument("--configs", default="60:10:4,60:20:4,120:20:4,120:20:8")
ap.add_argument("--f32", action="store_true")
a = ap.parse_args()
torch.set_num_threads(2)
raw = load_mixture(Path("/work/default_run/results/mnist/mixture.pt"), a.ridge)
means, covs = raw["means"].double(), raw["covs"].double()
if a.pool > 1:
    s = 28 // a.pool
    P = torch.zeros(s * s, 784, dtype=torch.float64)
    for i in range(28):
        for j in range(28):
            P[(i // a.pool) * s + j // a.pool, i * 28 + j] = 1.0 / a.pool**2
    means, covs = means @ P.T, P @ covs @ P.T
mix = GaussianMixture(raw["weights"], means, covs)
t = time.time()
plan = SolverPlan.build(mix, lanczos_steps=a.lanczos)
plan.coarse_factor = None  # each variant below sets its own coarse basis, which each fit then factors
print("d", mix.d, "plan", round(time.time() - t, 1), "deflated", plan.deflation[0].shape[0] if plan.deflation else 0, flush=True)
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(mix.d, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
mlp = MLP.from_module(net)
wmix = plan.whiten(mix)
_, M = second_moments(wmix)
Q = plan.basis
Mq = Q.T @ M @ Q
for c in [int(x) for x in a.per_class.split(",") if x]:
    if c == 0:
        plan.coarse_basis = None
    else:
        cols = []
        for k in range(Mq.shape[0]):
            ev, U = torch.linalg.eigh(Mq[k])
            cols.append(U[:, -c:] if a.mode == "top" else U[:, :c])
        cols.append(Q[0:1].T)  # the constant
        plan.coarse_basis = Q @ torch.cat(cols, 1)  # x̃ coordinates, as the plan stores it
    t = time.time()
    g = quadratic_mixture(mlp, mix, plan=plan, inner_dtype="float32", max_iter=1000)
    fi = g.fit_info
    print(f"per-class {c}: its {fi['iterations']} res {fi['residual']:.2e} s {time.time()-t:.1f} deflated {fi['deflated']}", flush=True)

if a.mode == "ritz":
    from polyinterp.approx.solvers.coarse_space import ritz_subspace
    from polyinterp.approx.solvers.deflation import lanczos
    from polyinterp.approx.solvers.form_operator import FormGramOperator
    from polyinterp.approx.solvers.mixture_preconditioner import MixturePreconditioner
    op = FormGramOperator(wmix, Q, product_dtype=torch.float32 if a.f32 else None)
    pc = MixturePreconditioner(wmix, Q, dtype=None).in_basis()
    n = Q.shape[0]
    start = torch.randn(1, n, n, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    runs = {}
    for cfg in a.configs.split(","):
        steps, nlow, rk = map(int, cfg.split(":"))
        if steps not in runs:
            t_l = time.time()
            runs[steps] = lanczos(op, pc, (0.5 * (start + start.transpose(1, 2)),), steps)
            print("lanczos", steps, "steps, s", round(time.time() - t_l, 1), flush=True)
        run = runs[steps]
        print(steps, "lowest ritz", [round(float(x), 4) for x in run.theta[:nlow + 2]])
        Wc = ritz_subspace(run.ritz_vectors(range(nlow))[0], rk, Q[0:1].T)[:, :100]
        plan.coarse_basis = Q @ Wc  # x̃ coordinates, as the plan stores it
        t = time.time()
        g = quadratic_mixture(mlp, mix, plan=plan, inner_dtype="float32", max_iter=1000)
        fi = g.fit_info
        print(f"ritz steps {steps} low {nlow} rank {rk} p {Wc.shape[1]}: its {fi['iterations']} res {fi['residual']:.2e} "
              f"s {time.time()-t:.1f} coarse {fi['coarse_dimension']}", flush=True)
