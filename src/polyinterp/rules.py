"""What the workflow's rules import at parse time, and nothing else does: the MNIST checkpoint schedule
and the config keys that select checkpoints, the cubic study's views (which folders a config asks
for and what each view rule passes on) and the grid's rule parameters; and the one change the Snakefile
makes to Snakemake itself, one pending re-evaluation timer in its scheduler (the last section). Rules are
thin declarations: they compute their files and ``params`` here and call the package's steps through
``polyinterp.cli``; the steps never import this module."""

from __future__ import annotations

import threading

from polyinterp.cubic.views.grid import check_widths, grid_points
from polyinterp.cubic.views.regressor_views import capacity_variants, layer_saes, training_steps
from polyinterp.errors import ConfigError
from polyinterp.mnist.train import RECIPE_DEFAULTS


# ---------------------------------------------------------------------------------- MNIST checkpoints
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


# fig1's checkpoints beyond an even spread: 2^12 and 2^14, where the paper finds the features most
# interpretable (shown wherever the run has them).
PAPER_FEATURE_STEPS = (4096, 16384)


def panel_steps(available: list[int], panels: int, required=PAPER_FEATURE_STEPS) -> list[int]:
    """``panels`` checkpoints (step > 0; all of them when there are no more), in step order: the first,
    the last and each of ``required`` that is available, then the checkpoint farthest in log-step from
    those already chosen, again and again (ties: the later one), so the rest spread evenly in log-step."""
    import math

    steps = [s for s in available if s > 0]
    if len(steps) <= panels:
        return steps
    picks = [s for s in dict.fromkeys([steps[0], steps[-1], *required]) if s in steps][:panels]
    while len(picks) < panels:
        gap = lambda s: min(abs(math.log2(s) - math.log2(p)) for p in picks)  # noqa: E731
        picks.append(max((s for s in steps if s not in picks), key=lambda s: (gap(s), s)))
    return sorted(picks)


def run_label(train: dict) -> str:
    """The training config of a run's MNIST networks (an ``mnist.train`` section), in words, for the
    figures' titles: optimizer, rate, batch and the last step."""
    recipe = {"schedulefree_adamw": "schedule-free AdamW", "adamw": "AdamW"}.get(train["optimizer"], train["optimizer"])
    last = train["checkpoints"]["last_pow"]
    return f"{recipe}, lr {train['lr']:g}, batch {train['batch_size']}, to step 2^{last}"


def check_figure_steps(requested: list, attacked: list[int]) -> None:
    """Refuse, when the workflow is parsed, a step number in ``mnist.ablation.figure_steps`` that is
    not attacked (``mnist.ablation.steps``)."""
    for item in requested:
        if isinstance(item, int) and item not in attacked:
            raise ConfigError(f"config key 'mnist.ablation.figure_steps' names step {item}, which is not attacked;"
                              f" use \"accuracy_level\", \"last\" or one of {attacked} (or add it to mnist.ablation.steps).")


# ------------------------------------------------------------------------------------------ seeds
def study_seeds(value, seeds, key: str) -> list[int]:
    """The seeds a study beyond the paper runs at (config ``key``, e.g. ``cubic.capacity.seeds``):
    ``"all"`` (or absent, ``None``) gives every seed of ``seeds``; a list must be a non-empty subset
    of ``seeds`` (the study reads those seeds' trained networks), returned in its own order.
    Raises :class:`ConfigError` naming ``key`` and the seeds the run trains otherwise."""
    seeds = [int(s) for s in seeds]
    if value is None or value == "all":
        return seeds
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f"config key '{key}' is {value!r}; write \"all\" or a non-empty list of seeds from "
                          f"'seeds' ({seeds}).")
    chosen = []
    for s in value:
        if isinstance(s, bool) or not isinstance(s, int) or int(s) not in seeds:
            raise ConfigError(f"config key '{key}' names seed {s!r}, which the run does not train: config key "
                              f"'seeds' is {seeds}; name seeds from it, or \"all\".")
        if int(s) not in chosen:
            chosen.append(int(s))
    return chosen



