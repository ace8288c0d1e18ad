"""Fidelity of an approximant: FVU (exact under the mixture and sampled), KL, and feature images.
Imports every layer above and its own modules."""
