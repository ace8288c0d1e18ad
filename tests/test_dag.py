"""Dry runs: every config lists the jobs it should, and one figure builds only what it needs."""

import re

import pytest
import yaml

from workflow_helpers import REPO, SMOKE, merged_config, run_snakemake
from polyinterp.rules import study_seeds
from polyinterp.rules import checkpoint_steps
from polyinterp.run_log import parse_run_log

PAPER = REPO / "workflow" / "configs" / "paper.yaml"
ARCHITECTURES = REPO / "workflow" / "configs" / "architectures.yaml"


def job_counts(stdout: str) -> dict[str, int]:
    table = stdout[stdout.index("Job stats:") :]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M) if m.group(1) != "total"}


def merged(path):
    base = yaml.safe_load((REPO / "config.yaml").read_text())
    over = yaml.safe_load(path.read_text()) if path else {}
    for key in ("seeds",):
        base[key] = over.get(key, base[key])
    ck = {**base["mnist"]["train"]["checkpoints"], **over.get("mnist", {}).get("train", {}).get("checkpoints", {})}
    return base["seeds"], [s for s in checkpoint_steps(**ck) if s > 0]  # step 0 is saved, not analysed


def ablation_steps(path, steps):
    """The attacked steps of a config: mnist.ablation.steps, "all" (the default) or a list."""
    base = yaml.safe_load((REPO / "config.yaml").read_text())["mnist"]["ablation"]["steps"]
    want = (yaml.safe_load(path.read_text()) if path else {}).get("mnist", {}).get("ablation", {}).get("steps", base)
    if want == "all":
        return steps
    return sorted({steps[-1] if s == "last" else s for s in want})


@pytest.mark.parametrize("configfile", [None, SMOKE, PAPER, ARCHITECTURES],
                         ids=["default", "smoke", "paper", "architectures"])
def test_dry_run_lists_every_job(tmp_path, configfile):
    proc = run_snakemake(tmp_path, "-n", "--quiet", "rules", configfiles=(configfile,) if configfile else ())
    counts = job_counts(proc.stdout)
    seeds, steps = merged(configfile)
    models = len(merged_config(*([configfile] if configfile else []))["mnist"]["models"])
    assert counts["mnist_data"] == 1 and counts["mnist_mixture"] == 1 and counts["mnist_solver_plan"] == 1
    assert counts["mnist_train"] == models * len(seeds)
    assert counts["mnist_approximants"] == models * len(seeds) * len(steps)
    assert counts["mnist_metrics"] == models * len(seeds) * len(steps)
    assert counts["mnist_svd_ablation"] == models * len(seeds) * len(ablation_steps(configfile, steps))
    for rule in ("mnist_svd_ablation_all", "fig1_features", "fig4_ablated_digits", "fig5_ablation_accuracy",
                 "fig6_attack_strength"):  # per model
        assert counts[rule] == models, rule
    assert counts["mnist_early_fvu"] == models * len(seeds)
    for rule in ("mnist_metrics_all", "mnist_attack_summary", "mnist_early_fvu_summary", "fig2_fvu", "fig3_test",
                 "fig_fits_curves", "fig_models_fvu", "scorecard"):
        assert counts[rule] == 1, rule


@pytest.mark.parametrize(
    "target, needed, not_needed",
    [
        ("results/figures/fig2.pdf", {"mnist_metrics", "mnist_approximants", "fig2_fvu"}, {"mnist_svd_ablation", "fig3_test", "fig_fits_curves"}),
        ("results/figures/fig5_mlp_relu.pdf", {"mnist_svd_ablation", "fig5_ablation_accuracy"}, {"mnist_metrics", "fig4_ablated_digits"}),
        ("fig6", {"mnist_svd_ablation", "mnist_svd_ablation_all", "fig6_attack_strength"}, {"mnist_metrics", "fig5_ablation_accuracy"}),
        ("fig4", {"mnist_svd_ablation", "fig4_ablated_digits"}, {"mnist_metrics_all", "fig5_ablation_accuracy"}),
    ],
)
def test_one_figure_builds_only_what_it_needs(tmp_path, target, needed, not_needed):
    proc = run_snakemake(tmp_path, target, "-n", "--quiet", "rules", configfiles=(SMOKE,))
    counts = job_counts(proc.stdout)
    assert needed <= set(counts), counts
    assert not (not_needed & set(counts)), counts
    assert not any(rule.startswith("cubic") for rule in counts), counts


