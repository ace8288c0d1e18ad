"""The SAE pipeline on other views of the regressor: other hidden layers and earlier checkpoints,
regressors of other widths (capacity), one network per polynomial (the grid), and their summaries."""
