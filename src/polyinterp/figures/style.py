"""Shared matplotlib setup: a non-interactive backend and the colours of each approximant."""

import matplotlib

matplotlib.use("Agg")

COLORS = {"mlp": "black", "linear": "tab:blue", "quadratic": "tab:orange", "quadratic_sgd": "tab:orange",
          "random": "tab:gray"}
LABELS = {"mlp": "MLP", "linear": "linear", "quadratic": "quadratic (exact)",
          "quadratic_sgd": "quadratic (SGD, paper)", "random": "random directions"}

# The higher-degree approximants (polyinterp.mnist.degrees.approximants): gaussian_deg{n} in shades of
# green by degree, the principal-component fits in purple (quadratic) and red (cubic).
_GAUSSIAN_SHADES = ("#a1d99b", "#74c476", "#41ab5d", "#238b45", "#006d2c", "#00441b")
_PC_FITS = {"quadratic": ("tab:purple", "quadratic"), "cubic": ("tab:red", "cubic")}


def _degree_form(name: str):
    """("gaussian", n) or (kind, p) for a higher-degree approximant name, else None."""
    import re

    m = re.fullmatch(r"gaussian_deg(\d+)", name)
    if m:
        return "gaussian", int(m.group(1))
    m = re.fullmatch(r"(quadratic|cubic)_pc(\d+)", name)
    return (m.group(1), int(m.group(2))) if m else None


def _style(name: str) -> tuple[str, str]:
    """(colour, legend label) of an approximant: the fixed names, then the higher-degree forms."""
    if name in COLORS:
        return COLORS[name], LABELS[name]
    form = _degree_form(name)
    if form is None:
        raise KeyError(f"no colour or label for approximant {name!r}")
    kind, n = form
    if kind == "gaussian":
        return (_GAUSSIAN_SHADES[min(n, len(_GAUSSIAN_SHADES)) - 1],
                f"degree {n}, moment-matched Gaussian (Monte Carlo)")
    return _PC_FITS[kind][0], f"{_PC_FITS[kind][1]} (exact) on {n} PCs"


def approximant_color(name: str) -> str:
    """The colour of an approximant in every figure."""
    return _style(name)[0]


def approximant_label(name: str, fit: str = "mixture") -> str:
    """The legend label of an approximant (``fit``: the distribution it was fitted under, a column of
    the metrics table; the single-Gaussian refits of linear / quadratic say so)."""
    from polyinterp.mnist.metrics import is_single_gaussian_refit

    return f"{name} (exact, Gaussian fit)" if is_single_gaussian_refit(name, fit) else _style(name)[1]


# ------------------------------------------------------------------------------ legends and titles
MAX_LEGEND_ENTRIES = 8  # a reader can match at most this many entries of one legend to its lines


def legend_below(fig, entries: dict, *, title: str | None = None, ncol: int | None = None):
    """One figure legend of ``entries`` (label → handle, at most :data:`MAX_LEGEND_ENTRIES`) below every
    axes of ``fig``: it is anchored under the lowest axes' bottom edge, so it covers no plotted data.
    Call it after the axes are laid out (``tight_layout`` or ``subplots_adjust``); ``save_figure``
    saves with ``bbox_inches="tight"`` and so keeps it in the image. Raises ValueError on too many
    entries (split them by what they encode: colour, line style)."""
    if len(entries) > MAX_LEGEND_ENTRIES:
        raise ValueError(f"{len(entries)} legend entries in one legend; at most {MAX_LEGEND_ENTRIES}: split them")
    fig.canvas.draw()  # the axes' final positions, tick labels included
    renderer = fig.canvas.get_renderer()
    bottom = min(ax.get_tightbbox(renderer).y0 for ax in fig.axes if ax.get_visible())
    y = fig.transFigure.inverted().transform((0, bottom))[1]
    return fig.legend(list(entries.values()), list(entries.keys()), loc="upper center", bbox_to_anchor=(0.5, y),
                      ncol=ncol or min(len(entries), 4), fontsize=8, title=title, title_fontsize=8, frameon=False)


def legends_below(fig, groups: list[tuple[str | None, dict]]) -> list:
    """Several figure legends below the axes of ``fig``, one under the other: ``groups`` is a list of
    (title, entries) as for :func:`legend_below`, a group of more than :data:`MAX_LEGEND_ENTRIES`
    in several legends; empty groups are left out. Returns the legends."""
    legends = []
    chunks = []
    for title, entries in groups:  # a group of more than MAX_LEGEND_ENTRIES entries in several legends
        items = list(entries.items())
        for i in range(0, len(items), MAX_LEGEND_ENTRIES):
            chunks.append((title if i == 0 else None, dict(items[i:i + MAX_LEGEND_ENTRIES])))
    for title, entries in chunks:
        if not entries:
            continue
        if legends:  # the next one under the previous legend
            fig.canvas.draw()
            legends.append(_legend_under(fig, legends[-1], entries, title))
        else:
            legends.append(legend_below(fig, entries, title=title))
    return legends


def axes_entries(ax) -> dict:
    """An axes' labelled artists as legend entries (label → handle; a label repeated once)."""
    handles, labels = ax.get_legend_handles_labels()
    return dict(zip(labels, handles))


def panel_legends_below(fig, panels: list[tuple[str | None, object]]) -> list:
    """The legends of axes drawn as figure legends below every axes of ``fig`` (:func:`legends_below`):
    ``panels`` is a list of (title, axes), each axes' labelled artists one group under its title (a
    label repeated within a panel once). Call it after the layout, as :func:`legend_below`."""
    return legends_below(fig, [(title, axes_entries(ax)) for title, ax in panels])


def _legend_under(fig, above, entries: dict, title: str | None):
    if len(entries) > MAX_LEGEND_ENTRIES:
        raise ValueError(f"{len(entries)} legend entries in one legend; at most {MAX_LEGEND_ENTRIES}: split them")
    y = fig.transFigure.inverted().transform((0, above.get_window_extent().y0))[1]
    return fig.legend(list(entries.values()), list(entries.keys()), loc="upper center", bbox_to_anchor=(0.5, y),
                      ncol=min(len(entries), 4), fontsize=8, title=title, title_fontsize=8, frameon=False)


def seeds_text(seeds) -> str:
    """How many seeds a figure shows and which: 'seed 0' or '3 seeds (0, 1, 2)'."""
    seeds = sorted({int(s) for s in seeds})
    return f"seed {seeds[0]}" if len(seeds) == 1 else f"{len(seeds)} seeds ({', '.join(map(str, seeds))})"


def run_title(what: str, *, models, seeds, run: str | None) -> str:
    """A figure's title: what it shows, then the model(s), the run's training config (``run``, the
    rules' :func:`polyinterp.rules.run_label`; left out when None) and the seeds."""
    parts = [", ".join(dict.fromkeys(models)), run, seeds_text(seeds)]
    return f"{what}\n" + "; ".join(p for p in parts if p)
