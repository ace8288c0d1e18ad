"""Seeded MNIST training and log-spaced eval-mode checkpoints, in one of two recipes.

Batches come from a seeded permutation per epoch (CPU generator, so the batch order is the same
on every device); a step is a tensor gather, a forward/backward and an optimizer step.

Recipes (config keys ``mnist.train.optimizer`` and ``mnist.train.schedule``):

- ``schedulefree_adamw`` (default; the paper's text): ``schedulefree.AdamWScheduleFree`` with
  ``lr``, its own linear ``warmup_steps`` and ``weight_decay``; no schedule (``schedule: none``).
  Checkpoints hold its eval-mode weights (the averaged x sequence, ``optimizer.eval()``).
- ``adamw`` (the authors' code, EleutherAI/polyapprox): plain ``torch.optim.AdamW`` (torch's
  default betas and eps) with ``lr`` and ``weight_decay``; the rate of step s (1-based) is
  ``learning_rate(s, ...)``: ``lr`` × a linear warm-up over ``warmup_steps`` (none when 0) × with
  ``schedule: cosine_per_epoch`` the cosine factor of ``CosineAnnealingLR(T_max=cosine_epochs,
  eta_min=0)`` stepped once per epoch (an epoch = n_train // batch_size steps, as EpochBatches drops
  the last partial batch). The authors use lr 1e-5, weight decay 0.1, batch 32, no warm-up and
  T_max = 2048 epochs, so the rate barely moves. Checkpoints hold the trained weights themselves.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

import schedulefree
import torch
from torch import nn

from polyinterp.config import config_hash
from polyinterp.device import resolve_device
from polyinterp.errors import ConfigError, TrainingError
from polyinterp.io import save_torch
from polyinterp.mnist.data import load_mnist
from polyinterp.mnist.model import accuracy, make_network, mean_cross_entropy, model_name, network_arch
from polyinterp.mnist.preprocess import apply_preprocess, make_preprocess

log = logging.getLogger(__name__)
NAN_CHECK_EVERY = 64
OPTIMIZERS = ("schedulefree_adamw", "adamw")
SCHEDULES = ("none", "cosine_per_epoch")
# the recipe keys' defaults; rule mnist_train leaves a key at its default out of its params (polyinterp.rules.train_params)
RECIPE_DEFAULTS = {"optimizer": "schedulefree_adamw", "schedule": "none", "cosine_epochs": 2048}


class EpochBatches:
    """Indices of minibatches: a fresh seeded permutation each epoch, the last partial batch dropped."""

    def __init__(self, n: int, batch_size: int, generator: torch.Generator):
        if batch_size > n:
            raise ConfigError(f"config key 'mnist.train.batch_size' ({batch_size}) exceeds the {n} training images.")
        self.n, self.batch_size, self.generator = n, batch_size, generator
        self.perm, self.pos = None, n

    def next(self) -> torch.Tensor:
        if self.pos + self.batch_size > self.n:
            self.perm = torch.randperm(self.n, generator=self.generator)
            self.pos = 0
        idx = self.perm[self.pos : self.pos + self.batch_size]
        self.pos += self.batch_size
        return idx


def learning_rate(step: int, *, lr: float, warmup_steps: int, schedule: str, steps_per_epoch: int,
                  cosine_epochs: int) -> float:
    """Learning rate of optimizer step ``step`` (1-based) in the ``adamw`` recipe.

    ``lr`` × min(1, step / warmup_steps) (no warm-up when ``warmup_steps`` is 0), and with
    ``schedule == "cosine_per_epoch"`` × (1 + cos(π·min(e, T)/T)) / 2, where e = (step − 1) //
    steps_per_epoch is the number of epochs completed before this step and T = ``cosine_epochs``.
    That is the closed form of ``torch.optim.lr_scheduler.CosineAnnealingLR(T_max=T, eta_min=0)``
    stepped once at the end of every epoch, except that it is clamped at T (the rate stays 0 after
    T epochs, where CosineAnnealingLR would rise again).
    """
    rate = lr
    if warmup_steps > 0 and step < warmup_steps:
        rate = rate * step / warmup_steps
    if schedule == "cosine_per_epoch":
        epochs = min((step - 1) // steps_per_epoch, cosine_epochs)
        rate = rate * (1 + math.cos(math.pi * epochs / cosine_epochs)) / 2
    elif schedule != "none":
        raise ConfigError(f"config key 'mnist.train.schedule' is {schedule!r}; use one of {', '.join(SCHEDULES)}.")
    return rate


def recipe(params: dict) -> dict:
    """``optimizer``, ``schedule`` and ``cosine_epochs`` of ``params`` (defaults where absent), checked."""
    out = {k: params.get(k, v) for k, v in RECIPE_DEFAULTS.items()}
    if out["optimizer"] not in OPTIMIZERS:
        raise ConfigError(f"config key 'mnist.train.optimizer' is {out['optimizer']!r}; use one of {', '.join(OPTIMIZERS)}.")
    if out["schedule"] not in SCHEDULES:
        raise ConfigError(f"config key 'mnist.train.schedule' is {out['schedule']!r}; use one of {', '.join(SCHEDULES)}.")
    if not isinstance(out["cosine_epochs"], int) or out["cosine_epochs"] < 1:
        raise ConfigError(f"config key 'mnist.train.cosine_epochs' is {out['cosine_epochs']!r}; it must be an integer >= 1.")
    if out["optimizer"] == "schedulefree_adamw" and out["schedule"] != "none":
        raise ConfigError(
            f"config key 'mnist.train.schedule' is {out['schedule']!r} but 'mnist.train.optimizer' is"
            " 'schedulefree_adamw', which takes no learning-rate schedule (schedule-free replaces it);"
            " set mnist.train.schedule: none, or mnist.train.optimizer: adamw."
        )
    return out


def _checkpoint(model, optimizer, step, seed, chash, spec, data_t, path, name):
    """Save eval-mode weights (schedule-free's x sequence; AdamW's weights as they are) with the
    network's architecture and model name, step, seed, loss and accuracy."""
    schedule_free = isinstance(optimizer, schedulefree.AdamWScheduleFree)
    if schedule_free:
        optimizer.eval()
    model.eval()
    x_tr, y_tr, x_te, y_te = data_t
    ckpt = {
        "state": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
        "arch": network_arch(model), "model": name,
        "step": step, "seed": seed, "config_hash": chash, "preprocess": spec,
        "train_loss": mean_cross_entropy(model, x_tr, y_tr),
        "test_accuracy": accuracy(model, x_te, y_te),
    }
    save_torch(ckpt, path)
    if schedule_free:
        optimizer.train()
    model.train()
    return ckpt


