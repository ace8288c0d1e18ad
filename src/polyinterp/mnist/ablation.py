"""SVD ablation attack: project test images off the top-k right singular vectors of the linear
approximant's coefficient matrix and measure the accuracy of the MLP and its approximants.
Control: the same with k random orthonormal directions (seeded, several draws).

Every model is evaluated on x' = x − (xV)Vᵀ through quantities computed once on x (see
:func:`projected_evaluator`), so a direction set V [d, k] costs O(n·d·o·k + o·d²·k) instead of a full
O(n·o·d²) quadratic evaluation; ``project_out`` + ``accuracies`` is the direct route the tests compare with.

Table schema (see README "Tables"):
    seed int64, step int64, k int64, directions str {svd, random}, draw int64 (0 for svd),
    model str {mlp, linear, quadratic, quadratic_sgd}, accuracy float64
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import torch
from torch import nn

from polyinterp.approx import Approximant
from polyinterp.device import resolve_device
from polyinterp.errors import ConfigError
from polyinterp.io import load_torch, save_parquet, save_torch
from polyinterp.mnist.approximants import load_approximants
from polyinterp.mnist.data import load_mnist
from polyinterp.mnist.model import load_mlp
from polyinterp.mnist.preprocess import apply_preprocess

COLUMNS = {"seed": "int64", "step": "int64", "k": "int64", "directions": "string", "draw": "int64",
           "model": "string", "accuracy": "float64"}


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


def _accuracy(logits: torch.Tensor, y: torch.Tensor) -> float:
    return float((logits.argmax(1) == y).double().mean())


@torch.no_grad()
def accuracies(models: dict, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    """Accuracy of each model on inputs x (the direct route: x already projected)."""
    return {name: _accuracy(m(x), y) for name, m in models.items()}


@torch.no_grad()
def projected_evaluator(model, x: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """The function ``dirs ↦ model(project_out(x, dirs))`` (dirs [k, d], orthonormal rows), with the
    work that does not depend on dirs done once here. With V = dirsᵀ and c = xV:

    - Approximant: β·x' = β·x − (βV)·c and x'ᵀΓx' = xᵀΓx − 2 cᵀVᵀΓₛx + cᵀ(VᵀΓₛV)c (Γₛ = (Γ + Γᵀ)/2),
      so g(x) is computed once and each call costs O(n·d·o·k + o·d²·k);
    - ``nn.Sequential`` starting with ``nn.Linear`` (the MLP): W₁x' + b = (W₁x + b) − c(W₁V)ᵀ;
    - anything else: projected and evaluated directly.
    """
    if isinstance(model, Approximant):
        return _approximant_evaluator(model, x)
    if isinstance(model, nn.Sequential) and len(model) and isinstance(model[0], nn.Linear):
        return _sequential_evaluator(model, x)
    return lambda dirs: model(project_out(x, dirs))


def _approximant_evaluator(approx: Approximant, x: torch.Tensor):
    x = x.to(approx.dtype)
    g0 = approx(x)
    gamma = None if approx.gamma is None else 0.5 * (approx.gamma + approx.gamma.transpose(1, 2))

    @torch.no_grad()
    def evaluate(dirs: torch.Tensor) -> torch.Tensor:
        if len(dirs) == 0:
            return g0
        V = dirs.T.to(x.dtype)  # [d, k]
        c = x @ V  # [n, k]
        out = g0 - c @ (approx.beta @ V).T
        if gamma is not None:
            GV = gamma @ V  # [o, d, k]
            xGV = (x @ GV.permute(1, 0, 2).reshape(approx.d, -1)).view(len(x), approx.o, -1)  # [n, o, k]
            out = out - 2 * torch.einsum("nok,nk->no", xGV, c) + torch.einsum("nk,okl,nl->no", c, V.T @ GV, c)
        return out

    return evaluate


def _sequential_evaluator(model: nn.Sequential, x: torch.Tensor):
    first, rest = model[0], model[1:]
    h0 = first(x)

    @torch.no_grad()
    def evaluate(dirs: torch.Tensor) -> torch.Tensor:
        if len(dirs) == 0:
            return rest(h0)
        V = dirs.T.to(x.dtype)
        return rest(h0 - (x @ V) @ (first.weight @ V).T)

    return evaluate


@torch.no_grad()
def ablation_rows(models, x, y, beta, k_max, draws, seed) -> list[dict]:
    """Accuracy rows for k = 0…k_max SVD directions of ``beta`` and ``draws`` random direction sets
    per k (drawn in the order k, draw from a generator seeded with ``seed``)."""
    vh = top_right_singular_vectors(beta)
    evaluators = {name: projected_evaluator(m, x) for name, m in models.items()}
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for k in range(k_max + 1):
        sets = [("svd", 0, vh[:k])]
        sets += [("random", draw, random_orthonormal(x.shape[1], k, gen).to(x.device)) for draw in range(draws)]
        for directions, draw, dirs in sets:
            for name, evaluate in evaluators.items():
                rows.append(dict(k=k, directions=directions, draw=draw, model=name,
                                 accuracy=_accuracy(evaluate(dirs), y)))
    return rows


def ablation_step(*, ckpt: list[str], approx: list[str], data: str, table: str, examples: str,
                  params: dict) -> None:
    """Rule ``mnist_svd_ablation``: every attacked (seed, step) — ``ckpt`` and ``approx`` files in
    pairs — into one ``table``, plus ``examples`` images (for fig4) from the first seed's last
    attacked step."""
    if len(ckpt) != len(approx):
        raise ConfigError(f"mnist_svd_ablation needs one approx file per checkpoint, got {len(ckpt)} and {len(approx)}")
    device = resolve_device(params["device"])
    mnist = load_mnist(data)
    y = torch.as_tensor(mnist.test_labels, device=device)
    frames, chosen = [], None
    for ckpt_path, approx_path in zip(ckpt, approx):
        state = load_torch(ckpt_path)
        x = apply_preprocess(mnist.test_images, state["preprocess"], dtype=torch.float64).to(device)
        fitted = load_approximants(approx_path, device)
        models = {"mlp": load_mlp(state, device).to(torch.float64), **fitted}
        beta = fitted["linear"].beta.to(torch.float64)
        df = pd.DataFrame(ablation_rows(models, x, y, beta, params["k_max"], params["random_draws"],
                                        seed=int(state["seed"]) * 1_000_003 + int(state["step"])))
        df.insert(0, "seed", int(state["seed"]))
        df.insert(1, "step", int(state["step"]))
        frames.append(df)
        key = (int(state["seed"]), -int(state["step"]))
        if chosen is None or key < chosen[0]:
            chosen = key, ablation_examples(models["mlp"], x, y, beta, params["k_max"], state)
    save_parquet(pd.concat(frames, ignore_index=True)[list(COLUMNS)].astype(COLUMNS), table)
    save_torch(chosen[1], examples)


@torch.no_grad()
def ablation_examples(model, x, y, beta, k_max, ckpt) -> dict:
    """The first test image of each digit with k = 0…k_max directions removed (``ablated`` [10,
    k_max + 1, d], class-major) and the MLP's predictions on them (``ablated_pred`` [10, k_max + 1]),
    in preprocessed space; the figure picks its digit (``mnist.figures.digit``) from these."""
    vh = top_right_singular_vectors(beta)
    firsts = torch.stack([(y == c).nonzero()[0, 0] for c in range(10)])
    ablated = torch.stack([project_out(x[firsts], vh[:k]) for k in range(k_max + 1)], 1)  # [10, k+1, d]
    pred = model(ablated.reshape(-1, x.shape[1])).argmax(1).reshape(10, k_max + 1)
    return {
        "seed": int(ckpt["seed"]), "step": int(ckpt["step"]), "preprocess": ckpt["preprocess"],
        "k": torch.arange(k_max + 1), "labels": torch.arange(10), "ablated": ablated.cpu(), "ablated_pred": pred.cpu(),
    }