# ----------------------------------------------------------------------------------- the cubic views
CAPACITY_NAME = r"[A-Za-z][A-Za-z0-9_]*"  # a cubic.capacity.variants name (the schema's pattern)
# the {view} wildcard: "", "/layer{L}", "/train_step{S}" or "/capacity_{name}"
VIEW_PATTERN = rf"(?:/layer\d+|/train_step\d+|/capacity_{CAPACITY_NAME})?"
_ROOT = "results/cubic/seed{seed}"


class CubicViews:
    """The views one config asks for, and what each view rule needs of its ``{view}`` wildcard
    (parsed once when the workflow is, so that bad ``cubic.layers`` / ``cubic.training`` /
    ``cubic.capacity`` keys fail then). ``view`` is ``""`` (today's files), ``"/layer{L}"``,
    ``"/train_step{S}"`` or ``"/capacity_{name}"``."""

    def __init__(self, cubic: dict, device: str):
        self.cubic, self.device = cubic, device
        self.widths = [int(w) for w in cubic["model"]["widths"]]
        self.last = len(self.widths) - 2
        self.layer_saes = layer_saes(cubic["layers"]["saes"], self.widths)
        self.layers = sorted({*self.layer_saes, self.last})  # rows of layers.parquet, the last included
        self.steps = training_steps(cubic["training"]["steps"], cubic["train"])
        # the final model is the last eval checkpoint unless training may stop early at the target
        self.final_step = None if cubic["train"]["stop_at_target"] else int(cubic["train"]["steps"])
        self.capacity = capacity_variants(cubic["capacity"], self.widths, cubic["train"])

    @staticmethod
    def kind(view: str) -> tuple[str, int | str | None]:
        """("layer", L), ("train_step", S), ("capacity", name) or ("root", None)."""
        if view.startswith("/capacity_"):
            return "capacity", view[len("/capacity_") :]
        for kind in ("layer", "train_step"):
            if view.startswith(f"/{kind}"):
                return kind, int(view[len(kind) + 1 :])
        return "root", None

    def layer_view(self, layer: int) -> str:
        return "" if int(layer) == self.last else f"/layer{int(layer)}"

    def step_view(self, step: int) -> str:
        return "" if int(step) == self.final_step else f"/train_step{int(step)}"

    def capacity_view(self, name: str) -> str:
        return "" if self.capacity[name]["is_model"] else f"/capacity_{name}"

    def model(self, seed, view: str) -> str:
        """The regressor a view reads: a checkpoint's extracted model, a capacity variant's own model,
        else the final model."""
        kind, which = self.kind(view)
        if kind == "capacity":
            self._variant(seed, view)
        folder = {"train_step": f"/train_step{which}", "capacity": f"/capacity_{which}"}.get(kind, "")
        return f"{_ROOT}{folder}/model.pt".format(seed=seed)

    def _variant(self, seed, view: str) -> dict:
        name = self.kind(view)[1]
        if name not in self.capacity or self.capacity[name]["is_model"]:
            why = "is today's regressor (results/cubic/seed{seed}/)" if name in self.capacity else \
                "is not a variant of config key 'cubic.capacity.variants'"
            raise ConfigError(f"results/cubic/seed{seed}{view}/ asks for capacity variant {name!r}, which "
                              f"{why.format(seed=seed)}; ask for the variants the config lists.")
        return self.capacity[name]

    def capacity_train_params(self, seed, name: str) -> dict:
        """Rule cubic_capacity_train's params: cubic_train's, with the variant's widths and steps."""
        variant = self._variant(seed, f"/capacity_{name}")
        return {"task": self.cubic["task"], "model": {"widths": variant["widths"]},
                "train": {**self.cubic["train"], "steps": variant["steps"]}, "seed": int(seed), "device": self.device}

    def capacity_rows(self, seeds) -> list[dict]:
        return [{"seed": int(s), "variant": name, "widths": v["widths"], "is_model": v["is_model"],
                 "steps": v["steps"]} for s in seeds for name, v in self.capacity.items()]

    def capacity_files(self, pattern: str, seeds) -> list[str]:
        """``pattern`` (a view rule's or cubic_train's output) for every seed × variant, seed-major."""
        return self.files(str(pattern).replace(f"{_ROOT}/", f"{_ROOT}{{view}}/", 1) if "{view}" not in str(pattern)
                          else pattern, [self.capacity_view(n) for n in self.capacity], seeds)

    def activations_params(self, seed, view: str) -> dict:
        """cubic.activations, and the layer for a layer view (today's files keep their params)."""
        params = {**self.cubic["activations"], "seed": int(seed), "device": self.device}
        kind, layer = self.kind(view)
        if kind == "layer":
            params["layer"] = layer
        return params

    def sae_params(self, seed, view: str) -> dict:
        """cubic.sae, with latents and k of cubic.layers.saes for another hidden layer."""
        params = {**self.cubic["sae"], "seed": int(seed), "device": self.device}
        kind, layer = self.kind(view)
        if kind == "layer" and layer != self.last:
            if layer not in self.layer_saes:
                raise ConfigError(f"results/cubic/seed{seed}{view}/ asks for an SAE on hidden layer {layer}, which "
                                  f"config key 'cubic.layers.saes' does not size; add {{layer: {layer}, latents: ..., k: ...}}.")
            params.update(self.layer_saes[layer])
        return params

    def bands_params(self, seed, view: str) -> dict:
        """cubic.bands; another layer or checkpoint keeps only its band latents in band_grid.pt."""
        params = {**self.cubic["bands"], "seed": int(seed), "device": self.device}
        if view:
            params["grid_latents"] = "bands"
        return params

    def latents(self, view: str) -> int:
        kind, layer = self.kind(view)
        return self.layer_saes[layer]["latents"] if kind == "layer" and layer in self.layer_saes \
            else int(self.cubic["sae"]["latents"])

    def mem_mb(self, view: str, points: int) -> int:
        """Memory of a rule holding ``points`` × latents float32 latent values (a few copies)."""
        return max(3000, int(1500 + 12 * points * self.latents(view) / 2**20))

    @staticmethod
    def root(pattern: str) -> str:
        """A view rule's output pattern for today's files (the empty view)."""
        return str(pattern).replace("{view}", "")

    def files(self, pattern: str, views: list[str], seeds) -> list[str]:
        """``pattern`` (a view rule's output) for every seed × view, seed-major: the order of the rows."""
        return [str(pattern).replace("{view}", v).format(seed=s) for s in seeds for v in views]

    def layer_rows(self, seeds) -> list[dict]:
        return [{"seed": int(s), "layer": layer, "width": self.widths[layer], "is_last": layer == self.last}
                for s in seeds for layer in self.layers]

    def step_rows(self, seeds) -> list[dict]:
        total = int(self.cubic["train"]["steps"])
        return [{"seed": int(s), "step": step, "is_final": step == total} for s in seeds for step in self.steps]


