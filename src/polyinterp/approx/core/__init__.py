"""The library's core types: errors, the Gaussian mixture, the MLP and GLU, activations, the fitted
polynomial (Approximant), principal components, and the solvers' clock and iteration hooks. Imports
only its own modules (and polyinterp.errors)."""
