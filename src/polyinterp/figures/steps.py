"""CLI subcommands of the MNIST figures (``polyinterp figure-<name>``); each reads tables and saved tensors only."""

from __future__ import annotations

from polyinterp.cli import add_params


def _fig1(args):
    from polyinterp.figures.mnist_features import plot_features

    plot_features(args.approx, args.metrics, args.params["digit"], args.out)


def _curves(metric):
    def run(args):
        from polyinterp.figures.mnist_curves import plot_metric_curves

        plot_metric_curves(args.metrics, metric, args.out)

    return run


def _fig4(args):
    from polyinterp.figures.mnist_ablation import plot_ablation_examples

    plot_ablation_examples(args.examples, args.out)


def _fig5(args):
    from polyinterp.figures.mnist_ablation import plot_ablation_accuracy

    plot_ablation_accuracy(args.table, args.out)


def register(sub) -> None:
    def add(name, func, help_text):
        p = sub.add_parser(name, help=help_text)
        add_params(p)
        p.add_argument("--out", required=True, nargs="+", help="figure files (.pdf, .png)")
        p.set_defaults(func=func)
        return p

    p = add("figure-fig1", _fig1, "linear coefficients and top quadratic eigenvector over training")
    p.add_argument("--approx", required=True, nargs="+")
    p.add_argument("--metrics", required=True)
    p = add("figure-fig2", _curves("fvu"), "FVU of the approximants over training")
    p.add_argument("--metrics", required=True)
    p = add("figure-fig3", _curves("kl"), "KL divergence of the approximants over training")
    p.add_argument("--metrics", required=True)
    p = add("figure-fig4", _fig4, "ablated test images")
    p.add_argument("--examples", required=True)
    p = add("figure-fig5", _fig5, "accuracy vs number of ablated directions")
    p.add_argument("--table", required=True)