def test_sgd_baseline_runs_only_at_its_checkpoints(tmp_path):
    """paper.yaml fits the SGD quadratic at every checkpoint from 2^12 on and nowhere else, for every seed."""
    proc = run_snakemake(tmp_path, "-n", "-p", configfiles=(PAPER,))
    seeds, steps = merged(PAPER)
    enabled = {}
    for m in re.finditer(r"^Shell command: polyinterp mnist_approximants .*$", proc.stdout, re.M):
        line = m.group(0)
        step = int(re.search(r"ckpt/step(\d+)\.pt", line).group(1))
        seed = int(re.search(r"seed(\d+)/ckpt", line).group(1))
        enabled[(seed, step)] = '"enabled": true' in line
    assert len(enabled) == len(seeds) * len(steps)
    assert {k for k, on in enabled.items() if on} == {(s, t) for s in seeds for t in steps if t >= 4096}


def test_scorecard_is_part_of_the_default_target(tmp_path):
    counts = job_counts(run_snakemake(tmp_path, "-n", "--quiet", "rules", configfiles=(SMOKE,)).stdout)
    assert counts["scorecard"] == 1


def merged_cubic(path):
    """Seeds and the cubic section of config.yaml overlaid by ``path`` (deep merge, as Snakemake does)."""
    cfg = merged_config(*([path] if path else []))
    return cfg["seeds"], cfg["cubic"]


@pytest.mark.parametrize("configfile", [None, SMOKE, PAPER, ARCHITECTURES],
                         ids=["default", "smoke", "paper", "architectures"])
def test_cubic_layers_and_training_build_one_view_each(tmp_path, configfile):
    """The SAE pipeline runs once per seed and view: today's (the last layer of the final model),
    every other layer of cubic.layers.saes and every checkpoint of cubic.training.steps but the last;
    landmarks run on the layers only."""
    from polyinterp.rules import CubicViews

    proc = run_snakemake(tmp_path, "cubic_layers", "cubic_training", "-n", "--quiet", "rules",
                         configfiles=(configfile,) if configfile else ())
    counts = job_counts(proc.stdout)
    seeds, cubic = merged_cubic(configfile)
    views = CubicViews(cubic, "cpu")
    checkpoints = [s for s in views.steps if views.step_view(s)]
    # the studies beyond the blog run at their own seeds (cubic.layers.seeds, cubic.training.seeds)
    # (today's view of a seed is the last layer's row and the last step's: read where either study runs)
    layer_seeds = study_seeds(cubic["layers"].get("seeds"), seeds, "cubic.layers.seeds")
    step_seeds = study_seeds(cubic["training"].get("seeds"), seeds, "cubic.training.seeds")
    n_layers, n_steps, n_today = len(layer_seeds), len(step_seeds), len(set(layer_seeds) | set(step_seeds))
    for rule in ("cubic_activations", "cubic_sae", "cubic_band_detection", "cubic_slope_search"):
        assert counts[rule] == n_today + n_layers * len(views.layer_saes) + n_steps * len(checkpoints), rule
    assert counts["cubic_landmark_table"] == n_layers * (1 + len(views.layer_saes))
    assert counts.get("cubic_checkpoint_model", 0) == n_steps * len(checkpoints)
    assert counts["cubic_layers_summary"] == counts["cubic_training_summary"] == 1
    assert not any(rule.startswith("mnist") for rule in counts), counts


def test_bad_training_steps_fail_when_the_workflow_is_parsed(tmp_path):
    overlay = tmp_path / "bad.yaml"
    overlay.write_text("cubic:\n  training:\n    steps: [200, 300]\n")
    proc = run_snakemake(tmp_path, "cubic_training", "-n", configfiles=(SMOKE, overlay), check=False)
    assert proc.returncode != 0
    assert "cubic.training.steps" in proc.stdout + proc.stderr and "step 300" in proc.stdout + proc.stderr


