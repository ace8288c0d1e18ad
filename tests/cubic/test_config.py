import copy
from pathlib import Path

import pytest

from polyinterp.config import load_yaml, validate_config
from polyinterp.errors import ConfigError
from workflow_helpers import merged_config

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def merged(*overrides):
    return merged_config(*overrides)


@pytest.mark.parametrize("overrides", [(), ("smoke.yaml",), ("paper.yaml",)])
def test_configs_validate(overrides):
    validate_config(merged(*overrides), SCHEMA)


@pytest.mark.parametrize("path, value, key", [
    (("cubic", "sae", "kk"), 1, "cubic.sae.kk"),
    (("cubic", "train", "lr"), -0.1, "cubic.train.lr"),
    (("cubic", "task", "ranges", "x"), [1.0], "cubic.task.ranges.x"),
    (("cubic", "clamp", "latents"), "all", "cubic.clamp.latents"),
    (("cubic", "bands", "coherence_min"), 1.5, "cubic.bands.coherence_min"),
])
def test_bad_cubic_keys_are_named(path, value, key):
    cfg = copy.deepcopy(merged())
    node = cfg
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        validate_config(cfg, SCHEMA)


def test_every_cubic_schema_key_is_described_and_closed():
    schema = load_yaml(ROOT / "workflow" / "schemas" / "config.schema.yaml")["properties"]["cubic"]

    def walk(node, where):
        if node.get("type") == "object" or "properties" in node:
            assert node.get("additionalProperties") is False, where
            assert set(node.get("required", [])) == set(node["properties"]), where
            for k, sub in node["properties"].items():
                assert sub.get("description"), f"{where}.{k}"
                walk(sub, f"{where}.{k}")

    walk(schema, "cubic")


@pytest.mark.parametrize("path, value, key", [
    (("cubic", "joint_clamp", "landmark_kind"), "best", "cubic.joint_clamp.landmark_kind"),
    (("cubic", "joint_clamp", "shift", "delta_step"), 0, "cubic.joint_clamp.shift.delta_step"),
    (("cubic", "joint_clamp", "verdict", "r2_min"), 2, "cubic.joint_clamp.verdict.r2_min"),
    (("cubic", "joint_clamp", "interventions"),
     [{"name": "x", "each": True, "clamps": [{"latents": "bands", "factor": 1.5}, {"latents": [1], "factor": 0}]}],
     "cubic.joint_clamp.interventions.0.clamps"),
    (("cubic", "joint_clamp", "interventions"), [{"name": "x", "clamps": [{"latents": "bands", "factor": 1.5}]}],
     "cubic.joint_clamp.interventions.0.each"),
    (("cubic", "joint_clamp", "interventions"),
     [{"name": "x", "each": False, "clamps": [{"latents": "all", "factor": 1.5}]}],
     "cubic.joint_clamp.interventions.0.clamps.0.latents"),
    (("cubic", "thresholds", "c_tol"), [], "cubic.thresholds.c_tol"),
    (("cubic", "thresholds", "coherence_min"), [0.5, 1.5], "cubic.thresholds.coherence_min.1"),
])
def test_bad_joint_clamp_and_threshold_keys_are_named(path, value, key):
    test_bad_cubic_keys_are_named(path, value, key)


@pytest.mark.parametrize("path, value, key", [
    (("cubic", "layers", "saes"), [{"layer": 1, "latents": 256}], "cubic.layers.saes.0.k"),
    (("cubic", "layers", "saes"), [{"layer": 0, "latents": 256, "k": 4}], "cubic.layers.saes.0.layer"),
    (("cubic", "layers", "saes"), {"layer": 1}, "cubic.layers.saes"),
    (("cubic", "training", "steps"), {"log_spaced": 0}, "cubic.training.steps"),
    (("cubic", "training", "steps"), ["first"], "cubic.training.steps"),
    (("cubic", "training", "steps"), [], "cubic.training.steps"),
])
def test_bad_layer_and_training_keys_are_named(path, value, key):
    test_bad_cubic_keys_are_named(path, value, key)


@pytest.mark.parametrize("path, value, key", [
    (("cubic", "capacity", "variants"), [{"name": "a", "widths": [2, 8, 1]}], "cubic.capacity.variants.0.widths.0"),
    (("cubic", "capacity", "variants"), [{"name": "8x", "widths": [3, 8, 1]}], "cubic.capacity.variants.0.name"),
    (("cubic", "capacity", "variants"), [], "cubic.capacity.variants"),
    (("cubic", "capacity", "train_steps"), 0, "cubic.capacity.train_steps"),
    (("cubic", "grid", "widths"), [3, 15, 1], "cubic.grid.widths.0"),
    (("cubic", "grid", "score", "x_bins"), 1, "cubic.grid.score.x_bins"),
    (("cubic", "grid", "sae"), {"latents": 8, "k": 2}, "cubic.grid.sae.steps"),
    (("cubic", "grid", "enabled"), "yes", "cubic.grid.enabled"),
])
def test_bad_capacity_and_grid_keys_are_named(path, value, key):
    test_bad_cubic_keys_are_named(path, value, key)
