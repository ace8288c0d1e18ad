"""The SVD ablation attack (rule mnist_svd_ablation and its summary): the bases whose linear
approximant's directions are removed, the checkpoints attacked, the attack itself and its strength
over training."""
