"""The MNIST study's figures (fig1-fig6, fig_models); each reads tables and saved tensors only."""
