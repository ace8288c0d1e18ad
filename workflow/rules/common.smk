# Helpers shared by every rules file: config validation, seeds, checkpoint steps, the step CLI.
import sys
from pathlib import Path

from snakemake_interface_executor_plugins.settings import DeploymentMethod

from polyinterp.cli import step_files, step_params
from polyinterp.config import validate_config
from polyinterp.rules import (check_figure_steps, checkpoint_steps, panel_steps, resolve_steps, run_label,
                              selected_steps, sgd_checkpoints, sgd_settings, study_seeds, train_params)
from polyinterp.mnist.model_specs import resolve_models
from polyinterp.run_config import RUN_CONFIG  # rule run_config (run_config.smk) writes it; named targets ask for it

validate_config(config, Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml")

SEEDS = [int(s) for s in config["seeds"]]
# The MNIST networks (mnist.models), trained and analysed side by side: the {model} wildcard.
MODELS = {m.name: m for m in resolve_models(config["mnist"])}
MODEL_NAMES = list(MODELS)
MNIST_STEPS = checkpoint_steps(**config["mnist"]["train"]["checkpoints"])
# The checkpoints analysed by default: step 0 (the untrained network) is saved but no figure or
# scorecard row reads its analyses (log-step axes), so "all" means every checkpoint after it.
ANALYSIS_STEPS = [s for s in MNIST_STEPS if s > 0]
ALL_TARGETS = []  # each rules file appends its final outputs; `rule all` builds them

SRC = Path(workflow.basedir) / "src"
# Inside a conda env (--sdm conda) the env's python runs the steps; otherwise the interpreter
# that runs snakemake (the project's venv), so nothing needs activating.
_PYTHON = (
    "python"
    if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
    else sys.executable
)
# Each step calls the package through this shell function (the one CLI, `polyinterp <step> ...`).
# Snakemake formats the prefix like a command: braces are doubled.
_CLI = 'polyinterp() {{ PYTHONPATH="<SRC>"${{PYTHONPATH:+:$PYTHONPATH}} "<PYTHON>" -m polyinterp "$@"; }}; '
_CLI = _CLI.replace("<SRC>", str(SRC)).replace("<PYTHON>", _PYTHON)
shell.prefix(f"set -euo pipefail; {_CLI}")
CONDA_ENV = "../../envs/polyinterp.yaml"


wildcard_constraints:
    seed=r"\d+",
    step=r"\d+",
    model="|".join(MODEL_NAMES),


def mnist_dir(model="{model}", seed="{seed}"):
    """The per-(model, seed) folder of the MNIST study."""
    return f"results/mnist/{model}/seed{seed}"


def mnist_file(rel, model="{model}", seed="{seed}"):
    """A file under the per-(model, seed) folder: ``rel`` relative to :func:`mnist_dir`."""
    return f"{mnist_dir(model, seed)}/{rel}"


def mnist_ckpt(model="{model}", seed="{seed}", step="{step}"):
    return f"{mnist_dir(model, seed)}/ckpt/step{step}.pt"


def mnist_approx(model="{model}", seed="{seed}", step="{step}"):
    return f"{mnist_dir(model, seed)}/approx/step{step}.pt"


def previous_approx(wildcards):
    """Warm start from the same model and seed's previous checkpoint, declared as an input so that
    results never depend on job order (off with mnist.approx.warm_start: false)."""
    step = int(wildcards.step)
    i = MNIST_STEPS.index(step)
    if not config["mnist"]["approx"]["warm_start"] or i == 0 or MNIST_STEPS[i - 1] not in ANALYSIS_STEPS:
        return []  # the first analysed checkpoint starts cold (step 0 is not analysed by default)
    return [mnist_approx(wildcards.model, wildcards.seed, MNIST_STEPS[i - 1])]


SGD_STEPS = sgd_checkpoints(config["mnist"]["approx"]["sgd"]["checkpoints"], ANALYSIS_STEPS)

# Rule mnist_degree_approximants (approximants beyond degree 2): where it runs; none without degrees.
DEGREE_STEPS = (
    selected_steps(config["mnist"]["approx"]["cubic"]["checkpoints"], ANALYSIS_STEPS,
                   "mnist.approx.cubic.checkpoints")  # in step order: the warm-start chain
    if config["mnist"]["approx"]["degrees"] else []
)


# The degree study (beyond the paper) may run at fewer seeds: mnist.approx.cubic.seeds, "all" or a subset.
DEGREE_SEEDS = study_seeds(config["mnist"]["approx"]["cubic"].get("seeds"), SEEDS, "mnist.approx.cubic.seeds")


def mnist_degree_approx(model="{model}", seed="{seed}", step="{step}"):
    return f"{mnist_dir(model, seed)}/degrees/step{step}.pt"


def previous_degree_approx(wildcards):
    """As previous_approx, for the higher-degree fits: the previous checkpoint that has them."""
    i = DEGREE_STEPS.index(int(wildcards.step))
    if not config["mnist"]["approx"]["warm_start"] or i == 0:
        return []
    return [mnist_degree_approx(wildcards.model, wildcards.seed, DEGREE_STEPS[i - 1])]


ABLATION_STEPS = (
    list(ANALYSIS_STEPS)
    if config["mnist"]["ablation"]["steps"] == "all"
    else resolve_steps(config["mnist"]["ablation"]["steps"], ANALYSIS_STEPS, "mnist.ablation.steps")
)
check_figure_steps(config["mnist"]["ablation"]["figure_steps"], ABLATION_STEPS)

# The first analysed checkpoints, where rule mnist_early_fvu measures each cause of the early linear FVU.
EARLY_FVU_STEPS = ANALYSIS_STEPS[: config["mnist"]["early_fvu"]["checkpoints"]]


def figure_files(name):
    return [f"results/figures/{name}.pdf", f"results/figures/{name}.png"]


def report_figure(name, category, caption=None):
    """The figure's PDF, and its PNG marked for `snakemake --report` with a caption
    (``report/<caption or name>.rst``; a per-model figure passes its figure's caption)."""
    pdf, png = figure_files(name)
    return [pdf, report(png, caption=f"../report/{caption or name}.rst", category=category)]


def model_figure_files(name, models=None):
    """The files of a per-model figure (``results/figures/<name>_<model>.{pdf,png}``) of every model."""
    return [f for m in (models or MODEL_NAMES) for f in figure_files(f"{name}_{m}")]


FIG1_STEPS = panel_steps(MNIST_STEPS, config["mnist"]["figures"]["panels"])
RUN_LABEL = run_label(config["mnist"]["train"])  # the training config, in the MNIST figures' titles


DEVICE = config["device"]


def cubic_section_params(section):
    """The params of a per-seed cubic step that reads one config section (cubic.<section>): the section,
    the seed and the device."""
    return lambda wc: {**config["cubic"][section], "seed": int(wc.seed), "device": DEVICE}


# Every step rule closes with these directives, the same in each but for their arguments.
#     params: **step_args("<rule>", lambda wc: {...the config keys the step reads...})
#     log: log_path("<name>")
#     resources: **TABLE_JOB                 (or the rule's own mem_mb and runtime, below)
#     conda: CONDA_ENV
#     shell: STEP
# The rule names its step (its own name) once, in step_args, and tests/test_dag.py checks that every
# job's command runs the step of its own rule. None declares a Snakemake benchmark file; the step
# writes its own CPU, wall and peak RSS as the last line of its log (polyinterp.run_log.job_line), which
# the run-time readers take, and Snakemake's poller of benchmarked jobs cost about 1 CPU s a job in
# Snakemake's own process (bench/README.md, "Job records instead of Snakemake's benchmark files").
#
# Threads are one a job, in each of the rules. The exact fit runs 1.7-1.8x faster on two threads than on
# one when timed alone, but a whole job (reading, set-up, metrics, writing) averages 1.1-1.3 cores on
# two, and a two-thread job holds both cores of a 2-core machine, so the MNIST jobs ran one at a time.
# One thread each lets two jobs run side by side: the default config's run took 0.71x the wall time,
# the same verdicts, its numbers within the solver's tolerance and a few flipped test images
# (bench/README.md, "Packing: one thread a job"). It also makes a run's numbers independent of
# --cores. On a machine with more cores than jobs ready, raise a rule's threads with
# `--set-threads mnist_approximants=4` (Snakemake's own flag).
STEP = "polyinterp {params.step} {params.files} --threads {threads} > {log:q} 2>&1"


def step_args(rule, params=None):
    """The params of STEP, for ``params: **step_args("<rule>", lambda wc: {...})``: ``step``, the step's
    name with its ``--params JSON`` (polyinterp.cli.step_params: an unknown step fails at parse time),
    and ``files``, the rule's named inputs and outputs as ``--key PATH`` (polyinterp.cli.step_files)."""
    return {"step": step_params(rule, params), "files": step_files}


def log_path(name):
    return f"results/logs/{name}.log"


# Resources (mem_mb, runtime in minutes) shared by the rules whose measured needs are alike; a rule
# with needs of its own declares them itself, as every rule that asks for a GPU does (`gpu=1`, which
# tests/cluster matches against the SLURM profile's set-resources). They stay in the rules: the default
# profile's default-resources would replace the SLURM profile's key by key.
TABLE_JOB = {"mem_mb": 1000, "runtime": 5}  # a summary table (and its Markdown) from other tables
MNIST_FIGURE_JOB = {"mem_mb": 2000, "runtime": 10}
CUBIC_FIGURE_JOB = {"mem_mb": 1500, "runtime": 5}
