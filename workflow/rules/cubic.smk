# Study 2: cubic regressor -> activations -> SAE -> landmarks -> band detection -> slope search
# -> clamping (one latent; joint interventions with the stretch/shift fit) and band-threshold
# sensitivity (its figures are in figures.smk; the named targets cubic_fit … cubic_grid and cubic, everything
# the config enables, in targets.smk). Each rule runs `polyinterp <rule>`; its input/output keys are the
# step function's arguments.
#
# Views: activations -> SAE -> landmarks -> bands -> slope search run on a view of the regressor, the
# wildcard {view} after the seed folder (polyinterp.rules.CubicViews): empty for today's pipeline (last
# hidden layer of the final model, results/cubic/seed{seed}/...), layer{L} for hidden layer L of the
# final model (cubic.layers), train_step{S} for the last hidden layer of the eval checkpoint at
# step S (cubic.training) and capacity_{name} for the last hidden layer of another regressor, variant
# name of cubic.capacity.variants (rule cubic_capacity_train). The activations file records its layer
# and the SAE file in turn, so later steps read it from their inputs.
#
# The rules that run a training loop declare `threads: 1`: many small operations, whose OpenMP
# threads mostly wait (bench/README.md, "Cubic threads").
from polyinterp.rules import (CAPACITY_NAME, VIEW_PATTERN, CubicViews, check_widths, point_files, seed_params,
                              study_seeds, summary_params)

CUBIC = "results/cubic/seed{seed}"
VIEW = f"{CUBIC}{{view}}"
VIEWS = CubicViews(config["cubic"], DEVICE)  # checks cubic.layers and cubic.training against the model and train keys


wildcard_constraints:
    view=VIEW_PATTERN,
    variant=CAPACITY_NAME,
    ia=r"\d+",
    ib=r"\d+",


rule cubic_train:
    output:
        model=f"{CUBIC}/model.pt",
        checkpoints=f"{CUBIC}/checkpoints.pt",
        curve=f"{CUBIC}/train_curve.parquet",
        fit=f"{CUBIC}/fit.parquet",
        curves=f"{CUBIC}/fit_curves.parquet",
    params:
        **step_args("cubic_train", lambda wc: {
            **{k: config["cubic"][k] for k in ("task", "model", "train")},
            "seed": int(wc.seed),
            "device": DEVICE,
        }),
    log: log_path("cubic/train_seed{seed}")
    threads: 1  # a training loop (above)
    resources:
        mem_mb=2000,
        runtime=60,
        gpu=1,
    conda: CONDA_ENV
    shell: STEP


rule cubic_activations:
    input:
        model=lambda wc: VIEWS.model(wc.seed, wc.view),
    output:
        acts=f"{VIEW}/activations.pt",
    params: **step_args("cubic_activations", lambda wc: VIEWS.activations_params(wc.seed, wc.view))
    log: log_path("cubic/activations_seed{seed}{view}")
    threads: 1  # packing (common.smk)
    resources:
        mem_mb=2000,
        runtime=10,
    conda: CONDA_ENV
    shell: STEP


rule cubic_sae:
    input:
        acts=rules.cubic_activations.output.acts,
        model=lambda wc: VIEWS.model(wc.seed, wc.view),
    output:
        sae=f"{VIEW}/sae.pt",
        metrics=f"{VIEW}/sae_metrics.parquet",
        latents=f"{VIEW}/sae_latents.parquet",
        curve=f"{VIEW}/sae_curve.parquet",
    params: **step_args("cubic_sae", lambda wc: VIEWS.sae_params(wc.seed, wc.view))
    log: log_path("cubic/sae_seed{seed}{view}")
    threads: 1  # a training loop (above)
    resources:
        mem_mb=3000,
        runtime=30,
        gpu=1,
    conda: CONDA_ENV
    shell: STEP


_LM = config["cubic"]["landmarks"]
_BD = config["cubic"]["bands"]