# ------------------------------------------------------------------------------------ the cubic grid
def seed_params(cubic_cfg: dict, seed, device: str) -> dict:
    """Rule cubic_grid_seed's params (:func:`polyinterp.cubic.views.grid.grid_seed_step`): the x range,
    ``cubic.grid``'s network, training, activations and SAE size (the rest of the SAE's settings from
    ``cubic.sae``, its R² target aside), checked, and ``points``: each grid point's ``ia``, ``ib``,
    ``a``, ``b`` (the order of :func:`point_files`)."""
    grid = cubic_cfg["grid"]
    sae = {**{k: v for k, v in cubic_cfg["sae"].items() if k != "r2_target"}, **grid["sae"]}
    if not 1 <= int(sae["k"]) <= int(sae["latents"]):
        raise ConfigError(f"config key 'cubic.grid.sae.k' ({sae['k']}) must be between 1 and cubic.grid.sae.latents "
                          f"({sae['latents']}).")
    if int(sae["batch_size"]) > int(grid["activations"]["n_train"]):
        raise ConfigError(f"config key 'cubic.grid.activations.n_train' ({grid['activations']['n_train']}) is below "
                          f"cubic.sae.batch_size ({sae['batch_size']}), the grid SAEs' batch; raise it.")
    return {"x_range": list(cubic_cfg["task"]["ranges"]["x"]), "widths": check_widths(grid["widths"]),
            "train": grid["train"], "activations": grid["activations"], "sae": sae, "seed": int(seed),
            "device": device, "points": grid_points(grid, cubic_cfg["task"]["ranges"])}


