"""What the SAE latents encode: landmark correlations, diagonal bands and their slope, the
band-threshold sensitivity, and whether a latent tracks the x range or the landmarks."""
