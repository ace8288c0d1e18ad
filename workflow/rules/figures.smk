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
    params:
        step=step_params("fig1_features", lambda wc: {"digit": config["mnist"]["figures"]["digit"], "run": RUN_LABEL}),
        files=step_files,
    log:
        log_path("figures/fig1_{model}"),
    benchmark:
        bench_path("figures/fig1_{model}")
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        CONDA_ENV
    shell:
        STEP


rule fig2_fvu:
    input:
        metrics=rules.mnist_metrics_all.output.metrics,
    output:
        out=report_figure("fig2", "MNIST"),
    params:
        step=step_params("fig2_fvu", lambda wc: {"run": RUN_LABEL}),
        files=step_files,
    log:
        log_path("figures/fig2"),
    benchmark:
        bench_path("figures/fig2")
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        CONDA_ENV
    shell:
        STEP


rule fig3_test:
    input:
        metrics=rules.mnist_metrics_all.output.metrics,
    output:
        out=report_figure("fig3", "MNIST"),
    params:
        step=step_params("fig3_test", lambda wc: {"run": RUN_LABEL}),
        files=step_files,
    log:
        log_path("figures/fig3"),
    benchmark:
        bench_path("figures/fig3")
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        CONDA_ENV
    shell:
        STEP


rule fig_fits_curves:
    input:
        metrics=rules.mnist_metrics_all.output.metrics,
    output:
        out=report_figure("fig_fits", "MNIST"),
    params:
        step=step_params("fig_fits_curves", lambda wc: {"run": RUN_LABEL}),
        files=step_files,
    log:
        log_path("figures/fig_fits"),
    benchmark:
        bench_path("figures/fig_fits")
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        CONDA_ENV
    shell:
        STEP


rule fig_degrees_curves:
    input:
        metrics=rules.mnist_metrics_all.output.metrics,
    output:
        out=report_figure("fig_degrees", "MNIST"),
    params:
        step=step_params("fig_degrees_curves", lambda wc: {"run": RUN_LABEL}),
        files=step_files,
    log:
        log_path("figures/fig_degrees"),
    benchmark:
        bench_path("figures/fig_degrees")
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        CONDA_ENV
    shell:
        STEP


rule fig4_ablated_digits:
    input:
        examples=rules.mnist_svd_ablation_all.output.examples,
    output:
        out=report_figure("fig4_{model}", "MNIST", caption="fig4"),
    params:
        step=step_params("fig4_ablated_digits", lambda wc: {"digit": config["mnist"]["figures"]["digit"], "run": RUN_LABEL}),
        files=step_files,
    log:
        log_path("figures/fig4_{model}"),
    benchmark:
        bench_path("figures/fig4_{model}")
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        CONDA_ENV
    shell:
        STEP


rule fig5_ablation_accuracy:
    input:
        table=rules.mnist_svd_ablation_all.output.table,
    output:
        out=report_figure("fig5_{model}", "MNIST", caption="fig5"),
    params:
        step=step_params("fig5_ablation_accuracy",
            lambda wc: {"run": RUN_LABEL, **{k: config["mnist"]["ablation"][k] for k in ("figure_steps", "accuracy_level")}},
        ),
        files=step_files,
    log:
        log_path("figures/fig5_{model}"),
    benchmark:
        bench_path("figures/fig5_{model}")
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        CONDA_ENV
    shell:
        STEP


rule fig6_attack_strength:
    input:
        table=rules.mnist_svd_ablation_all.output.table,
    output:
        out=report_figure("fig6_{model}", "MNIST", caption="fig6"),
    params:
        step=step_params("fig6_attack_strength", lambda wc: {"run": RUN_LABEL}),
        files=step_files,
    log:
        log_path("figures/fig6_{model}"),
    benchmark:
        bench_path("figures/fig6_{model}")
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        CONDA_ENV
    shell:
        STEP


rule fig_models_fvu:
    input:
        metrics=rules.mnist_metrics_all.output.metrics,
    output:
        out=report_figure("fig_models", "MNIST"),
    params:
        step=step_params("fig_models_fvu", lambda wc: {"run": RUN_LABEL}),
        files=step_files,
    log:
        log_path("figures/fig_models"),
    benchmark:
        bench_path("figures/fig_models")
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        CONDA_ENV
    shell:
        STEP


# ----------------------------------------------------------------------------- cubic figures
# Per-seed panels show the first seed; multi-seed panels show every seed.
_FIRST = {"seed": SEEDS[0]}


rule cubic_fig_fit:
    input:
        curves=expand(rules.cubic_train.output.curves, **_FIRST),
        train_curves=expand(rules.cubic_train.output.curve, seed=SEEDS),
        fit=expand(rules.cubic_train.output.fit, seed=SEEDS),
    output:
        out=report_figure("cubic_fit", "Cubic regressor"),
    params:
        step=step_params("cubic_fig_fit"),
        files=step_files,
    log:
        log_path("figures/cubic_fit"),
    benchmark:
        bench_path("figures/cubic_fit")
    resources:
        mem_mb=1500,
        runtime=5,
    conda:
        CONDA_ENV
    shell:
        STEP


rule cubic_fig_landmarks:
    input:
        table=expand(VIEWS.root(rules.cubic_landmark_table.output.table), **_FIRST),
        ranking=expand(VIEWS.root(rules.cubic_landmark_table.output.ranking), **_FIRST),
    output:
        out=report_figure("cubic_landmarks", "Cubic regressor"),
    params:
        step=step_params("cubic_fig_landmarks", lambda wc: {"top": config["cubic"]["figures"]["landmarks_top"]}),
        files=step_files,
    log:
        log_path("figures/cubic_landmarks"),
    benchmark:
        bench_path("figures/cubic_landmarks")
    resources:
        mem_mb=2000,
        runtime=5,
    conda:
        CONDA_ENV
    shell:
        STEP


