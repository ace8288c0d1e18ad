"""Closed-form linear and quadratic approximants of MLPs and GLUs under Gaussian mixtures.

Pure functions of weights and Gaussian parameters on torch tensors (any device, float64 by default);
no file I/O. Public contract::

    from polyinterp.approx import (MLP, GLU, GaussianMixture, Approximant, linear_approximant,
                                   quadratic_approximant, fvu, kl_divergence)
"""

from polyinterp.approx.activations import ACTIVATIONS, Activation, get_activation
from polyinterp.approx.approximant import Approximant
from polyinterp.approx.errors import ApproxConvergenceError, ApproxInputError
from polyinterp.approx.features import (FeatureSummary, QuadraticFeatures, direction_variance_share, feature_summary,
                                        linear_pattern, psd_sqrt, top_eigenpair, whitened_quadratic_features)
from polyinterp.approx.cubic_mixture import (ReducedPolynomialApproximant, reduced_polynomial_approximant,
                                             reduced_polynomial_approximants)
from polyinterp.approx.hermite_ridge import HermiteRidgeApproximant, gaussian_polynomial_approximant
from polyinterp.approx.linear import linear_approximant, solve_covariance
from polyinterp.approx.metrics import expected_inner, expected_sq_norm, fidelity, fvu, kl_divergence
from polyinterp.approx.mixture import GaussianMixture
from polyinterp.approx.mlp import GLU, MLP
from polyinterp.approx.polynomial_basis import PolynomialBasis
from polyinterp.approx.principal_components import PrincipalComponents, principal_components
from polyinterp.approx.quadratic import ExactOptions, SGDOptions, quadratic_approximant
from polyinterp.approx.quadratic_gaussian import quadratic_gaussian
from polyinterp.approx.solver_plan import SolverPlan
from polyinterp.approx.univariate import derivative_expectations, gaussian_moments, hermite_moments

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