def summary_params(cubic_cfg: dict, seeds, device: str) -> dict:
    """Rule cubic_grid_summary's params: every (seed, grid point), the x line and the scores' settings."""
    points = grid_points(cubic_cfg["grid"], cubic_cfg["task"]["ranges"])
    return {"rows": [{"seed": int(s), **p} for s in seeds for p in points], "seeds": [int(s) for s in seeds],
            "x_range": list(cubic_cfg["task"]["ranges"]["x"]), **cubic_cfg["grid"]["score"],
            "bump_width": cubic_cfg["landmarks"]["bump_width"], "device": device}


def point_files(pattern: str, cubic_cfg: dict, seeds) -> list[str]:
    """``pattern`` (with {seed}, {ia}, {ib}) for every seed × grid point, seed-major: the order of the rows."""
    points = grid_points(cubic_cfg["grid"], cubic_cfg["task"]["ranges"])
    return [str(pattern).format(seed=s, ia=p["ia"], ib=p["ib"]) for s in seeds for p in points]


# ---------------------------------------------------------------------------- Snakemake's scheduler
# Snakemake 9's scheduler (snakemake.scheduling.job_scheduler.JobScheduler) runs a pass whenever its
# semaphore is released: a job finished, or a threading.Timer it started fired. Every pass that found
# ready jobs (whether it started them or they wait) ends by starting such a timer, of the job rate limit's
# timespan (--max-jobs-per-timespan, default 100/1s), so that jobs the limit held back are looked at again
# (_schedule_reevalutation). A pass started by a timer starts the next one; a pass started by a finished
# job starts one more. So while jobs wait for a core, every finished job adds a chain of passes, one a
# second, until no job is ready: after k finished jobs, k passes a second, each re-reading every ready
# job's params, resources and input sizes (bench/README.md, "Snakemake's re-evaluation timers").


def _one_pending_reevaluation(self, delay) -> None:
    """``JobScheduler._schedule_reevalutation`` with at most one pending timer per ``delay``: a pass asks for
    a re-evaluation after ``delay`` as before, but while one with that delay is pending no second one is
    started. The pending one, when it fires, runs a pass, and that pass asks again if jobs still wait, so
    a job the rate limit held back is looked at again at most two delays after (Snakemake's own: one; the
    limit, 100 jobs a second by default, does not bind on a workstation). The timers are daemon threads:
    the process does not wait for the last one at its end."""
    pending = self.__dict__.setdefault("_polyinterp_pending_reevaluations", set())
    if delay in pending:
        return
    pending.add(delay)

    def fire():
        pending.discard(delay)  # before the release: the pass it starts may ask for the next one
        self._open_jobs.release()

    timer = threading.Timer(delay, fire)
    timer.daemon = True
    timer.start()


def one_reevaluation_timer() -> bool:
    """Give Snakemake's ``JobScheduler`` :func:`_one_pending_reevaluation` in place of its own method (the
    Snakefile calls it; nothing else in Snakemake changes). Returns whether it is in place: False where the
    installed Snakemake has no such method (another version's scheduler, left as it is). Calling it again
    changes nothing."""
    try:
        from snakemake.scheduling.job_scheduler import JobScheduler
    except ImportError:
        return False
    if not hasattr(JobScheduler, "_schedule_reevalutation"):
        return False
    JobScheduler._schedule_reevalutation = _one_pending_reevaluation
    return True