rule cubic_fig_bands:
    input:
        grid=expand(VIEWS.root(rules.cubic_band_detection.output.grid), **_FIRST),
        bands=expand(VIEWS.root(rules.cubic_band_detection.output.latents), **_FIRST),
        slopes=expand(VIEWS.root(rules.cubic_slope_search.output.best), **_FIRST),
    output:
        out=report_figure("cubic_bands", "Cubic regressor"),
    params:
        step=step_params("cubic_fig_bands", lambda wc: {"max_latents": config["cubic"]["figures"]["band_latents"]}),
        files=step_files,
    log:
        log_path("figures/cubic_bands"),
    benchmark:
        bench_path("figures/cubic_bands")
    resources:
        mem_mb=1500,
        runtime=5,
    conda:
        CONDA_ENV
    shell:
        STEP


rule cubic_fig_slopes:
    input:
        scan=expand(VIEWS.root(rules.cubic_slope_search.output.scan), seed=SEEDS),
        slopes=expand(VIEWS.root(rules.cubic_slope_search.output.best), seed=SEEDS),
        seeds=rules.cubic_summary.output.seeds,
    output:
        out=report_figure("cubic_slopes", "Cubic regressor"),
    params:
        step=step_params("cubic_fig_slopes"),
        files=step_files,
    log:
        log_path("figures/cubic_slopes"),
    benchmark:
        bench_path("figures/cubic_slopes")
    resources:
        mem_mb=1500,
        runtime=5,
    conda:
        CONDA_ENV
    shell:
        STEP


rule cubic_fig_clamp:
    input:
        curves=expand(rules.cubic_clamping.output.curves, **_FIRST),
        summary=expand(rules.cubic_clamping.output.summary, **_FIRST),
    output:
        out=report_figure("cubic_clamp", "Cubic regressor"),
    params:
        step=step_params("cubic_fig_clamp", lambda wc: {"max_latents": config["cubic"]["figures"]["clamp_latents"]}),
        files=step_files,
    log:
        log_path("figures/cubic_clamp"),
    benchmark:
        bench_path("figures/cubic_clamp")
    resources:
        mem_mb=1500,
        runtime=5,
    conda:
        CONDA_ENV
    shell:
        STEP


rule cubic_fig_joint_clamp:
    input:
        curves=expand(rules.cubic_joint_clamping.output.curves, **_FIRST),
        fits=expand(rules.cubic_joint_clamping.output.fits, **_FIRST),
    output:
        out=report_figure("cubic_joint_clamp", "Cubic regressor"),
    params:
        step=step_params("cubic_fig_joint_clamp"),
        files=step_files,
    log:
        log_path("figures/cubic_joint_clamp"),
    benchmark:
        bench_path("figures/cubic_joint_clamp")
    resources:
        mem_mb=1500,
        runtime=5,
    conda:
        CONDA_ENV
    shell:
        STEP


rule cubic_fig_thresholds:
    input:
        tables=expand(rules.cubic_band_thresholds.output.table, seed=SEEDS),
    output:
        out=report_figure("cubic_thresholds", "Cubic regressor"),
    params:
        step=step_params("cubic_fig_thresholds"),
        files=step_files,
    log:
        log_path("figures/cubic_thresholds"),
    benchmark:
        bench_path("figures/cubic_thresholds")
    resources:
        mem_mb=1500,
        runtime=5,
    conda:
        CONDA_ENV
    shell:
        STEP


rule cubic_fig_layers:
    input:
        table=rules.cubic_layers_summary.output.table,
    output:
        out=report_figure("cubic_layers", "Cubic regressor"),
    params:
        step=step_params("cubic_fig_layers"),
        files=step_files,
    log:
        log_path("figures/cubic_layers"),
    benchmark:
        bench_path("figures/cubic_layers")
    resources:
        mem_mb=1500,
        runtime=5,
    conda:
        CONDA_ENV
    shell:
        STEP


rule cubic_fig_training:
    input:
        table=rules.cubic_training_summary.output.table,
    output:
        out=report_figure("cubic_training", "Cubic regressor"),
    params:
        step=step_params("cubic_fig_training"),
        files=step_files,
    log:
        log_path("figures/cubic_training"),
    benchmark:
        bench_path("figures/cubic_training")
    resources:
        mem_mb=1500,
        runtime=5,
    conda:
        CONDA_ENV
    shell:
        STEP


rule cubic_fig_capacity:
    input:
        table=rules.cubic_capacity_summary.output.table,
    output:
        out=report_figure("cubic_capacity", "Cubic regressor"),
    params:
        step=step_params("cubic_fig_capacity"),
        files=step_files,
    log:
        log_path("figures/cubic_capacity"),
    benchmark:
        bench_path("figures/cubic_capacity")
    resources:
        mem_mb=1500,
        runtime=5,
    conda:
        CONDA_ENV
    shell:
        STEP


rule cubic_fig_grid:
    input:
        table=rules.cubic_grid_summary.output.table,
        latents=rules.cubic_grid_summary.output.latents,
    output:
        out=report_figure("cubic_grid", "Cubic regressor"),
    params:
        step=step_params("cubic_fig_grid"),
        files=step_files,
    log:
        log_path("figures/cubic_grid"),
    benchmark:
        bench_path("figures/cubic_grid")
    resources:
        mem_mb=1500,
        runtime=5,
    conda:
        CONDA_ENV
    shell:
        STEP
