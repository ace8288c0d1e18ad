"""results/run_config.yaml records the config; a report under another config is refused (issue 16)."""

from pathlib import Path

import pytest
import yaml

from polyinterp.config import config_hash
from polyinterp.errors import DataError
from polyinterp.run_config import config_mismatch, read_run_config, run_config_step
from workflow_helpers import SMOKE, run_snakemake

CONFIG = {"seeds": [0], "mnist": {"train": {"lr": 0.002, "hidden": 256}}, "device": "auto"}


def _write(tmp_path, config, files=("config.yaml",)):
    path = tmp_path / "run_config.yaml"
    run_config_step(run_config=str(path), params={"config": config, "configfiles": list(files),
                                                  "config_hash": config_hash(config)})
    return path


def test_record_holds_the_config_its_hash_and_files(tmp_path):
    path = _write(tmp_path, CONFIG, ("config.yaml", "smoke.yaml"))
    record = yaml.safe_load(path.read_text())
    assert record["config"] == CONFIG and record["config_hash"] == config_hash(CONFIG)
    assert record["configfiles"] == ["config.yaml", "smoke.yaml"] and record["written"].endswith("UTC")
    assert [p.name for p in tmp_path.iterdir()] == ["run_config.yaml"]  # no temp file left


def test_same_config_agrees_another_names_the_differing_keys(tmp_path):
    path = _write(tmp_path, CONFIG)
    assert config_mismatch(path, CONFIG, ["config.yaml"]) is None
    other = {**CONFIG, "seeds": [0, 1], "mnist": {"train": {"lr": 0.01, "hidden": 256}}}
    msg = config_mismatch(path, other, ["config.yaml", "paper.yaml"])
    assert "mnist.train.lr" in msg and "seeds" in msg and "hidden" not in msg
    assert config_hash(CONFIG) in msg and config_hash(other) in msg and "paper.yaml" in msg
    assert config_mismatch(tmp_path / "absent.yaml", other, []) is None  # nothing recorded yet


def test_unreadable_record_names_itself(tmp_path):
    path = tmp_path / "run_config.yaml"
    path.write_text("- just a list\n")
    with pytest.raises(DataError, match="run_config.yaml is unreadable.*delete it"):
        read_run_config(path)


def test_a_report_under_another_config_is_refused_and_a_run_warns(tmp_path):
    """The failure of issue 16 item 7: after a smoke run, `snakemake --report` without --configfile
    packaged the smoke figures under the default config."""
    run_snakemake(tmp_path, "--cores", "1", "run_config", configfiles=(SMOKE,))
    record = yaml.safe_load((tmp_path / "results" / "run_config.yaml").read_text())
    # relative to the repository: a published run.json does not carry the path of the machine's clone
    assert record["configfiles"] == ["workflow/configs/smoke.yaml"]
    assert record["config"]["mnist"]["preprocess"]["pool"] == 4
    # the same config: no warning
    same = run_snakemake(tmp_path, "-n", "run_config", configfiles=(SMOKE,))
    assert "another config" not in same.stdout + same.stderr
    # another config (the default): a dry run warns, a report refuses naming the config to use
    other = run_snakemake(tmp_path, "-n", "run_config", configfiles=())
    assert "results/ was made with another config" in other.stdout + other.stderr
    report = run_snakemake(tmp_path, "--report", str(tmp_path / "r.html"), configfiles=(), check=False)
    text = report.stdout + report.stderr
    assert report.returncode != 0 and not (tmp_path / "r.html").exists()
    assert "would package those figures" in text and "(--configfile workflow/configs/smoke.yaml)" in text
    assert "Keys that differ: cubic.activations.n_heldout" in text
    # the default config's run rewrites the record, after which its report agrees
    run_snakemake(tmp_path, "--cores", "1", "run_config", configfiles=())
    assert yaml.safe_load((tmp_path / "results" / "run_config.yaml").read_text())["config_hash"] != record["config_hash"]
    assert yaml.safe_load((tmp_path / "results" / "run_config.yaml").read_text())["configfiles"] == []
    assert "another config" not in run_snakemake(tmp_path, "-n", "run_config", configfiles=()).stderr


def test_config_files_are_recorded_relative_to_the_repository(tmp_path, monkeypatch):
    from polyinterp.run_config import repository_relative

    repo = tmp_path / "clone"
    (repo / "workflow" / "configs").mkdir(parents=True)
    inside = repo / "workflow" / "configs" / "paper.yaml"
    outside = tmp_path / "mine.yaml"
    assert repository_relative([inside, str(outside)], repo) == ["workflow/configs/paper.yaml", str(outside.resolve())]
    assert repository_relative(["workflow/configs/paper.yaml"], Path.cwd()) == ["workflow/configs/paper.yaml"]
    # relative paths are the run's (Snakemake's working directory), whatever the publisher's directory
    (tmp_path / "main").mkdir()
    monkeypatch.chdir(tmp_path / "main")
    assert repository_relative(["workflow/configs/paper.yaml"], repo) == ["workflow/configs/paper.yaml"]


def test_the_machine_record_names_the_cpu_family_and_model(tmp_path):
    from polyinterp.run_config import machine_record

    cpuinfo = tmp_path / "cpuinfo"
    # two logical CPUs of a Zen 4 virtual machine, as /proc/cpuinfo lists them (fields abridged)
    core = ("vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\n"
            "flags\t\t: fpu avx2 avx512f avx512_bf16\n\n")
    cpuinfo.write_text(core.replace("vendor", "processor\t: 0\nvendor") + core.replace("vendor", "processor\t: 1\nvendor"))
    record = machine_record(cpuinfo)
    assert (record["cpu"], record["family"], record["model"]) == ("AMD EPYC", 25, 17)
    assert record["flags"] == ["avx2", "avx512f", "avx512_bf16"]
    unreadable = machine_record(tmp_path / "absent")
    assert (unreadable["cpu"], unreadable["family"], unreadable["model"]) == ("unknown", None, None)


def test_the_software_record_names_the_versions_the_run_imports(monkeypatch):
    import sys

    import numpy
    import snakemake
    import torch

    from polyinterp import run_config

    record = run_config.software_record()
    # torch's version with its build tag (the distribution's metadata drops it)
    assert record["python"] == "{}.{}.{}".format(*sys.version_info[:3])
    assert (record["torch"], record["numpy"], record["snakemake"]) == (
        torch.__version__, numpy.__version__, snakemake.__version__)
    monkeypatch.setattr(run_config, "SOFTWARE", ("torch", "no-such-distribution-polyinterp"))
    assert run_config.software_record()["no-such-distribution-polyinterp"] is None


def test_the_run_config_record_carries_machine_and_software():
    from polyinterp.run_config import config_hash, run_config_record

    record = run_config_record({"seed": 0}, ["workflow/configs/smoke.yaml"])
    assert record["config_hash"] == config_hash({"seed": 0})
    assert set(record["machine"]) >= {"cpu", "family", "model", "flags", "cores_online"}
    assert set(record["software"]) == {"python", "torch", "numpy", "snakemake"}
