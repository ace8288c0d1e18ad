"""SVD ablation attack: project test images off the top-k right singular vectors of a linear
approximant's coefficient matrix β and measure the accuracy of the MLP and its approximants.
β comes from the exact linear approximant under each configured basis distribution
(:mod:`polyinterp.mnist.attack.bases`: the class mixture, its moment-matched Gaussian, N(0, I)).
Control: the same with k random orthonormal directions (seeded, several draws; the same draws for
every basis, since they do not depend on β).

Every model is evaluated on x' = x − (xV)Vᵀ through quantities computed once on x, many direction
sets at a time (:mod:`polyinterp.mnist.attack.projected`), so a direction set V [d, k] costs
O(n·d·o·k + o·d²·k) instead of a full O(n·o·d²) quadratic evaluation; ``project_out`` +
``accuracies`` is the direct route the tests compare with.

Table schema (see docs/outputs.md, "Tables"):
    model str (the network's name, mnist.models), seed int64, step int64, basis str {mixture, gaussian, standard_normal}, k int64,
    directions str {svd, random}, draw int64 (0 for svd),
    predictor str {mlp (the network itself), linear, quadratic, quadratic_sgd, linear_gaussian, linear_standard_normal},
    accuracy float64
``linear`` / ``quadratic`` / ``quadratic_sgd`` are the approximants fitted under the class mixture
(rule ``mnist_approximants``) and appear under every basis; ``linear_<basis>`` is the linear
approximant under that basis's distribution (the one whose β is attacked), under its own basis only.
Random rows repeat, per basis, the same draws.
"""

from __future__ import annotations

import pandas as pd
import torch

from polyinterp.device import resolve_device
from polyinterp.errors import ConfigError
from polyinterp.io import load_torch, save_parquet, save_torch
from polyinterp.mnist.approximants import load_approximants, load_gaussian_mixture
from polyinterp.mnist.attack.bases import basis_approximants, basis_model_name, check_bases
from polyinterp.mnist.attack.checkpoints import figure_steps, load_attack_table
from polyinterp.mnist.attack.projected import DirectionSets, Projection, batch_evaluator, project_out
from polyinterp.mnist.data import load_mnist
from polyinterp.mnist.model import load_network, model_name, polynomial_network
from polyinterp.mnist.preprocess import apply_preprocess

COLUMNS = {"model": "string", "seed": "int64", "step": "int64", "basis": "string", "k": "int64", "directions": "string",
           "draw": "int64", "predictor": "string", "accuracy": "float64"}


def top_right_singular_vectors(beta: torch.Tensor) -> torch.Tensor:
    """Rows: the right singular vectors of the [o, d] coefficient matrix, by decreasing singular value."""
    _, _, vh = torch.linalg.svd(beta, full_matrices=False)
    return vh


def random_orthonormal(d: int, k: int, generator: torch.Generator, dtype=torch.float64) -> torch.Tensor:
    """[k, d] orthonormal rows spanning a uniformly random k-dimensional subspace."""
    q, r = torch.linalg.qr(torch.randn(d, k, generator=generator, dtype=dtype))
    return (q * torch.sign(torch.diagonal(r))).T


def _accuracy(logits: torch.Tensor, y: torch.Tensor) -> float:
    return float((logits.argmax(1) == y).double().mean())