@pytest.mark.parametrize("configfile", [None, SMOKE, PAPER, ARCHITECTURES],
                         ids=["default", "smoke", "paper", "architectures"])
def test_cubic_capacity_and_grid_jobs(tmp_path, configfile):
    """Each capacity variant but today's regressor is trained and read once per seed (today's files
    serve the cubic.model.widths variant); one grid network per seed and (a, b)."""
    from polyinterp.rules import CubicViews

    proc = run_snakemake(tmp_path, "cubic_capacity", "cubic_grid", "-n", "--quiet", "rules",
                         configfiles=(configfile,) if configfile else ())
    counts = job_counts(proc.stdout)
    seeds, cubic = merged_cubic(configfile)
    views = CubicViews(cubic, "cpu")
    trained = [n for n, v in views.capacity.items() if not v["is_model"]]
    n = len(seeds)
    n_capacity = len(study_seeds(cubic["capacity"].get("seeds"), seeds, "cubic.capacity.seeds"))
    assert counts.get("cubic_capacity_train", 0) == n_capacity * len(trained)
    assert counts["cubic_train"] == n  # today's regressor: the base variant and the grid's (x, a, b) network
    for rule in ("cubic_activations", "cubic_sae"):  # today's SAE of every seed: the grid reads it
        assert counts[rule] == n + n_capacity * len(trained), rule
    for rule in ("cubic_band_detection", "cubic_slope_search"):  # the capacity rows only
        assert counts[rule] == n_capacity * (1 + len(trained)), rule
    assert "cubic_landmark_table" not in counts
    assert counts["cubic_grid_seed"] == n  # one job trains every (a, b) of a seed
    for rule in ("cubic_capacity_summary", "cubic_grid_summary", "cubic_fig_capacity", "cubic_fig_grid"):
        assert counts[rule] == 1, rule
    assert not any(rule.startswith("mnist") for rule in counts), counts


def test_capacity_and_grid_are_in_the_default_target_only_where_enabled(tmp_path):
    new = {"cubic_capacity_train", "cubic_capacity_summary", "cubic_fig_capacity", "cubic_grid_seed",
           "cubic_grid_summary", "cubic_fig_grid"}
    on = job_counts(run_snakemake(tmp_path, "-n", "--quiet", "rules", configfiles=(SMOKE,)).stdout)
    assert new <= set(on), on
    overlay = tmp_path / "off.yaml"
    overlay.write_text("cubic:\n  capacity:\n    enabled: false\n  grid:\n    enabled: false\n")
    off = job_counts(run_snakemake(tmp_path, "-n", "--quiet", "rules", configfiles=(SMOKE, overlay)).stdout)
    assert not new & set(off), off
    assert not new & set(job_counts(run_snakemake(tmp_path, "cubic", "-n", "--quiet", "rules",
                                                  configfiles=(SMOKE, overlay)).stdout))
    named = job_counts(run_snakemake(tmp_path, "cubic_capacity", "cubic_grid", "-n", "--quiet", "rules",
                                     configfiles=(SMOKE, overlay)).stdout)
    assert new <= set(named), named  # the named targets build them either way


def test_bad_capacity_and_grid_keys_fail_when_the_workflow_is_parsed(tmp_path):
    for text, key in (("cubic:\n  capacity:\n    train_steps: 100\n", "cubic.capacity.train_steps"),
                      ("cubic:\n  capacity:\n    variants: [{name: a, widths: [3, 8, 1]}, {name: a, widths: [3, 9, 1]}]\n",
                       "cubic.capacity.variants.1"),
                      ("cubic:\n  grid:\n    widths: [1, 8, 2]\n", "cubic.grid.widths")):
        overlay = tmp_path / "bad.yaml"
        overlay.write_text(text)
        proc = run_snakemake(tmp_path, "cubic_capacity", "-n", configfiles=(SMOKE, overlay), check=False)
        assert proc.returncode != 0 and key in proc.stdout + proc.stderr, (key, proc.stderr[-2000:])