rule cubic_landmark_table:
    input:
        model=lambda wc: VIEWS.model(wc.seed, wc.view),
        sae=rules.cubic_sae.output.sae,
    output:
        table=f"{VIEW}/landmarks.parquet",
        ranking=f"{VIEW}/landmark_ranking.parquet",
    params: **step_args("cubic_landmark_table", cubic_section_params("landmarks"))
    log: log_path("cubic/landmarks_seed{seed}{view}")
    threads: 1  # packing (common.smk)
    resources:
        mem_mb=lambda wc: VIEWS.mem_mb(wc.view, _LM["x_points"] * _LM["a_points"] * _LM["b_points"]),
        runtime=15,
    conda: CONDA_ENV
    shell: STEP


rule cubic_band_detection:
    input:
        model=lambda wc: VIEWS.model(wc.seed, wc.view),
        sae=rules.cubic_sae.output.sae,
    output:
        slices=f"{VIEW}/band_slices.parquet",
        latents=f"{VIEW}/band_latents.parquet",
        grid=f"{VIEW}/band_grid.pt",
    params: **step_args("cubic_band_detection", lambda wc: VIEWS.bands_params(wc.seed, wc.view))
    log: log_path("cubic/bands_seed{seed}{view}")
    threads: 1  # packing (common.smk)
    resources:
        mem_mb=lambda wc: VIEWS.mem_mb(wc.view, _BD["x_points"] * _BD["a_points"] * len(_BD["b_slices"])),
        runtime=15,
    conda: CONDA_ENV
    shell: STEP


rule cubic_slope_search:
    input:
        acts=rules.cubic_activations.output.acts,
        sae=rules.cubic_sae.output.sae,
        bands=rules.cubic_band_detection.output.latents,
    output:
        scan=f"{VIEW}/slope_scan.parquet",
        best=f"{VIEW}/slopes.parquet",
    params: **step_args("cubic_slope_search", cubic_section_params("slopes"))
    log: log_path("cubic/slopes_seed{seed}{view}")
    threads: 1  # packing (common.smk)
    resources:
        mem_mb=4000,
        runtime=20,
    conda: CONDA_ENV
    shell: STEP


rule cubic_clamping:
    input:
        model=rules.cubic_train.output.model,
        sae=VIEWS.root(rules.cubic_sae.output.sae),
        slopes=VIEWS.root(rules.cubic_slope_search.output.best),
    output:
        curves=f"{CUBIC}/clamp.parquet",
        summary=f"{CUBIC}/clamp_summary.parquet",
    params: **step_args("cubic_clamping", cubic_section_params("clamp"))
    log: log_path("cubic/clamp_seed{seed}")
    threads: 1  # packing (common.smk)
    resources:
        mem_mb=2000,
        runtime=10,
    conda: CONDA_ENV
    shell: STEP


rule cubic_joint_clamping:
    input:
        model=rules.cubic_train.output.model,
        sae=VIEWS.root(rules.cubic_sae.output.sae),
        slopes=VIEWS.root(rules.cubic_slope_search.output.best),
        ranking=VIEWS.root(rules.cubic_landmark_table.output.ranking),
    output:
        sets=f"{CUBIC}/joint_clamp_sets.parquet",
        curves=f"{CUBIC}/joint_clamp.parquet",
        fits=f"{CUBIC}/joint_clamp_fits.parquet",
    params: **step_args("cubic_joint_clamping", cubic_section_params("joint_clamp"))
    log: log_path("cubic/joint_clamp_seed{seed}")
    threads: 1  # packing (common.smk)
    resources:
        mem_mb=2000,
        runtime=10,
    conda: CONDA_ENV
    shell: STEP


_BAND_RULE = ("coherence_min", "c_tol", "invariance_min", "min_active_frac", "c_max")


rule cubic_band_thresholds:
    input:
        bands=VIEWS.root(rules.cubic_band_detection.output.latents),
        slices=VIEWS.root(rules.cubic_band_detection.output.slices),
        slopes=VIEWS.root(rules.cubic_slope_search.output.best),
    output:
        table=f"{CUBIC}/band_thresholds.parquet",
    params:
        **step_args("cubic_band_thresholds", lambda wc: {
            "grid": config["cubic"]["thresholds"],
            "bands": {k: config["cubic"]["bands"][k] for k in _BAND_RULE},
            "seed": int(wc.seed),
        }),
    log: log_path("cubic/band_thresholds_seed{seed}")
    resources: **TABLE_JOB
    conda: CONDA_ENV
    shell: STEP


