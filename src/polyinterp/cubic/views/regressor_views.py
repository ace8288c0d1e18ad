"""Views of the regressor the SAE pipeline can read: other hidden layers and earlier checkpoints.

Today's pipeline (activations → SAE → landmarks → bands → slope search) reads the *last* hidden layer
of the *final* model, under ``results/cubic/seed{seed}/``. The same rules read two more kinds of view,
each in a folder of its own beside those files:

- ``layer{L}/``: hidden layer L (1 … n_hidden, 1 nearest the input; see :mod:`polyinterp.cubic.regressor.model`)
  of the final model, with the SAE size of ``cubic.layers.saes`` (the last hidden layer is today's
  pipeline, with ``cubic.sae``'s size, so it has no folder of its own);
- ``train_step{S}/``: the last hidden layer of the regressor's eval checkpoint at step S
  (``cubic.training.steps``), extracted from ``checkpoints.pt`` into ``train_step{S}/model.pt`` by
  :func:`checkpoint_model_step`; the final step with ``stop_at_target`` off is today's pipeline;
- ``capacity_{name}/``: the last hidden layer of another regressor, variant ``name`` of
  ``cubic.capacity.variants`` (its own widths, trained by rule ``cubic_capacity_train`` with
  ``cubic.train``'s settings into ``capacity_{name}/model.pt``); a variant with ``cubic.model.widths``
  and ``cubic.train``'s steps is today's regressor and pipeline, not a copy.

Here: the parse-time resolution and checks of these config keys, and the checkpoint extraction.
"""

from __future__ import annotations

import math

from polyinterp.errors import ConfigError, DataError


# ------------------------------------------------------------------------------------------ layers
def layer_saes(saes: list[dict], widths) -> dict[int, dict]:
    """``cubic.layers.saes`` → {layer: {"latents", "k"}}, checked against ``cubic.model.widths``.

    Layers are 1 … n_hidden − 1; the last hidden layer is the one ``cubic.sae`` sizes (today's
    pipeline), so naming it here is an error, as is a layer listed twice or k above latents.
    """
    widths = [int(w) for w in widths]
    n_hidden = len(widths) - 2
    out: dict[int, dict] = {}
    for i, entry in enumerate(saes):
        layer, latents, k = int(entry["layer"]), int(entry["latents"]), int(entry["k"])
        where = f"config key 'cubic.layers.saes.{i}'"
        if layer == n_hidden:
            raise ConfigError(f"{where} names hidden layer {layer}, the last one: its SAE is today's pipeline, sized "
                              f"by cubic.sae.latents and cubic.sae.k; leave it out of cubic.layers.saes.")
        if not 1 <= layer < n_hidden:
            raise ConfigError(f"{where} names hidden layer {layer}, but cubic.model.widths {widths} has hidden "
                              f"layers 1 … {n_hidden} (1 nearest the input, {n_hidden} the last, which is "
                              f"cubic.sae's); use a layer between 1 and {n_hidden - 1}.")
        if layer in out:
            raise ConfigError(f"{where} names hidden layer {layer} a second time; list each layer once.")
        if not 1 <= k <= latents:
            raise ConfigError(f"{where}: k = {k} must be between 1 and its latents ({latents}).")
        out[layer] = {"latents": latents, "k": k}
    return dict(sorted(out.items()))


# ---------------------------------------------------------------------------------------- training
def eval_checkpoint_steps(train: dict) -> list[int]:
    """The steps ``cubic_train`` keeps an eval checkpoint at when it runs all ``cubic.train.steps``:
    0, every ``eval_every`` steps, and the last step (see :mod:`polyinterp.cubic.regressor.train`)."""
    total, every = int(train["steps"]), int(train["eval_every"])
    return sorted({0, total, *range(every, total + 1, every)})


def _nearest(steps: list[int], value: float) -> int:
    return min(steps, key=lambda s: (abs(math.log(max(s, 1)) - math.log(max(value, 1))), s))


def training_steps(spec, train: dict) -> list[int]:
    """``cubic.training.steps`` → the sorted checkpoint steps to read, checked against ``cubic.train``.

    ``spec`` is a list of steps (integers or ``"last"``), each an eval checkpoint of ``cubic.train``
    (:func:`eval_checkpoint_steps`), or ``{"log_spaced": n}``: n steps spaced evenly in log(step)
    from ``eval_every`` to ``steps``, each the checkpoint nearest in log(step) (repeats dropped).
    """
    ckpts = eval_checkpoint_steps(train)
    total = int(train["steps"])
    if isinstance(spec, dict):
        n = int(spec["log_spaced"])
        lo = min(int(train["eval_every"]), total)
        want = [total] if n == 1 else [lo * (total / lo) ** (i / (n - 1)) for i in range(n)]
        return sorted({_nearest([s for s in ckpts if s > 0], w) for w in want})
    out = []
    for value in spec:
        step = total if value == "last" else int(value)
        if step not in ckpts:
            near = sorted(ckpts, key=lambda s: (abs(s - step), s))[:2]
            raise ConfigError(
                f"config key 'cubic.training.steps' lists step {value}, which is not an eval checkpoint of the "
                f"regressor: cubic_train keeps one at 0, every cubic.train.eval_every = {train['eval_every']} steps "
                f"and at the last step (cubic.train.steps = {total}); use a checkpoint step such as "
                f"{' or '.join(map(str, sorted(near)))}, \"last\", or {{log_spaced: n}}.")
        out.append(step)
    if len(set(out)) != len(out):
        raise ConfigError(f"config key 'cubic.training.steps' {list(spec)} names a step twice; list each once.")
    return sorted(out)


