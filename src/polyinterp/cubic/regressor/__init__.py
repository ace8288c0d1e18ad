"""The cubic regressor: the task (inputs and target), the network, its seeded training, and copies of
one network trained side by side as one batched model (the single-polynomial grid)."""
