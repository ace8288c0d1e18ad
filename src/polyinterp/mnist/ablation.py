"""SVD ablation attack: project test images off the top-k right singular vectors of the linear
approximant's coefficient matrix and measure the accuracy of the MLP and its approximants.
Control: the same with k random orthonormal directions (seeded, several draws).

Table schema (see README "Tables"):
    seed int64, step int64, k int64, directions str {svd, random}, draw int64 (0 for svd),
    model str {mlp, linear, quadratic, quadratic_sgd}, accuracy float64
"""

from __future__ import annotations

import pandas as pd
import torch

from polyinterp.device import resolve_device
from polyinterp.io import load_torch, save_parquet, save_torch
from polyinterp.mnist.approximants import load_approximants
from polyinterp.mnist.data import load_mnist
from polyinterp.mnist.model import load_mlp
from polyinterp.mnist.preprocess import apply_preprocess

COLUMNS = {"seed": "int64", "step": "int64", "k": "int64", "directions": "string", "draw": "int64",
           "model": "string", "accuracy": "float64"}
EXAMPLE_CLASS = 3


def top_right_singular_vectors(beta: torch.Tensor) -> torch.Tensor:
    """Rows: the right singular vectors of the [o, d] coefficient matrix, by decreasing singular value."""
    _, _, vh = torch.linalg.svd(beta, full_matrices=False)
    return vh


def random_orthonormal(d: int, k: int, generator: torch.Generator, dtype=torch.float64) -> torch.Tensor:
    """[k, d] orthonormal rows spanning a uniformly random k-dimensional subspace."""
    q, r = torch.linalg.qr(torch.randn(d, k, generator=generator, dtype=dtype))
    return (q * torch.sign(torch.diagonal(r))).T


def project_out(x: torch.Tensor, directions: torch.Tensor) -> torch.Tensor:
    """x minus its component in the span of the orthonormal rows of ``directions``."""
    if len(directions) == 0:
        return x
    return x - (x @ directions.T) @ directions


@torch.no_grad()
def accuracies(models: dict, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    return {name: float((m(x).argmax(1) == y).double().mean()) for name, m in models.items()}


def ablation_rows(models, x, y, beta, k_max, draws, seed):
    vh = top_right_singular_vectors(beta)
    rows = []
    gen = torch.Generator().manual_seed(seed)
    for k in range(k_max + 1):
        for name, acc in accuracies(models, project_out(x, vh[:k]), y).items():
            rows.append(dict(k=k, directions="svd", draw=0, model=name, accuracy=acc))
        for draw in range(draws):
            dirs = random_orthonormal(x.shape[1], k, gen).to(x.device)
            for name, acc in accuracies(models, project_out(x, dirs), y).items():
                rows.append(dict(k=k, directions="random", draw=draw, model=name, accuracy=acc))
    return rows


def ablation_step(ckpt_paths, approx_paths, data_path, out_table, out_examples, params: dict) -> None:
    """Rule ``mnist_svd_ablation``: every configured (seed, step) into one table, plus example
    images (for fig4) from the first seed's last configured step."""
    device = resolve_device(params["device"])
    mnist = load_mnist(data_path)
    y = torch.as_tensor(mnist.test_labels, device=device)
    frames, examples = [], None
    for ckpt_path, approx_path in zip(ckpt_paths, approx_paths):
        ckpt = load_torch(ckpt_path)
        x = apply_preprocess(mnist.test_images, ckpt["preprocess"], dtype=torch.float64).to(device)
        approx = load_approximants(approx_path, device)
        models = {"mlp": load_mlp(ckpt, device).to(torch.float64), **approx}
        beta = approx["linear"].beta.to(torch.float64)
        df = pd.DataFrame(ablation_rows(models, x, y, beta, params["k_max"], params["random_draws"],
                                        seed=int(ckpt["seed"]) * 1_000_003 + int(ckpt["step"])))
        df.insert(0, "seed", int(ckpt["seed"]))
        df.insert(1, "step", int(ckpt["step"]))
        frames.append(df)
        examples = examples or ablation_examples(models["mlp"], x, y, beta, params["k_max"], ckpt)
    save_parquet(pd.concat(frames, ignore_index=True)[list(COLUMNS)].astype(COLUMNS), out_table)
    save_torch(examples, out_examples)


@torch.no_grad()
def ablation_examples(model, x, y, beta, k_max, ckpt) -> dict:
    """The first test '3' with k = 0…k_max directions removed, and the first test image of each
    digit with k_max removed, with the MLP's predictions (all in preprocessed space)."""
    vh = top_right_singular_vectors(beta)
    i3 = int((y == EXAMPLE_CLASS).nonzero()[0])
    threes = torch.stack([project_out(x[i3 : i3 + 1], vh[:k])[0] for k in range(k_max + 1)])
    firsts = torch.stack([(y == c).nonzero()[0, 0] for c in range(10)])
    digits = project_out(x[firsts], vh[:k_max])
    return {
        "seed": int(ckpt["seed"]), "step": int(ckpt["step"]), "preprocess": ckpt["preprocess"],
        "class": EXAMPLE_CLASS, "k": torch.arange(k_max + 1),
        "ablated_class": threes.cpu(), "ablated_class_pred": model(threes).argmax(1).cpu(),
        "digits": digits.cpu(), "digits_label": torch.arange(10), "digits_pred": model(digits).argmax(1).cpu(),
        "k_digits": k_max,
    }