# -------------------------------------------------------------------------------------- capacity
def capacity_variants(capacity: dict, model_widths, train: dict) -> dict[str, dict]:
    """``cubic.capacity`` → {name: {"widths": [...], "is_model": bool, "steps": int}} in config
    order, checked.

    A variant is another regressor (its ``widths``, from 3 inputs to 1 output) trained with
    ``cubic.train``'s settings, its steps ``cubic.capacity.train_steps`` (null: ``cubic.train.steps``).
    ``is_model``: the variant has ``cubic.model.widths`` and ``cubic.train.steps``, i.e. it is today's
    regressor, whose files it reads (no retraining). Names and widths must be unique.
    """
    model_widths = [int(w) for w in model_widths]
    total = int(train["steps"])
    steps = total if capacity["train_steps"] is None else int(capacity["train_steps"])
    if int(train["eval_every"]) > steps:
        raise ConfigError(f"config key 'cubic.capacity.train_steps' ({steps}) is below cubic.train.eval_every "
                          f"({train['eval_every']}), which the variants train with; raise it to at least "
                          f"{train['eval_every']} or set it to null (cubic.train.steps).")
    out: dict[str, dict] = {}
    seen: dict[tuple, str] = {}
    for i, entry in enumerate(capacity["variants"]):
        name, widths = str(entry["name"]), [int(w) for w in entry["widths"]]
        where = f"config key 'cubic.capacity.variants.{i}'"
        if len(widths) < 3 or widths[0] != 3 or widths[-1] != 1:
            raise ConfigError(f"{where} has widths {widths}; a variant of the regressor starts at 3 (x, a, b), "
                              f"ends at 1 (y) and has at least one hidden layer, e.g. [3, 64, 64, 64, 8, 1].")
        if name in out:
            raise ConfigError(f"{where} names variant {name!r} a second time; give every variant its own name.")
        if tuple(widths) in seen:
            raise ConfigError(f"{where} ({name!r}) has the widths {widths} of variant {seen[tuple(widths)]!r}; "
                              f"list each architecture once.")
        seen[tuple(widths)] = name
        out[name] = {"widths": widths, "is_model": widths == model_widths and steps == total, "steps": steps}
    return out


def n_params(widths) -> int:
    """Weights and biases of an MLP with these layer widths."""
    widths = [int(w) for w in widths]
    return sum(widths[i] * widths[i + 1] + widths[i + 1] for i in range(len(widths) - 1))


def checkpoint_model_step(*, final: str, checkpoints: str, model: str, params: dict) -> None:
    """Rule ``cubic_checkpoint_model``: the eval checkpoint at step ``params["step"]`` of
    ``checkpoints`` as a model file like ``final`` (its widths, ranges and seed; steps_trained and the
    validation rel-MSE of that checkpoint), read by the pipeline's steps as they read ``model.pt``."""
    from polyinterp.io import load_torch, save_torch

    step = int(params["step"])
    blob, meta = load_torch(checkpoints), load_torch(final)
    if "steps" not in blob or "states" not in blob:
        raise DataError(f"{checkpoints} is not a cubic checkpoint file; rebuild it with the cubic_train rule.")
    if step not in blob["steps"]:
        why = (f"training stopped at step {blob['steps'][-1]} (cubic.train.stop_at_target)"
               if step > blob["steps"][-1] else "it keeps one every cubic.train.eval_every steps")
        raise DataError(
            f"{checkpoints} has no eval checkpoint at step {step}: {why}; its steps are {blob['steps'][0]} … "
            f"{blob['steps'][-1]}. Choose those steps in config key 'cubic.training.steps'.")
    i = blob["steps"].index(step)
    save_torch({
        **{k: v for k, v in meta.items() if k not in ("state", "target_met")},
        "state": blob["states"][i], "widths": list(blob["widths"]), "steps_trained": step,
        "val_rel_mse": float(blob["val_rel_mse"][i]), "checkpoint_step": step,
        "final_steps_trained": meta.get("steps_trained"),
    }, model)
