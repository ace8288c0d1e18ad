"""The exact quadratic's linear algebra: the Gram and form operators, preconditioners (whitening, joint
diagonalisation, log-det Newton), deflation, the coarse space, block PCG and the solver plan.
Imports core, moments and its own modules."""
