"""Gaussian moments: univariate and bivariate expectations of activations, Stein's lemma, polynomial
bases, Hermite Gram matrices and right-hand sides, and the network's output moments. Imports core
and its own modules."""
