"""Log-spaced checkpoint schedule of the MNIST training run (pure Python, imported by Snakemake)."""

from __future__ import annotations

from polyinterp.errors import ConfigError


RECIPE_DEFAULTS = {"optimizer": "schedulefree_adamw", "schedule": "none", "cosine_epochs": 2048}


def train_params(train: dict) -> dict:
    """``mnist.train`` as rule ``mnist_train`` passes it on: the recipe keys that change nothing are
    left out (``optimizer`` / ``schedule`` at their defaults, ``cosine_epochs`` without the cosine
    schedule), so adding or editing them does not retrain a run they do not affect (Snakemake's
    params trigger); :func:`polyinterp.mnist.train.recipe` fills the defaults back in."""
    out = dict(train)
    for key in ("optimizer", "schedule"):
        if out.get(key) == RECIPE_DEFAULTS[key]:
            out.pop(key)
    if out.get("schedule", "none") != "cosine_per_epoch":
        out.pop("cosine_epochs", None)
    return out


def checkpoint_steps(first_pow: int, last_pow: int, per_octave: int) -> list[int]:
    """Step 0 and round(2^(first_pow + j/per_octave)) for j = 0 … per_octave·(last_pow − first_pow).

    The last entry is 2^last_pow, the number of training steps. Duplicates (possible when many
    points per octave fall on small steps) are dropped.
    """
    if last_pow < first_pow:
        raise ConfigError(
            f"config key 'mnist.train.checkpoints.last_pow' ({last_pow}) is below first_pow ({first_pow});"
            " make last_pow >= first_pow."
        )
    if per_octave < 1:
        raise ConfigError("config key 'mnist.train.checkpoints.per_octave' must be >= 1.")
    n = per_octave * (last_pow - first_pow)
    steps = {0} | {round(2 ** (first_pow + j / per_octave)) for j in range(n + 1)}
    return sorted(steps)


def resolve_steps(requested: list, available: list[int], key: str) -> list[int]:
    """Map config entries (step numbers or "last") onto checkpoint steps; unknown steps are an error."""
    out = []
    for item in requested:
        step = available[-1] if item == "last" else item
        if step not in available:
            raise ConfigError(
                f"config key '{key}' names step {item!r}, which is not a checkpoint;"
                f" use \"last\" or one of {available}."
            )
        if step not in out:
            out.append(step)
    return out


def selected_steps(requested, available: list[int], key: str) -> list[int]:
    """A config key's checkpoints, ``"all"`` or a list as for :func:`resolve_steps`, in step order."""
    if requested == "all":
        return list(available)
    return sorted(resolve_steps(requested, available, key))


def sgd_checkpoints(requested, available: list[int]) -> list[int]:
    """The checkpoints that get the SGD baseline (:func:`selected_steps` of ``mnist.approx.sgd.checkpoints``)."""
    return selected_steps(requested, available, "mnist.approx.sgd.checkpoints")


def sgd_settings(sgd: dict, step: int, sgd_steps: list[int]) -> dict:
    """The SGD baseline's parameters for one checkpoint: its settings where it runs, else only
    ``{"enabled": False}`` (so that changing them reruns nothing where it does not run)."""
    if not (sgd["enabled"] and step in sgd_steps):
        return {"enabled": False}
    return {**{k: v for k, v in sgd.items() if k != "checkpoints"}, "enabled": True}


def panel_steps(available: list[int], panels: int) -> list[int]:
    """About ``panels`` checkpoints (step > 0) evenly spread in log-step, first and last included."""
    steps = [s for s in available if s > 0]
    if len(steps) <= panels:
        return steps
    picks = {steps[round(i * (len(steps) - 1) / (panels - 1))] for i in range(panels)} if panels > 1 else {steps[-1]}
    return sorted(picks)
