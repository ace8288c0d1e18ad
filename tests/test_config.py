"""The config schema: every shipped config validates; misspelt, missing and out-of-range keys are
rejected with a message naming the key, before Snakemake schedules any job."""

import copy

import pytest
import yaml

from workflow_helpers import REPO, SMOKE, run_snakemake

SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
from polyinterp.config import config_hash, validate_config
from polyinterp.errors import ConfigError


def deep_merge(base, over):
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


@pytest.fixture()
def default_config():
    return yaml.safe_load((REPO / "config.yaml").read_text())


SHIPPED = sorted(p.stem for p in (REPO / "workflow/configs").glob("*.yaml"))


def test_the_shipped_overlays_are_all_checked():
    assert {"smoke", "paper", "authors_code"} <= set(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_configs_validate(default_config, name):
    validate_config(default_config, SCHEMA)
    validate_config(deep_merge(default_config, yaml.safe_load((REPO / "workflow/configs" / f"{name}.yaml").read_text())), SCHEMA)


@pytest.mark.parametrize(
    "mutate, key",
    [
        (lambda c: c["mnist"]["train"].update(lrr=0.1), "mnist.train.lrr"),
        (lambda c: c["mnist"]["train"].update(lr=-1.0), "mnist.train.lr"),
        (lambda c: c["mnist"]["train"].pop("hidden"), "mnist.train.hidden"),
        (lambda c: c["mnist"]["preprocess"].update(pool=3), "mnist.preprocess.pool"),
        (lambda c: c["mnist"]["data"].update(sources=["ftp"]), "mnist.data.sources.0"),
        (lambda c: c.update(device="gpu"), "device"),
        (lambda c: c.update(seeds=[]), "seeds"),
        (lambda c: c["mnist"]["train"]["checkpoints"].update(per_octave=0), "mnist.train.checkpoints.per_octave"),
        (lambda c: c["mnist"]["mixture"].update(ridge=0), "mnist.mixture.ridge"),
        (lambda c: c["mnist"]["ablation"].update(bases=["mixture", "whitened"]), "mnist.ablation.bases.1"),
        (lambda c: c["mnist"]["ablation"].update(bases=["mixture", "mixture"]), "mnist.ablation.bases"),
        (lambda c: c["mnist"]["ablation"].update(steps="every"), "mnist.ablation.steps"),
        (lambda c: c["mnist"]["ablation"].update(figure_steps=["first"]), "mnist.ablation.figure_steps.0"),
        (lambda c: c["mnist"]["ablation"].update(accuracy_level=0), "mnist.ablation.accuracy_level"),
        (lambda c: c["mnist"]["train"].update(optimizer="sgd"), "mnist.train.optimizer"),
        (lambda c: c["mnist"]["train"].update(schedule="cosine"), "mnist.train.schedule"),
        (lambda c: c["mnist"]["train"].update(cosine_epochs=0), "mnist.train.cosine_epochs"),
        # schedule-free AdamW takes no schedule
        (lambda c: c["mnist"]["train"].update(optimizer="schedulefree_adamw", schedule="cosine_per_epoch"),
         "mnist.train.schedule"),
    ],
)
def test_bad_keys_are_named(default_config, mutate, key):
    mutate(default_config)
    with pytest.raises(ConfigError, match=f"config key '{key}'"):
        validate_config(default_config, SCHEMA)


def test_every_schema_property_is_documented_and_typed():
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    assert schema["$schema"].endswith("2020-12/schema")
    missing = []

    def walk(node, path):
        for name, sub in node.get("properties", {}).items():
            where = f"{path}.{name}".lstrip(".")
            if "description" not in sub or not ({"type", "enum", "const", "$ref", "oneOf", "anyOf"} & set(sub)):
                missing.append(where)
            if sub.get("type") == "object":
                if sub.get("properties") and sub.get("additionalProperties") is not False:
                    missing.append(where + " (additionalProperties must be false)")
                walk(sub, where)

    walk(schema, "")
    assert not missing, f"schema properties without type/description: {missing}"


def test_snakemake_stops_before_any_job_on_a_misspelt_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("mnist:\n  train:\n    hiden: 12\n")
    proc = run_snakemake(tmp_path, "-n", configfiles=(SMOKE, bad), check=False)
    assert proc.returncode != 0
    assert "config key 'mnist.train.hiden'" in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists()


def test_config_hash_is_stable_and_sensitive():
    a = {"lr": 0.1, "hidden": 4}
    assert config_hash(a) == config_hash({"hidden": 4, "lr": 0.1})
    assert config_hash(a) != config_hash({"lr": 0.2, "hidden": 4})


def test_inner_dtype_choices_are_what_the_library_accepts():
    from polyinterp.approx.solvers.precision import INNER_DTYPES

    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    enum = schema["properties"]["mnist"]["properties"]["approx"]["properties"]["inner_dtype"]["enum"]
    assert sorted(enum) == sorted(INNER_DTYPES)


def test_a_number_that_yaml_read_as_text_gets_a_hint(default_config):
    default_config["mnist"]["train"]["lr"] = "1e-3"  # what YAML 1.1 makes of `lr: 1e-3`
    with pytest.raises(ConfigError, match=r"config key 'mnist.train.lr'.*write 1\.0e-3"):
        validate_config(default_config, SCHEMA)


def test_an_unknown_attack_basis_is_refused_by_name(default_config):
    default_config["mnist"]["ablation"]["bases"] = ["mixture", "whitened"]
    with pytest.raises(ConfigError, match=r"'mnist.ablation.bases.1'.*whitened"):
        validate_config(default_config, SCHEMA)
