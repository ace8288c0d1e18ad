# One rule per figure; each reads only tables and saved tensors. Named targets: fig1 … fig6, fig_models,
# cubic_* (in cubic.smk) and `figures` (all of them). Each rule runs `polyinterp <rule>`.
# fig2, fig3 and fig_models compare the MNIST models (mnist.models) in one file; fig1, fig4, fig5 and
# fig6 are drawn per model: results/figures/fig5_<model>.{pdf,png}, and target fig5 builds every model's.


rule fig1_features:
    input:
        approx=[mnist_approx(seed=SEEDS[0], step=s) for s in FIG1_STEPS],
        ckpt=[mnist_ckpt(seed=SEEDS[0], step=s) for s in FIG1_STEPS],
        mixture=rules.mnist_mixture.output.mixture,
        metrics=rules.mnist_metrics_all.output.metrics,
    output:
        out=report_figure("fig1_{model}", "MNIST", caption="fig1"),
    params:
        step=step_params("fig1_features", lambda wc: {"digit": config["mnist"]["figures"]["digit"]}),
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
        step=step_params("fig2_fvu"),
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


rule fig3_kl:
    input:
        metrics=rules.mnist_metrics_all.output.metrics,
    output:
        out=report_figure("fig3", "MNIST"),
    params:
        step=step_params("fig3_kl"),
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


rule fig4_ablated_digits:
    input:
        examples=rules.mnist_svd_ablation_all.output.examples,
    output:
        out=report_figure("fig4_{model}", "MNIST", caption="fig4"),
    params:
        step=step_params("fig4_ablated_digits", lambda wc: {"digit": config["mnist"]["figures"]["digit"]}),
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
        step=step_params(
            "fig5_ablation_accuracy",
            lambda wc: {k: config["mnist"]["ablation"][k] for k in ("figure_steps", "accuracy_level")},
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
        step=step_params("fig6_attack_strength"),
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
        step=step_params("fig_models_fvu"),
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


MNIST_FIGURES = [f for n in ("fig2", "fig3", "fig_models") for f in figure_files(n)] + [
    f for n in ("fig1", "fig4", "fig5", "fig6") for f in model_figure_files(n)
]
ALL_TARGETS.extend(MNIST_FIGURES)


rule fig1:
    localrule: True
    input:
        model_figure_files("fig1"),
        RUN_CONFIG,


rule fig2:
    localrule: True
    input:
        figure_files("fig2"),
        RUN_CONFIG,


rule fig3:
    localrule: True
    input:
        figure_files("fig3"),
        RUN_CONFIG,


rule fig4:
    localrule: True
    input:
        model_figure_files("fig4"),
        RUN_CONFIG,


rule fig5:
    localrule: True
    input:
        model_figure_files("fig5"),
        RUN_CONFIG,


rule fig6:
    localrule: True
    input:
        model_figure_files("fig6"),
        RUN_CONFIG,


rule fig_models:
    localrule: True
    input:
        figure_files("fig_models"),
        RUN_CONFIG,
