"""Shared matplotlib setup: a non-interactive backend and the colours of each approximant."""

import matplotlib

matplotlib.use("Agg")

COLORS = {"mlp": "black", "linear": "tab:blue", "quadratic": "tab:orange", "quadratic_sgd": "tab:orange",
          "random": "tab:gray"}
LABELS = {"mlp": "MLP", "linear": "linear", "quadratic": "quadratic (exact)",
          "quadratic_sgd": "quadratic (SGD, paper)", "random": "random directions"}
