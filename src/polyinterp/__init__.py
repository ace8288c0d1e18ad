"""polyinterp: MLPs as polynomials and Cardano features in a cubic regressor, as a Snakemake pipeline."""

__version__ = "0.1.0"
