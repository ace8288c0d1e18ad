"""The TopK sparse autoencoder on a hidden layer: the activations it reads, the autoencoder, and latent
activations on arbitrary inputs."""