def check_decay(params: dict) -> None:
    """Refuse lr × weight_decay ≥ 1: decoupled decay multiplies every weight by (1 − lr·wd) each step,
    which then flips or zeroes the weights and ends in a non-finite loss that looks like a rate problem."""
    product = params["lr"] * params["weight_decay"]
    if product >= 1:
        raise ConfigError(
            f"mnist.train.lr × mnist.train.weight_decay = {params['lr']} × {params['weight_decay']} = {product:.3g}"
            " >= 1: decoupled weight decay would shrink every weight by more than itself each step; lower"
            " mnist.train.weight_decay (the paper uses 0.1)."
        )


def train_mlp(data, params: dict, seed: int, ckpt_paths: dict[int, Path]) -> list[dict]:
    """Train the network ``params`` names (``arch``, ``activation``, ``hidden``; a ReLU MLP where
    absent; ``model``: its name, recorded in the checkpoints) and write one checkpoint per entry of
    ``ckpt_paths`` (step → path). Returns their metadata."""
    check_decay(params)
    device = resolve_device(params["device"])
    spec = make_preprocess(data.train_images, params["preprocess"]["pool"], params["preprocess"]["center"])
    x_tr = apply_preprocess(data.train_images, spec).to(device)
    y_tr = torch.as_tensor(data.train_labels).to(device)
    x_te = apply_preprocess(data.test_images, spec).to(device)
    y_te = torch.as_tensor(data.test_labels).to(device)
    data_t = (x_tr, y_tr, x_te, y_te)
    chash = config_hash(params)
    rec = recipe(params)
    schedule_free = rec["optimizer"] == "schedulefree_adamw"

    torch.manual_seed(seed)
    model = make_network(x_tr.shape[1], params["hidden"], 10, params.get("arch", "mlp"),
                         params.get("activation", "relu")).to(device)
    name = model_name(params)
    if schedule_free:
        optimizer = schedulefree.AdamWScheduleFree(
            model.parameters(), lr=params["lr"], warmup_steps=params["warmup_steps"],
            weight_decay=params["weight_decay"],
        )
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=params["lr"], weight_decay=params["weight_decay"])
    batches = EpochBatches(len(x_tr), params["batch_size"], torch.Generator().manual_seed(seed))
    schedule_kw = dict(lr=params["lr"], warmup_steps=params["warmup_steps"], schedule=rec["schedule"],
                       steps_per_epoch=batches.n // batches.batch_size, cosine_epochs=rec["cosine_epochs"])
    total = max(ckpt_paths)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    if schedule_free:
        optimizer.train()
    log.info("optimizer %s, schedule %s, %d steps per epoch", rec["optimizer"], rec["schedule"],
             schedule_kw["steps_per_epoch"])
    metas = []
    if 0 in ckpt_paths:
        metas.append(_checkpoint(model, optimizer, 0, seed, chash, spec, data_t, ckpt_paths[0], name))
    window = torch.zeros(NAN_CHECK_EVERY, device=device)
    log_every = max(1, total // 40)
    t0, running = time.perf_counter(), 0.0
    for step in range(1, total + 1):
        idx = batches.next().to(device)
        loss = loss_fn(model(x_tr[idx]), y_tr[idx])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if not schedule_free:
            rate = learning_rate(step, **schedule_kw)
            for group in optimizer.param_groups:
                group["lr"] = rate
        optimizer.step()
        window[(step - 1) % NAN_CHECK_EVERY] = loss.detach()
        if step % NAN_CHECK_EVERY == 0 or step == total or step in ckpt_paths:
            filled = window[: (step - 1) % NAN_CHECK_EVERY + 1]
            bad = (~torch.isfinite(filled)).nonzero()
            if len(bad):
                first = step - len(filled) + 1 + int(bad[0])
                raise TrainingError(
                    f"non-finite training loss at step {first} (seed {seed}); the keys that cause it: lower"
                    f" 'mnist.train.lr' (now {params['lr']}) or 'mnist.train.weight_decay' (now"
                    f" {params['weight_decay']}), or raise 'mnist.train.warmup_steps' (now {params['warmup_steps']})."
                )
            running = float(filled.mean())
        if step in ckpt_paths:
            meta = _checkpoint(model, optimizer, step, seed, chash, spec, data_t, ckpt_paths[step], name)
            metas.append(meta)
            log.info("checkpoint step %d: train loss %.4f test accuracy %.4f", step, meta["train_loss"], meta["test_accuracy"])
        if step % log_every == 0:
            rate = step / (time.perf_counter() - t0)
            log.info("step %d/%d loss %.4f (%.0f steps/s)", step, total, running, rate)
    return [{k: m[k] for k in ("step", "train_loss", "test_accuracy")} for m in metas]


def train_step(*, data: str, ckpt: list[str], params: dict) -> None:
    """Rule ``mnist_train``: ``ckpt`` are the checkpoint paths of ``params['steps']``, in order."""
    steps = params["steps"]
    if len(steps) != len(ckpt):
        raise ConfigError(f"{len(ckpt)} checkpoint paths for {len(steps)} steps; they must match one to one.")
    torch.use_deterministic_algorithms(True, warn_only=True)
    train_mlp(load_mnist(data), params, int(params["seed"]), {int(s): Path(p) for s, p in zip(steps, ckpt)})