def test_fig2_of_two_models_builds_both_models_and_nothing_else(tmp_path):
    """fig2 compares every configured model: `snakemake fig2` trains and approximates each, and runs no
    attack or cubic job; a per-model figure file builds only its own model."""
    overlay = tmp_path / "models.yaml"
    overlay.write_text("mnist:\n  models:\n    - {name: mlp_relu}\n    - {name: glu_gelu, arch: glu, activation: gelu,"
                       " hidden: 16}\n")
    proc = run_snakemake(tmp_path, "fig2", "-n", "--quiet", "rules", configfiles=(SMOKE, overlay))
    counts = job_counts(proc.stdout)
    steps = [s for s in checkpoint_steps(**merged_config("smoke.yaml")["mnist"]["train"]["checkpoints"]) if s > 0]
    assert counts["mnist_train"] == 2 and counts["mnist_approximants"] == 2 * len(steps), counts
    assert not any(r.startswith(("cubic", "mnist_svd")) for r in counts), counts
    proc = run_snakemake(tmp_path, "results/figures/fig5_glu_gelu.pdf", "-n", configfiles=(SMOKE, overlay))
    assert "results/mnist/glu_gelu/seed0/ckpt/step0.pt" in proc.stdout
    assert "results/mnist/mlp_relu/" not in proc.stdout


@pytest.mark.parametrize("models, key", [
    ("[{name: a}, {name: a}]", "mnist.models[1].name"),
    ("[{name: a, activation: softplus}]", "mnist.models.0.activation"),
    ("[{name: a, arch: cnn}]", "mnist.models.0.arch"),
    ("[{name: 1a}]", "mnist.models.0.name"),
    ("[{name: a, train: {checkpoints: {first_pow: 2}}}]", "mnist.models.0.train.checkpoints"),
    ("[]", "mnist.models"),
])
def test_bad_models_are_refused_before_any_job(tmp_path, models, key):
    overlay = tmp_path / "models.yaml"
    overlay.write_text(f"mnist:\n  models: {models}\n")
    proc = run_snakemake(tmp_path, "-n", configfiles=(SMOKE, overlay), check=False)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert key in out, out[-2000:]
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("key", ["cubic.capacity.seeds", "cubic.layers.seeds", "cubic.training.seeds",
                                 "mnist.approx.cubic.seeds"])
def test_a_study_seed_the_run_does_not_train_is_refused_naming_the_key(tmp_path, key):
    *parents, leaf = key.split(".")
    over = node = {}
    for name in parents:
        node = node.setdefault(name, {})
    node[leaf] = [0, 7]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(over))
    proc = run_snakemake(tmp_path, "-n", "--quiet", "rules", configfiles=(SMOKE, bad), check=False)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert f"config key '{key}' names seed 7" in out and "Job stats" not in out


def test_paper_config_runs_the_open_questions_at_seed_zero_and_rows_with_verdicts_at_every_seed(tmp_path):
    proc = run_snakemake(tmp_path, "-n", "--quiet", "rules", configfiles=(PAPER,))
    counts = job_counts(proc.stdout)
    paper = yaml.safe_load(PAPER.read_text())
    assert paper["seeds"] == [0, 1, 2] and paper["mnist"]["approx"]["cubic"]["seeds"] == [0]
    _, steps = merged(PAPER)
    assert counts["mnist_degree_approximants"] == len(steps)  # one seed, every analysed checkpoint
    assert counts["mnist_approximants"] == 3 * len(steps)
    # the capacity variants other than today's regressor are trained at every seed: their slope rows have
    # verdicts, and a verdict is read over the paper config's 3 seeds
    trained = [v for v in paper["cubic"]["capacity"]["variants"] if v["widths"] != [3, 64, 64, 64, 15, 1]]
    assert counts["cubic_capacity_train"] == 3 * len(trained)
    assert counts["cubic_train"] == 3


AUTHORS = REPO / "workflow" / "configs" / "authors_code.yaml"


