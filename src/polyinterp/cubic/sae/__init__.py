"""The TopK sparse autoencoder on a hidden layer: the activations it reads, the autoencoder, several
autoencoders fitted side by side as one batched model, and latent activations on arbitrary inputs."""
