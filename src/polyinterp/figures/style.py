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