@pytest.mark.parametrize("overlay, key", [
    ("mnist:\n  train:\n    momentum: 0.9\n", "momentum"),                       # a recipe key the trainer lacks
    ("mnist:\n  approx:\n    sgd:\n      checkpoints: [4096, 5000]\n", "mnist.approx.sgd.checkpoints"),  # not saved
])
def test_the_authors_recipe_refuses_an_unknown_key_or_an_unsaved_sgd_checkpoint_before_any_job(tmp_path, overlay,
                                                                                                  key):
    bad = tmp_path / "bad.yaml"
    bad.write_text(overlay)
    proc = run_snakemake(tmp_path, "-n", "--quiet", "rules", configfiles=(AUTHORS, bad), check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and key in out and "Job stats" not in out, out[-2000:]
    assert not (tmp_path / "results").exists()


def test_the_authors_recipe_config_is_the_papers_scale_with_the_sgd_fit_from_2_to_the_12(tmp_path):
    """authors_code.yaml: the code's recipe (plain AdamW, lr 1e-5, batch 32) at 3 seeds to 2^18 steps, the
    SGD fit at every checkpoint from 4096 on, and no degree study beyond 2."""
    proc = run_snakemake(tmp_path, "-n", "-p", configfiles=(AUTHORS,))
    seeds, steps = merged(AUTHORS)
    cfg = merged_config(AUTHORS)
    train = cfg["mnist"]["train"]
    assert (train["optimizer"], train["lr"], train["batch_size"]) == ("adamw", 1e-5, 32)
    assert seeds == [0, 1, 2] and steps[-1] == 2 ** 18
    enabled = {}
    for m in re.finditer(r"^Shell command: polyinterp mnist_approximants .*$", proc.stdout, re.M):
        line = m.group(0)
        key = (int(re.search(r"seed(\d+)/ckpt", line).group(1)), int(re.search(r"ckpt/step(\d+)\.pt", line).group(1)))
        enabled[key] = '"enabled": true' in line
    assert {k for k, on in enabled.items() if on} == {(s, t) for s in seeds for t in steps if t >= 4096}
    counts = job_counts(run_snakemake(tmp_path, "-n", "--quiet", "rules", configfiles=(AUTHORS,)).stdout)
    assert "mnist_degree_approximants" not in counts and counts["mnist_svd_ablation"] == 3 * len(steps)


@pytest.mark.parametrize("configfiles", [(), (SMOKE,), (PAPER,), (AUTHORS,),
                                         (REPO / "workflow" / "configs" / "architectures.yaml",)],
                         ids=["default", "smoke", "paper", "authors_code", "architectures"])
def test_every_jobs_command_runs_the_step_of_its_own_rule(tmp_path, configfiles):
    """The rule names its step once (step_params); in the dry run of every config, each job's command
    runs `polyinterp <its own rule>`, and every rule with a command has one, and one log under results/logs/
    (where publish and bench/run_time.py read the job's record)."""
    proc = run_snakemake(tmp_path, "-n", "-p", "--forceall", configfiles=configfiles)
    rule, checked = None, 0
    for line in proc.stdout.splitlines():
        m = re.match(r"^(?:local)?rule (\w+):", line)
        if m:
            rule = m.group(1)
        m = re.match(r"^Shell command: .*?polyinterp (\w+)", line)
        if m:
            assert m.group(1) == rule, line
            checked += 1
    assert checked > 20, proc.stdout[-2000:]
    commands = [job for job in parse_run_log(proc.stdout).jobs if job.command]
    assert len(commands) == checked
    for job in commands:
        assert len(job.logs) == 1 and job.logs[0].startswith("results/logs/"), (job.rule, job.logs)


def test_the_workflow_passes_snakemakes_lint(tmp_path):
    """`snakemake --lint` finds nothing (its checks read the rule files' text: a comment such as
    "rule x: ..." in a file of functions is reported as rules mixed with functions)."""
    proc = run_snakemake(tmp_path, "--lint", configfiles=(), check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Lints for" not in out and "good condition" in out, out[-3000:]
