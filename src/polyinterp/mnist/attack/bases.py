"""The distributions whose linear approximant defines the SVD attack's directions.

Each basis names a Gaussian (mixture) in the preprocessed pixel coordinates; the attack removes the
top right singular vectors of the β of the network's exact linear approximant under it:

- ``mixture``: the class mixture (one Gaussian per digit) the study fits everything under; β is the
  ``linear`` approximant saved by rule ``mnist_approximants``.
- ``gaussian``: the mixture's moment-matched single Gaussian N(μ̄, Σ̄) (same mean and covariance).
- ``standard_normal``: N(0, I), the paper authors' choice (their code, EleutherAI/polyapprox); for a
  ReLU MLP β = W₂ diag(Φ(b₁ᵢ/‖w₁ᵢ‖)) W₁.
"""

from __future__ import annotations

import torch

from polyinterp.approx import Approximant, GaussianMixture, linear_approximant
from polyinterp.errors import ConfigError

BASES = ("mixture", "gaussian", "standard_normal")


def check_bases(bases) -> list[str]:
    """The configured basis names, refused by name when unknown or repeated."""
    bases = list(bases)
    unknown = [b for b in bases if b not in BASES]
    if unknown:
        raise ConfigError(f"config key 'mnist.ablation.bases' has unknown basis {unknown[0]!r}; use any of {list(BASES)}.")
    if len(set(bases)) != len(bases) or not bases:
        raise ConfigError(f"config key 'mnist.ablation.bases' must list distinct bases, got {bases}.")
    return bases


def present_bases(names) -> list[str]:
    """The bases among ``names`` (e.g. a table's ``basis`` column), in the order of :data:`BASES`."""
    present = set(names)
    return [b for b in BASES if b in present]


def basis_model_name(basis: str) -> str:
    """Name, in the attack table's ``model`` column, of the linear approximant that defines ``basis``."""
    return "linear" if basis == "mixture" else f"linear_{basis}"


def basis_distribution(basis: str, mixture: GaussianMixture) -> GaussianMixture:
    """The Gaussian (mixture) of ``basis``, on the mixture's device and dtype."""
    if basis == "mixture":
        return mixture
    if basis == "gaussian":
        return mixture.moment_matched()
    if basis == "standard_normal":
        kw = dict(dtype=mixture.dtype, device=mixture.device)
        return GaussianMixture.single(torch.zeros(mixture.d, **kw), torch.eye(mixture.d, **kw), **kw)
    check_bases([basis])
    raise AssertionError("unreachable")


def basis_approximants(mlp, mixture: GaussianMixture, mixture_linear: Approximant,
                       bases: list[str]) -> dict[str, Approximant]:
    """basis → the exact linear approximant of ``mlp`` (a :class:`polyinterp.approx.MLP`) under it;
    ``mixture_linear`` (already fitted by rule ``mnist_approximants``) is reused for ``mixture``."""
    out = {}
    for basis in check_bases(bases):
        out[basis] = mixture_linear if basis == "mixture" else linear_approximant(mlp, basis_distribution(basis, mixture))
    return out
