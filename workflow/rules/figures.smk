# One rule per figure, both studies; each reads only tables and saved tensors and runs `polyinterp
# <rule>`. The named targets (fig1 … fig6, fig_models, cubic_fit … cubic_grid, figures) are in targets.smk.
# fig2, fig3, fig_fits, fig_degrees and fig_models compare the MNIST models (mnist.models) in one file;
# fig1, fig4, fig5 and fig6 are drawn per model: results/figures/fig5_<model>.{pdf,png}, and target fig5
# builds every model's. Every MNIST figure's title names the run's training config (RUN_LABEL).


rule fig1_features:
    input:
        approx=[mnist_approx(seed=SEEDS[0], step=s) for s in FIG1_STEPS],
        ckpt=[mnist_ckpt(seed=SEEDS[0], step=s) for s in FIG1_STEPS],
        mixture=rules.mnist_mixture.output.mixture,
        metrics=rules.mnist_metrics_all.output.metrics,
    output:
        out=report_figure("fig1_{model}", "MNIST", caption="fig1"),
    params: **step_args("fig1_features", lambda wc: {"digit": config["mnist"]["figures"]["digit"], "run": RUN_LABEL})
    log: log_path("figures/fig1_{model}")
    resources: **MNIST_FIGURE_JOB
    conda: CONDA_ENV
    shell: STEP


# The figures of the metrics table alone, one rule each: rule -> figure.
_METRICS_FIGURES = {"fig2_fvu": "fig2", "fig3_test": "fig3", "fig_fits_curves": "fig_fits",
                    "fig_degrees_curves": "fig_degrees", "fig_models_fvu": "fig_models"}
for _rule, _figure in _METRICS_FIGURES.items():

    rule:
        name: _rule
        input:
            metrics=rules.mnist_metrics_all.output.metrics,
        output:
            out=report_figure(_figure, "MNIST"),
        params: **step_args(_rule, lambda wc: {"run": RUN_LABEL})
        log: log_path(f"figures/{_figure}")
        resources: **MNIST_FIGURE_JOB
        conda: CONDA_ENV
        shell: STEP


rule fig4_ablated_digits:
    input:
        examples=rules.mnist_svd_ablation_all.output.examples,
    output:
        out=report_figure("fig4_{model}", "MNIST", caption="fig4"),
    params:
        **step_args("fig4_ablated_digits",
                    lambda wc: {"digit": config["mnist"]["figures"]["digit"], "run": RUN_LABEL}),
    log: log_path("figures/fig4_{model}")
    resources: **MNIST_FIGURE_JOB
    conda: CONDA_ENV
    shell: STEP


rule fig5_ablation_accuracy:
    input:
        table=rules.mnist_svd_ablation_all.output.table,
    output:
        out=report_figure("fig5_{model}", "MNIST", caption="fig5"),
    params:
        **step_args("fig5_ablation_accuracy", lambda wc: {
            "run": RUN_LABEL,
            **{k: config["mnist"]["ablation"][k] for k in ("figure_steps", "accuracy_level")},
        }),
    log: log_path("figures/fig5_{model}")
    resources: **MNIST_FIGURE_JOB
    conda: CONDA_ENV
    shell: STEP


rule fig6_attack_strength:
    input:
        table=rules.mnist_svd_ablation_all.output.table,
    output:
        out=report_figure("fig6_{model}", "MNIST", caption="fig6"),
    params: **step_args("fig6_attack_strength", lambda wc: {"run": RUN_LABEL})
    log: log_path("figures/fig6_{model}")
    resources: **MNIST_FIGURE_JOB
    conda: CONDA_ENV
    shell: STEP


# ----------------------------------------------------------------------------- cubic figures
# Rule cubic_fig_<name> draws results/figures/cubic_<name>.{pdf,png}. Per-seed panels show the first
# seed; multi-seed panels show every seed.
_FIRST = {"seed": SEEDS[0]}


rule cubic_fig_landmarks:
    input:
        table=expand(VIEWS.root(rules.cubic_landmark_table.output.table), **_FIRST),
        ranking=expand(VIEWS.root(rules.cubic_landmark_table.output.ranking), **_FIRST),
    output:
        out=report_figure("cubic_landmarks", "Cubic regressor"),
    params: **step_args("cubic_fig_landmarks", lambda wc: {"top": config["cubic"]["figures"]["landmarks_top"]})
    log: log_path("figures/cubic_landmarks")
    resources:
        mem_mb=2000,
        runtime=5,
    conda: CONDA_ENV
    shell: STEP


rule cubic_fig_bands:
    input:
        grid=expand(VIEWS.root(rules.cubic_band_detection.output.grid), **_FIRST),
        bands=expand(VIEWS.root(rules.cubic_band_detection.output.latents), **_FIRST),
        slopes=expand(VIEWS.root(rules.cubic_slope_search.output.best), **_FIRST),
    output:
        out=report_figure("cubic_bands", "Cubic regressor"),
    params: **step_args("cubic_fig_bands", lambda wc: {"max_latents": config["cubic"]["figures"]["band_latents"]})
    log: log_path("figures/cubic_bands")
    resources: **CUBIC_FIGURE_JOB
    conda: CONDA_ENV
    shell: STEP


rule cubic_fig_clamp:
    input:
        curves=expand(rules.cubic_clamping.output.curves, **_FIRST),
        summary=expand(rules.cubic_clamping.output.summary, **_FIRST),
    output:
        out=report_figure("cubic_clamp", "Cubic regressor"),
    params: **step_args("cubic_fig_clamp", lambda wc: {"max_latents": config["cubic"]["figures"]["clamp_latents"]})
    log: log_path("figures/cubic_clamp")
    resources: **CUBIC_FIGURE_JOB
    conda: CONDA_ENV
    shell: STEP


# The cubic figures whose step reads no config key, one rule each: name -> inputs.
_PLAIN_CUBIC_FIGURES = {
    "fit": dict(
        curves=expand(rules.cubic_train.output.curves, **_FIRST),
        train_curves=expand(rules.cubic_train.output.curve, seed=SEEDS),
        fit=expand(rules.cubic_train.output.fit, seed=SEEDS),
    ),
    "slopes": dict(
        scan=expand(VIEWS.root(rules.cubic_slope_search.output.scan), seed=SEEDS),
        slopes=expand(VIEWS.root(rules.cubic_slope_search.output.best), seed=SEEDS),
        seeds=rules.cubic_summary.output.seeds,
    ),
    "joint_clamp": dict(
        curves=expand(rules.cubic_joint_clamping.output.curves, **_FIRST),
        fits=expand(rules.cubic_joint_clamping.output.fits, **_FIRST),
    ),
    "thresholds": dict(tables=expand(rules.cubic_band_thresholds.output.table, seed=SEEDS)),
    "layers": dict(table=rules.cubic_layers_summary.output.table),
    "training": dict(table=rules.cubic_training_summary.output.table),
    "capacity": dict(table=rules.cubic_capacity_summary.output.table),
    "grid": dict(table=rules.cubic_grid_summary.output.table, latents=rules.cubic_grid_summary.output.latents),
}
for _name, _inputs in _PLAIN_CUBIC_FIGURES.items():

    rule:
        name: f"cubic_fig_{_name}"
        input: **_inputs
        output:
            out=report_figure(f"cubic_{_name}", "Cubic regressor"),
        params: **step_args(f"cubic_fig_{_name}")
        log: log_path(f"figures/cubic_{_name}")
        resources: **CUBIC_FIGURE_JOB
        conda: CONDA_ENV
        shell: STEP
