"""Closed-form linear and quadratic approximants of MLPs and GLUs under Gaussian mixtures.

The one entry is :func:`approximate` (any model the library reads, any supported degree, a frozen
:class:`Approximation` with its exact FVU); docs/library.md shows it on a small network.

Pure functions of weights and Gaussian parameters on torch tensors (any device, float64 by default);
no file I/O. Five layers, each importing only from itself and the ones before it: ``core`` (types),
``moments`` (Gaussian moments), ``solvers`` (the exact quadratic's linear algebra), ``fits`` (the
approximants), ``evaluate`` (FVU, KL, features); see docs/architecture.md. Public contract::

    from polyinterp.approx import (approximate, Approximation, FVUEstimate, MLP, GLU, GaussianMixture,
                                   Approximant, linear_approximant, quadratic_approximant, exact_fvu, fvu,
                                   kl_divergence)
"""

from polyinterp.approx.core.activations import ACTIVATIONS, Activation, get_activation
from polyinterp.approx.core.approximant import Approximant
from polyinterp.approx.core.errors import ApproxConvergenceError, ApproxInputError
from polyinterp.approx.core.mixture import GaussianMixture
from polyinterp.approx.core.mlp import GLU, MLP, SUPPORTED_MODELS, as_model, glu_from_linears
from polyinterp.approx.evaluate.approximate import (FVU_DEFINITIONS, Approximation, FVUEstimate, OutputMoments,
                                                    approximate)
from polyinterp.approx.evaluate.exact_fvu import exact_fvu
from polyinterp.approx.core.principal_components import PrincipalComponents, principal_components
from polyinterp.approx.evaluate.features import (FeatureSummary, QuadraticFeatures, direction_variance_share,
                                                 feature_summary, linear_pattern, psd_sqrt, top_eigenpair,
                                                 whitened_quadratic_features)
from polyinterp.approx.evaluate.metrics import (expected_inner, expected_sq_norm, fidelity, fvu, fvu_and_se,
                                                fvu_flat_and_se, fvu_uncentred_and_se, kl_divergence)
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
    "FVU_DEFINITIONS", "Approximation", "FVUEstimate", "OutputMoments", "SUPPORTED_MODELS", "approximate",
    "as_model", "exact_fvu", "fvu_and_se", "fvu_flat_and_se", "fvu_uncentred_and_se", "glu_from_linears",
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
