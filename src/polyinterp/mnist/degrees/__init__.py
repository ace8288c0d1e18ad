"""Approximants beyond degree 2 (rule mnist_degree_approximants): the Gaussian degree-n forms and the
principal-component quadratic and cubic, and the FVU-by-degree summary."""
