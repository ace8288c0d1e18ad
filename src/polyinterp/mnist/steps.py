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
