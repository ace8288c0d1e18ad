# Helpers shared by every rules file: config validation, seeds, checkpoint steps, the step CLI.
import json
import sys
from pathlib import Path

from snakemake_interface_executor_plugins.settings import DeploymentMethod

from polyinterp.config import validate_config
from polyinterp.mnist.schedule import checkpoint_steps

validate_config(config, Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml")

SEEDS = [int(s) for s in config["seeds"]]
MNIST_STEPS = checkpoint_steps(**config["mnist"]["train"]["checkpoints"])
ALL_TARGETS = []  # each rules file appends its final outputs; `rule all` builds them

SRC = Path(workflow.basedir) / "src"
# Inside a conda env (--sdm conda) the env's python runs the steps; otherwise the interpreter
# that runs snakemake (the project's venv), so nothing needs activating.
_PYTHON = (
    "python"
    if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
    else sys.executable
)
POLYINTERP = f'PYTHONPATH="{SRC}"${{PYTHONPATH:+:$PYTHONPATH}} "{_PYTHON}" -m polyinterp'
CONDA_ENV = "../../envs/polyinterp.yaml"


wildcard_constraints:
    seed=r"\d+",
    step=r"\d+",


def step_params(section, **extra):
    """JSON for a step's --params: a config section plus the global device and extra values."""
    return json.dumps({**section, "device": config["device"], **extra}, sort_keys=True)


def log_path(name):
    return f"results/logs/{name}.log"


def bench_path(name):
    return f"results/benchmarks/{name}.tsv"