rule cubic_summary:
    input:
        fit=expand(rules.cubic_train.output.fit, seed=SEEDS),
        sae=expand(VIEWS.root(rules.cubic_sae.output.metrics), seed=SEEDS),
        slopes=expand(VIEWS.root(rules.cubic_slope_search.output.best), seed=SEEDS),
    output:
        summary="results/cubic/summary.parquet",
        seeds="results/cubic/slopes_per_seed.parquet",
        spread="results/cubic/slopes_spread.parquet",
    params: **step_args("cubic_summary")
    log: log_path("cubic/summary")
    resources: **TABLE_JOB
    conda: CONDA_ENV
    shell: STEP


# ------------------------------------------------------------------- other layers, across training
rule cubic_checkpoint_model:
    input:
        final=rules.cubic_train.output.model,
        checkpoints=rules.cubic_train.output.checkpoints,
    output:
        model=f"{CUBIC}/train_step{{step}}/model.pt",
    params: **step_args("cubic_checkpoint_model", lambda wc: {"step": int(wc.step)})
    log: log_path("cubic/checkpoint_model_seed{seed}/train_step{step}")
    resources: **TABLE_JOB
    conda: CONDA_ENV
    shell: STEP


_LAYER_VIEWS = [VIEWS.layer_view(layer) for layer in VIEWS.layers]  # the rows of layers.parquet, last layer included
_STEP_VIEWS = [VIEWS.step_view(step) for step in VIEWS.steps]
# The studies beyond the blog may run at fewer seeds (cubic.{layers,training,capacity}.seeds: "all" or
# a subset of seeds, checked here so that a seed the run does not train fails before any job runs).
LAYER_SEEDS = study_seeds(config["cubic"]["layers"].get("seeds"), SEEDS, "cubic.layers.seeds")
TRAINING_SEEDS = study_seeds(config["cubic"]["training"].get("seeds"), SEEDS, "cubic.training.seeds")
CAPACITY_SEEDS = study_seeds(config["cubic"]["capacity"].get("seeds"), SEEDS, "cubic.capacity.seeds")


rule cubic_layers_summary:
    input:
        metrics=VIEWS.files(rules.cubic_sae.output.metrics, _LAYER_VIEWS, LAYER_SEEDS),
        slopes=VIEWS.files(rules.cubic_slope_search.output.best, _LAYER_VIEWS, LAYER_SEEDS),
        ranking=VIEWS.files(rules.cubic_landmark_table.output.ranking, _LAYER_VIEWS, LAYER_SEEDS),
    output:
        table="results/cubic/layers.parquet",
    params: **step_args("cubic_layers_summary", lambda wc: {"rows": VIEWS.layer_rows(LAYER_SEEDS)})
    log: log_path("cubic/layers_summary")
    resources: **TABLE_JOB
    conda: CONDA_ENV
    shell: STEP


rule cubic_training_summary:
    input:
        metrics=VIEWS.files(rules.cubic_sae.output.metrics, _STEP_VIEWS, TRAINING_SEEDS),
        slopes=VIEWS.files(rules.cubic_slope_search.output.best, _STEP_VIEWS, TRAINING_SEEDS),
        curve=expand(rules.cubic_train.output.curve, seed=TRAINING_SEEDS),
    output:
        table="results/cubic/training.parquet",
    params: **step_args("cubic_training_summary", lambda wc: {"rows": VIEWS.step_rows(TRAINING_SEEDS)})
    log: log_path("cubic/training_summary")
    resources: **TABLE_JOB
    conda: CONDA_ENV
    shell: STEP


