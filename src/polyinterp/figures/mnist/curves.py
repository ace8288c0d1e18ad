"""The approximants over training, from the metrics table: FVU and KL panels, mean and min–max band
over seeds. fig2 (the paper's figure 2): the linear and the quadratic approximant under the Gaussian
mixture, the exact fit solid and the paper's SGD fit dashed; fig3: the same on the MNIST test images;
fig_fits: the fits under the moment-matched single Gaussian beside the mixture's; fig_degrees: the
degrees beyond the paper (principal-component fits, degree-n forms under the moment-matched Gaussian)."""

from __future__ import annotations

from dataclasses import dataclass

from matplotlib.lines import Line2D

from polyinterp.figures.style import approximant_color, approximant_label, legends_below, run_title
from polyinterp.io import load_parquet, save_figure

METRICS = {"fvu": "FVU (fraction of variance unexplained)", "kl": "KL(softmax f ‖ softmax g)"}
DISTRIBUTIONS = {"mixture": "under the Gaussian mixture", "test": "on the MNIST test images"}


@dataclass(frozen=True)
class Series:
    """One line of a curves figure: an approximant fitted under ``fit``, drawn in ``style``."""

    approximant: str
    fit: str = "mixture"
    style: str = "-"
    label: str | None = None
    marker: str = "o"

    @property
    def text(self) -> str:
        return self.label or approximant_label(self.approximant, self.fit)


PAPER = (Series("linear"), Series("quadratic"), Series("quadratic_sgd", style="--", marker="s"))
FITS = (Series("linear", label="linear, fitted under the mixture"),
        Series("linear", "gaussian", "--", "linear, fitted under the single Gaussian"),
        Series("quadratic", label="quadratic, fitted under the mixture (exact)"),
        Series("quadratic", "gaussian", "--", "quadratic, fitted under the single Gaussian (exact)"))


def fvu_figure(*, metrics: str, out: list[str], params: dict) -> list[dict]:
    """fig2, the paper's figure 2: FVU and KL of the linear and the quadratic approximant (and the
    paper's SGD fit of the quadratic where the table has it) under the Gaussian mixture, the FVU exact
    (see :func:`curves_figure`)."""
    return curves_figure(metrics, "mixture", PAPER, out, params.get("run"),
                         "the linear and the quadratic approximant over training, under the Gaussian mixture")


def test_images_figure(*, metrics: str, out: list[str], params: dict) -> list[dict]:
    """fig3: fig2's approximants on the MNIST test images (see :func:`curves_figure`)."""
    return curves_figure(metrics, "test", PAPER, out, params.get("run"),
                         "the linear and the quadratic approximant over training, on the MNIST test images")


def fits_figure(*, metrics: str, out: list[str], params: dict) -> list[dict]:
    """fig_fits: the linear and the quadratic approximant fitted under the class mixture (solid) and
    under its moment-matched single Gaussian (dashed), both measured under the mixture (see
    :func:`curves_figure`)."""
    return curves_figure(metrics, "mixture", FITS, out, params.get("run"),
                         "fitted under the class mixture or under one moment-matched Gaussian")


def degree_series(metrics) -> tuple[Series, ...]:
    """fig_degrees' lines: the exact quadratic (the reference), each principal-component fit and each
    degree-n form under the moment-matched Gaussian that ``metrics`` has."""
    from polyinterp.figures.style import _degree_form

    names = sorted({n for n in metrics.approximant.unique() if _degree_form(n)},
                   key=lambda n: (_degree_form(n)[0] == "gaussian", _degree_form(n)))
    return (Series("quadratic", label="quadratic (exact, the paper's)"),
            *(Series(n, "gaussian" if n.startswith("gaussian_deg") else "mixture",
                     ":" if n.startswith("gaussian_deg") else "-") for n in names))


def degrees_figure(*, metrics: str, out: list[str], params: dict) -> list[dict]:
    """fig_degrees: the exact quadratic beside the degrees beyond the paper, under the Gaussian mixture
    (see :func:`curves_figure`; the degree-n forms are Monte Carlo, the others exact)."""
    table = load_parquet(metrics)
    return curves_figure(table, "mixture", degree_series(table), out, params.get("run"),
                         "beyond degree 2: principal-component and single-Gaussian polynomial fits")


