"""Interventions on SAE latents: clamping one latent, joint clamping, and whether a clamped curve is a
stretch or a shift."""
