"""Closed-form linear and quadratic approximants of MLPs and GLUs under Gaussian mixtures.

Pure functions of weights and Gaussian parameters on torch tensors (any device, float64 by default);
no file I/O. Five layers, each importing only from itself and the ones before it: ``core`` (types),
``moments`` (Gaussian moments), ``solvers`` (the exact quadratic's linear algebra), ``fits`` (the
approximants), ``evaluate`` (FVU, KL, features); see docs/architecture.md. Public contract::

    from polyinterp.approx import (MLP, GLU, GaussianMixture, Approximant, linear_approximant,
                                   quadratic_approximant, fvu, kl_divergence)
"""

from polyinterp.approx.core.activations import ACTIVATIONS, Activation, get_activation
from polyinterp.approx.core.approximant import Approximant
from polyinterp.approx.core.errors import ApproxConvergenceError, ApproxInputError
from polyinterp.approx.core.mixture import GaussianMixture
from polyinterp.approx.core.mlp import GLU, MLP
from polyinterp.approx.core.principal_components import PrincipalComponents, principal_components
from polyinterp.approx.evaluate.features import (FeatureSummary, QuadraticFeatures, direction_variance_share,
                                                 feature_summary, linear_pattern, psd_sqrt, top_eigenpair,
                                                 whitened_quadratic_features)
from polyinterp.approx.evaluate.metrics import expected_inner, expected_sq_norm, fidelity, fvu, kl_divergence
from polyinterp.approx.fits.cubic_mixture import (ReducedPolynomialApproximant, reduced_polynomial_approximant,
                                                  reduced_polynomial_approximants)
from polyinterp.approx.fits.hermite_ridge import HermiteRidgeApproximant, gaussian_polynomial_approximant
from polyinterp.approx.fits.linear import linear_approximant, solve_covariance
from polyinterp.approx.fits.quadratic import ExactOptions, SGDOptions, quadratic_approximant
from polyinterp.approx.fits.quadratic_gaussian import quadratic_gaussian
from polyinterp.approx.moments.polynomial_basis import PolynomialBasis
from polyinterp.approx.moments.univariate import derivative_expectations, gaussian_moments, hermite_moments
from polyinterp.approx.solvers.solver_plan import SolverPlan

__all__ = [
    "HermiteRidgeApproximant", "gaussian_polynomial_approximant",
    "PolynomialBasis", "PrincipalComponents", "ReducedPolynomialApproximant", "principal_components",
    "reduced_polynomial_approximant", "reduced_polynomial_approximants",
    "ACTIVATIONS", "Activation", "ApproxConvergenceError", "ApproxInputError", "Approximant", "ExactOptions",
    "FeatureSummary", "GLU", "GaussianMixture", "MLP", "QuadraticFeatures", "SGDOptions", "SolverPlan",
    "derivative_expectations", "direction_variance_share", "expected_inner", "expected_sq_norm", "feature_summary",
    "fidelity", "fvu", "gaussian_moments", "get_activation", "hermite_moments", "kl_divergence", "linear_approximant",
    "linear_pattern", "psd_sqrt", "quadratic_approximant", "quadratic_gaussian", "solve_covariance", "top_eigenpair",
    "whitened_quadratic_features",
]
