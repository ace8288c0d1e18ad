"""CLI subcommands of the cubic-regressor study (``polyinterp cubic-<step>``); each calls one step function.

Heavy modules are imported inside the subcommand functions so that ``polyinterp --help`` stays fast.
"""

from __future__ import annotations

from polyinterp.cli import add_params


def _threads(args) -> None:
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)


def _train(args):
    from polyinterp.cubic.train import train_step

    _threads(args)
    train_step(args.model, args.checkpoints, args.curve, args.fit, args.curves, args.params)


def _activations(args):
    from polyinterp.cubic.activations import activations_step

    _threads(args)
    activations_step(args.model, args.out, args.params)


def _sae(args):
    from polyinterp.cubic.sae import sae_step

    _threads(args)
    sae_step(args.acts, args.model, args.out, args.metrics, args.latents, args.curve, args.params)


def _landmarks(args):
    from polyinterp.cubic.landmarks import landmarks_step

    _threads(args)
    landmarks_step(args.model, args.sae, args.out, args.ranking, args.params)


def _bands(args):
    from polyinterp.cubic.bands import bands_step

    _threads(args)
    bands_step(args.model, args.sae, args.slices, args.out, args.grid, args.params)


def _slopes(args):
    from polyinterp.cubic.bands import slopes_step

    _threads(args)
    slopes_step(args.acts, args.sae, args.bands, args.scan, args.out, args.params)


def _clamp(args):
    from polyinterp.cubic.clamping import clamp_step

    _threads(args)
    clamp_step(args.model, args.sae, args.slopes, args.out, args.summary, args.params)


def _summary(args):
    from polyinterp.cubic.summary import summary_step

    summary_step(args.fit, args.sae, args.slopes, args.out, args.slopes_seeds, args.slopes_spread)


def _fig_fit(args):
    from polyinterp.figures.cubic_fit import plot

    plot(args.curves, args.train_curves, args.fit, args.out)


def _fig_landmarks(args):
    from polyinterp.figures.cubic_landmarks import plot

    plot(args.table, args.ranking, args.out, top=int(args.params.get("top", 3)))


def _fig_bands(args):
    from polyinterp.figures.cubic_bands import plot

    plot(args.grid, args.bands, args.slopes, args.out, max_latents=int(args.params.get("max_latents", 6)))


def _fig_slopes(args):
    from polyinterp.figures.cubic_slopes import plot

    plot(args.scan, args.slopes, args.seeds, args.out)


def _fig_clamp(args):
    from polyinterp.figures.cubic_clamp import plot

    plot(args.curves, args.summary, args.out, max_latents=int(args.params.get("max_latents", 4)))


def register(sub) -> None:
    def add(name, func, help_text, *options):
        p = sub.add_parser(name, help=help_text)
        add_params(p)
        p.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch default)")
        for opt in options:
            many = opt.endswith("+")
            p.add_argument(f"--{opt.rstrip('+')}", required=True, nargs="+" if many else None)
        p.set_defaults(func=func)
        return p

    add("cubic-train", _train, "train the cubic regressor (model, eval checkpoints, curves, fit tables)",
        "model", "checkpoints", "curve", "fit", "curves")
    add("cubic-activations", _activations, "last-hidden-layer activations on fresh train/held-out inputs",
        "model", "out")
    add("cubic-sae", _sae, "fit the TopK SAE and score it on the held-out activations",
        "acts", "model", "out", "metrics", "latents", "curve")
    add("cubic-landmarks", _landmarks, "latent vs root/critical/inflection bump correlations over (a, b)",
        "model", "sae", "out", "ranking")
    add("cubic-bands", _bands, "detect diagonal-band latents over (x, a) at fixed b", "model", "sae", "slices", "out", "grid")
    add("cubic-slopes", _slopes, "slope search over c for x + c·a per latent", "acts", "sae", "bands", "scan", "out")
    add("cubic-clamp", _clamp, "clamp SAE latents and record the regressor's output curves",
        "model", "sae", "slopes", "out", "summary")
    add("cubic-summary", _summary, "headline numbers and slope spread across seeds",
        "fit+", "sae+", "slopes+", "out", "slopes-seeds", "slopes-spread")
    add("cubic-fig-fit", _fig_fit, "figure: learned vs true cubics, training curves",
        "curves", "train-curves+", "fit+", "out+")
    add("cubic-fig-landmarks", _fig_landmarks, "figure: landmark-correlation heat maps", "table", "ranking", "out+")
    add("cubic-fig-bands", _fig_bands, "figure: band latents over (x, a)", "grid", "bands", "slopes", "out+")
    add("cubic-fig-slopes", _fig_slopes, "figure: slope-search R² vs c", "scan", "slopes+", "seeds", "out+")
    add("cubic-fig-clamp", _fig_clamp, "figure: clamping curves", "curves", "summary", "out+")
