"""The approximants: linear, quadratic (Gaussian closed form, exact under the mixture, the SGD
baseline), the Hermite ridge of any degree under one Gaussian, and polynomials on principal
components. Imports core, moments, solvers and its own modules."""