@torch.no_grad()
def accuracies(models: dict, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    """Accuracy of each model on inputs x (the direct route: x already projected)."""
    return {name: _accuracy(m(x), y) for name, m in models.items()}


@torch.no_grad()
def attack_rows(models: dict, basis_betas: dict, basis_models: dict, x, y, k_max: int, draws: int,
                seed: int) -> list[dict]:
    """Accuracy rows for k = 0…k_max top SVD directions of each basis's β (``basis_betas``: basis → β
    [o, d]) and for ``draws`` random direction sets per k (drawn in the order k, draw from a generator
    seeded with ``seed``; the same sets for every basis). ``models`` are evaluated under every basis;
    ``basis_models[basis]`` (name → model) under that basis only. Each common model's random-direction
    accuracy is computed once and repeated under every basis.

    The projections are batched (:mod:`polyinterp.mnist.attack.projected`): a basis's k = 0…k_max
    sets are prefixes of one matrix, a k's random draws are stacked; the coordinates of x along each
    batch are computed once for all models (and, for the random draws, all bases)."""
    evaluators = {name: batch_evaluator(m, x) for name, m in models.items()}
    gen = torch.Generator().manual_seed(seed)
    random_sets = [Projection.of(x, DirectionSets.stacked([random_orthonormal(x.shape[1], k, gen) for _ in range(draws)],
                                                          x.shape[1]))
                   for k in range(k_max + 1)]
    common_random = {name: [[_accuracy(out, y) for out in evaluate(p)] for p in random_sets]
                     for name, evaluate in evaluators.items()}  # [name][k][draw]
    rows = []
    for basis, beta in basis_betas.items():
        svd = Projection.of(x, DirectionSets.nested(top_right_singular_vectors(beta), k_max))
        extra = {name: batch_evaluator(m, x) for name, m in basis_models.get(basis, {}).items()}
        svd_acc = {name: [_accuracy(out, y) for out in evaluate(svd)]
                   for name, evaluate in {**evaluators, **extra}.items()}  # [name][k]
        random_acc = {**common_random, **{name: [[_accuracy(out, y) for out in evaluate(p)] for p in random_sets]
                                          for name, evaluate in extra.items()}}
        for k in range(k_max + 1):
            for name in svd_acc:
                rows.append(dict(basis=basis, k=k, directions="svd", draw=0, predictor=name, accuracy=svd_acc[name][k]))
            for draw in range(draws):
                for name in random_acc:
                    rows.append(dict(basis=basis, k=k, directions="random", draw=draw, predictor=name,
                                     accuracy=random_acc[name][k][draw]))
    return rows


def _attack_setup(ckpt_path: str, approx_path: str, mixture: dict, mnist, bases: list[str], device):
    """Test inputs, the models to attack and each basis's linear approximant for one checkpoint."""
    state = load_torch(ckpt_path)
    x = apply_preprocess(mnist.test_images, state["preprocess"], dtype=torch.float64).to(device)
    fitted = load_approximants(approx_path, device)
    mlp = load_network(state, device).to(torch.float64)
    linears = basis_approximants(polynomial_network(mlp), load_gaussian_mixture(mixture, device),
                                 fitted["linear"], bases)
    return state, x, {"mlp": mlp, **fitted}, linears


def ablation_step(*, ckpt: str, approx: str, mixture: str, data: str, table: str, params: dict) -> None:
    """Rule ``mnist_svd_ablation`` for one (seed, step): the attack under every basis of
    ``params['bases']`` (k = 0…``k_max``, ``random_draws`` control draws) on the test images, as
    ``table`` rows (schema: module docstring)."""
    bases = check_bases(params["bases"])
    device = resolve_device(params["device"])
    mnist = load_mnist(data)
    y = torch.as_tensor(mnist.test_labels, device=device)
    state, x, models, linears = _attack_setup(ckpt, approx, load_torch(mixture), mnist, bases, device)
    betas = {b: lin.beta.to(torch.float64) for b, lin in linears.items()}
    own = {b: {basis_model_name(b): lin} for b, lin in linears.items() if b != "mixture"}
    df = pd.DataFrame(attack_rows(models, betas, own, x, y, params["k_max"], params["random_draws"],
                                  seed=int(state["seed"]) * 1_000_003 + int(state["step"])))
    df.insert(0, "model", model_name(state))
    df.insert(1, "seed", int(state["seed"]))
    df.insert(2, "step", int(state["step"]))
    save_parquet(df[list(COLUMNS)].astype(COLUMNS), table)


def ablation_all_step(*, parts: list[str], ckpt: list[str], approx: list[str], mixture: str, data: str,
                      table: str, examples: str, params: dict) -> None:
    """Rule ``mnist_svd_ablation_all`` for one model: its per-checkpoint ``parts`` into one ``table``, and the fig4
    ``examples`` at the first of the figure steps (``params['figure_steps']``, resolved against the
    table's clean accuracies and ``accuracy_level``) of the seed whose checkpoints ``ckpt`` /
    ``approx`` are (in pairs, one per attacked step)."""
    if len(ckpt) != len(approx):
        raise ConfigError(f"mnist_svd_ablation_all needs one approx file per checkpoint, got {len(ckpt)} and {len(approx)}")
    frames = [load_attack_table(p) for p in parts]
    df = pd.concat(frames, ignore_index=True)[list(COLUMNS)].astype(COLUMNS)
    df = df.sort_values(["model", "seed", "step", "basis", "k", "directions", "draw", "predictor"], kind="stable")
    steps = figure_steps(df, params["figure_steps"], params["accuracy_level"])
    want = steps[0].step
    found = [(c, a) for c, a in zip(ckpt, approx) if int(load_torch(c)["step"]) == want]
    if not found:
        raise ConfigError(f"figure step {want} has no checkpoint among the {len(ckpt)} given to mnist_svd_ablation_all")
    device = resolve_device(params["device"])
    mnist = load_mnist(data)
    y = torch.as_tensor(mnist.test_labels, device=device)
    bases = check_bases(params["bases"])
    state, x, models, linears = _attack_setup(*found[0], load_torch(mixture), mnist, bases, device)
    ex = ablation_examples(models["mlp"], x, y, {b: lin.beta.to(torch.float64) for b, lin in linears.items()},
                           params["k_max"], state)
    ex["chosen_as"] = steps[0].label
    save_parquet(df.reset_index(drop=True), table)
    save_torch(ex, examples)


@torch.no_grad()
def ablation_examples(model, x, y, basis_betas: dict, k_max, ckpt) -> dict:
    """The first test image of each digit with k = 0…k_max directions of each basis removed
    (``ablated`` [bases, 10, k_max + 1, d], class-major within a basis) and the MLP's predictions on
    them (``ablated_pred`` [bases, 10, k_max + 1]), in preprocessed space; ``bases`` names the first
    axis. The figure picks its digit (``mnist.figures.digit``) from these."""
    firsts = torch.stack([(y == c).nonzero()[0, 0] for c in range(10)])
    ablated, preds = [], []
    for beta in basis_betas.values():
        vh = top_right_singular_vectors(beta)
        a = torch.stack([project_out(x[firsts], vh[:k]) for k in range(k_max + 1)], 1)  # [10, k+1, d]
        ablated.append(a)
        preds.append(model(a.reshape(-1, x.shape[1])).argmax(1).reshape(10, k_max + 1))
    return {
        "model": model_name(ckpt),
        "seed": int(ckpt["seed"]), "step": int(ckpt["step"]), "preprocess": ckpt["preprocess"],
        "test_accuracy": float(ckpt["test_accuracy"]), "bases": list(basis_betas),
        "k": torch.arange(k_max + 1), "labels": torch.arange(10),
        "ablated": torch.stack(ablated).cpu(), "ablated_pred": torch.stack(preds).cpu(),
    }
