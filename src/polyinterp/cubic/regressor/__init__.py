"""The cubic regressor: the task (inputs and target), the network, its seeded training."""