# ------------------------------------------------------------------------------------ capacity
# A variant of cubic.capacity.variants is another regressor, trained here with cubic.train's settings;
# the view rules above read its last hidden layer as the view /capacity_{variant}. A variant with
# cubic.model.widths (and cubic.train.steps) is today's regressor: its row reads today's files.
rule cubic_capacity_train:
    output:
        model=f"{CUBIC}/capacity_{{variant}}/model.pt",
        checkpoints=f"{CUBIC}/capacity_{{variant}}/checkpoints.pt",
        curve=f"{CUBIC}/capacity_{{variant}}/train_curve.parquet",
        fit=f"{CUBIC}/capacity_{{variant}}/fit.parquet",
        curves=f"{CUBIC}/capacity_{{variant}}/fit_curves.parquet",
    params: **step_args("cubic_capacity_train", lambda wc: VIEWS.capacity_train_params(wc.seed, wc.variant))
    log: log_path("cubic/capacity_train_seed{seed}/{variant}")
    threads: 1  # a training loop (above)
    resources:
        mem_mb=2000,
        runtime=120,
        gpu=1,
    conda: CONDA_ENV
    shell: STEP


rule cubic_capacity_summary:
    input:
        model=VIEWS.capacity_files(rules.cubic_train.output.model, CAPACITY_SEEDS),
        fit=VIEWS.capacity_files(rules.cubic_train.output.fit, CAPACITY_SEEDS),
        metrics=VIEWS.capacity_files(rules.cubic_sae.output.metrics, CAPACITY_SEEDS),
        slopes=VIEWS.capacity_files(rules.cubic_slope_search.output.best, CAPACITY_SEEDS),
    output:
        table="results/cubic/capacity.parquet",
    params: **step_args("cubic_capacity_summary", lambda wc: {"rows": VIEWS.capacity_rows(CAPACITY_SEEDS)})
    log: log_path("cubic/capacity_summary")
    resources: **TABLE_JOB
    conda: CONDA_ENV
    shell: STEP


# ------------------------------------------------------------------------ single-polynomial grid
# One network 1 -> ... -> 1 per (a, b) of cubic.grid, regressing that one cubic in x, with a TopK SAE
# on its last hidden layer (polyinterp.cubic.views.grid); the summary scores its latents and the (x, a, b)
# regressor's at the same (a, b): x range or landmarks (polyinterp.cubic.probes.tracking).
GRID_POINT = f"{CUBIC}/grid/a{{ia}}_b{{ib}}"
check_widths(config["cubic"]["grid"]["widths"])  # a bad cubic.grid.widths fails at parse time


rule cubic_grid_seed:
    output:  # every grid point of one seed: one process trains them side by side (one batched model)
        model=point_files(f"{GRID_POINT}/model.pt", config["cubic"], ["{seed}"]),
        sae=point_files(f"{GRID_POINT}/sae.pt", config["cubic"], ["{seed}"]),
        metrics=point_files(f"{GRID_POINT}/metrics.parquet", config["cubic"], ["{seed}"]),
    params: **step_args("cubic_grid_seed", lambda wc: seed_params(config["cubic"], wc.seed, DEVICE))
    log: log_path("cubic/grid_seed{seed}")
    threads: 1  # training loops, one after another (above)
    resources:
        mem_mb=2000,  # a seed's networks and SAEs in memory at once (bench/README.md, "The grid as one batched model")
        runtime=240,
    conda: CONDA_ENV
    shell: STEP


rule cubic_grid_summary:
    input:
        model=point_files(f"{GRID_POINT}/model.pt", config["cubic"], SEEDS),
        sae=point_files(f"{GRID_POINT}/sae.pt", config["cubic"], SEEDS),
        metrics=point_files(f"{GRID_POINT}/metrics.parquet", config["cubic"], SEEDS),
        joint_model=expand(rules.cubic_train.output.model, seed=SEEDS),
        joint_sae=expand(VIEWS.root(rules.cubic_sae.output.sae), seed=SEEDS),
    output:
        table="results/cubic/grid.parquet",
        latents="results/cubic/grid_latents.parquet",
    params: **step_args("cubic_grid_summary", lambda wc: summary_params(config["cubic"], SEEDS, DEVICE))
    log: log_path("cubic/grid_summary")
    threads: 1  # packing (common.smk)
    resources:
        mem_mb=2000,
        runtime=10,
    conda: CONDA_ENV
    shell: STEP
