# Study 2: cubic regressor -> activations -> SAE -> landmarks -> slope search -> clamping.
