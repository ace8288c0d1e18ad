"""CLI subcommands of the MNIST study (``polyinterp mnist-<step>``); each calls one step function."""

from __future__ import annotations

import torch

from polyinterp.cli import add_params


def _threads(args) -> None:
    if args.threads:
        torch.set_num_threads(args.threads)


def _data(args):
    from polyinterp.mnist.data import acquire_step

    acquire_step(args.out, args.params)


def _mixture(args):
    from polyinterp.mnist.mixture import mixture_step

    _threads(args)
    mixture_step(args.data, args.out, args.params)


def _train(args):
    from polyinterp.mnist.train import train_step

    _threads(args)
    train_step(args.data, args.out, args.params)


def _approximants(args):
    from polyinterp.mnist.approximants import approximants_step

    _threads(args)
    approximants_step(args.ckpt, args.mixture, args.out, args.params, warm_start_path=args.warm_start,
                      plan_path=args.plan)


def _solver_plan(args):
    from polyinterp.mnist.approximants import solver_plan_step

    _threads(args)
    solver_plan_step(args.mixture, args.out, args.params)


def _metrics(args):
    from polyinterp.mnist.metrics import metrics_step

    _threads(args)
    metrics_step(args.ckpt, args.approx, args.mixture, args.data, args.out, args.params)


def _metrics_all(args):
    from polyinterp.mnist.metrics import aggregate_step

    aggregate_step(args.inputs, args.out)


def _ablation(args):
    from polyinterp.mnist.ablation import ablation_step

    _threads(args)
    ablation_step(args.ckpt, args.approx, args.data, args.out, args.examples, args.params)


def register(sub) -> None:
    def add(name, func, help_text):
        p = sub.add_parser(name, help=help_text)
        add_params(p)
        p.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch default)")
        p.set_defaults(func=func)
        return p

    p = add("mnist-data", _data, "acquire MNIST → results/data/mnist.npz")
    p.add_argument("--out", required=True)

    p = add("mnist-mixture", _mixture, "fit the class-conditional Gaussian mixture")
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)

    p = add("mnist-train", _train, "train the MLP and write its checkpoints")
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True, nargs="+", help="checkpoint paths, one per params['steps']")

    p = add("mnist-solver-plan", _solver_plan, "per-mixture precomputation of the exact quadratic's solver")
    p.add_argument("--mixture", required=True)
    p.add_argument("--out", required=True)

    p = add("mnist-approximants", _approximants, "linear + quadratic approximants of one checkpoint")
    p.add_argument("--ckpt", required=True)
    p.add_argument("--mixture", required=True)
    p.add_argument("--warm-start", default=None, help="previous checkpoint's approximants (CG warm start)")
    p.add_argument("--plan", default=None, help="solver plan of the mixture (mnist-solver-plan); built here when omitted")
    p.add_argument("--out", required=True)

    p = add("mnist-metrics", _metrics, "FVU / KL / accuracy of one checkpoint's approximants")
    p.add_argument("--ckpt", required=True)
    p.add_argument("--approx", required=True)
    p.add_argument("--mixture", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)

    p = add("mnist-metrics-all", _metrics_all, "concatenate the per-checkpoint metric tables")
    p.add_argument("--inputs", required=True, nargs="+")
    p.add_argument("--out", required=True)

    p = add("mnist-svd-ablation", _ablation, "SVD ablation attack on the configured checkpoints")
    p.add_argument("--ckpt", required=True, nargs="+")
    p.add_argument("--approx", required=True, nargs="+")
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--examples", required=True)