def _face(series: Series, color: str) -> str:
    """Filled points, open ones for a marker other than the default (the SGD fit's squares)."""
    return color if series.marker == "o" else "white"


def _values(sub, metric: str, distribution: str, series: Series):
    """The rows a line is drawn from, and their distribution: under the mixture the exact FVU where the
    table has it, else the Monte-Carlo values."""
    rows = sub[(sub.metric == metric) & (sub.approximant == series.approximant) & (sub.fit == series.fit)]
    if distribution == "mixture" and (rows.distribution == "mixture_exact").any():
        distribution = "mixture_exact"
    return rows[rows.distribution == distribution], distribution


def _how(lines, model, metric, distribution) -> str:
    """How a mixture panel's values were measured: exact, Monte Carlo or both (by line)."""
    if distribution != "mixture":
        return ""
    kinds = {ln["distribution"] for ln in lines if ln["model"] == model and ln["metric"] == metric}
    if kinds == {"mixture_exact"}:
        return " (exact)"
    return " (Monte Carlo)" if kinds == {"mixture"} else " (exact; Monte Carlo where marked)"


def curves_figure(metrics, distribution: str, series, out_paths, run: str | None, what: str) -> list[dict]:
    """One row per model (``mnist.models``), two columns: FVU and KL on ``distribution`` (``mixture``
    or ``test``), one line per entry of ``series`` that the table has, in its style and its
    approximant's colour: the mean over seeds at each step > 0, with points, and the min–max band over
    seeds; both axes log (log₂ steps). The legend is below the panels. ``metrics``: the table or its
    path. Returns what was drawn: dicts with model, metric, distribution (``mixture_exact``,
    ``mixture`` or ``test``), approximant, fit, step, mean, min, max (lists) and n_seeds."""
    import matplotlib.pyplot as plt

    df = load_parquet(metrics) if isinstance(metrics, str) else metrics
    df = df[df.approximant != "mlp"]
    models = list(dict.fromkeys(df.model))
    fig, axes = plt.subplots(len(models), 2, figsize=(11, 0.6 + 3.4 * len(models)), sharex=True, squeeze=False)
    lines, entries = [], {}
    for row, model in enumerate(models):
        sub = df[df.model == model]
        for ax, metric in zip(axes[row], METRICS):
            for s in series:
                rows, dist = _values(sub, metric, distribution, s)
                stats = rows[rows.step > 0].groupby("step")["value"].agg(["mean", "min", "max"]).reset_index()
                if not len(stats):
                    continue
                color = approximant_color(s.approximant)
                ax.plot(stats.step, stats["mean"], s.style, color=color, marker=s.marker, ms=3.5, mfc=_face(s, color))
                ax.fill_between(stats.step, stats["min"], stats["max"], color=color, alpha=0.2, lw=0)
                entries.setdefault(s.text, Line2D([], [], ls=s.style, color=color, marker=s.marker, ms=3.5,
                                                           mfc=_face(s, color)))
                lines.append({"model": model, "metric": metric, "distribution": dist, "approximant": s.approximant,
                              "fit": s.fit, "step": stats.step.tolist(), "mean": stats["mean"].tolist(),
                              "min": stats["min"].tolist(), "max": stats["max"].tolist(),
                              "n_seeds": int(rows.seed.nunique())})
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.grid(alpha=0.3, which="both")
            ax.set_ylabel(f"{METRICS[metric]}, log scale", fontsize=8)
            ax.set_title(f"{model}: {metric.upper()} {DISTRIBUTIONS[distribution]}"
                         f"{_how(lines, model, metric, distribution)}", fontsize=9)
    for ax in axes[-1]:
        ax.set_xlabel("training step (log₂ scale)")
    fig.suptitle(run_title(what, models=models, seeds=df.seed.unique(), run=run), fontsize=10)
    fig.tight_layout()
    legends_below(fig, [("line: mean over seeds; band: min–max over seeds", entries)])
    save_figure(fig, *out_paths)
    return lines
