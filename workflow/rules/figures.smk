# One rule per figure; each reads only tables and saved tensors. Named targets: fig1 … fig5,
# cubic_* (in cubic.smk) and `figures` (all of them).


rule fig1_features:
    input:
        approx=[mnist_approx(SEEDS[0], s) for s in FIG1_STEPS],
        metrics=rules.mnist_metrics_all.output[0],
    output:
        report_figure("fig1", "MNIST"),
    params:
        p=lambda wc: step_params(config["mnist"]["figures"]),
    log:
        log_path("figures/fig1"),
    benchmark:
        bench_path("figures/fig1")
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        CONDA_ENV
    shell:
        "polyinterp figure-fig1 --approx {input.approx:q} --metrics {input.metrics:q}"
        " --params {params.p:q} --out {output:q} > {log:q} 2>&1"


rule fig2_fvu:
    input:
        metrics=rules.mnist_metrics_all.output[0],
    output:
        report_figure("fig2", "MNIST"),
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
        "polyinterp figure-fig2 --metrics {input.metrics:q} --out {output:q} > {log:q} 2>&1"


rule fig3_kl:
    input:
        metrics=rules.mnist_metrics_all.output[0],
    output:
        report_figure("fig3", "MNIST"),
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
        "polyinterp figure-fig3 --metrics {input.metrics:q} --out {output:q} > {log:q} 2>&1"


rule fig4_ablated_digits:
    input:
        examples=rules.mnist_svd_ablation.output.examples,
    output:
        report_figure("fig4", "MNIST"),
    log:
        log_path("figures/fig4"),
    benchmark:
        bench_path("figures/fig4")
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        CONDA_ENV
    shell:
        "polyinterp figure-fig4 --examples {input.examples:q} --out {output:q} > {log:q} 2>&1"


rule fig5_ablation_accuracy:
    input:
        table=rules.mnist_svd_ablation.output.table,
    output:
        report_figure("fig5", "MNIST"),
    log:
        log_path("figures/fig5"),
    benchmark:
        bench_path("figures/fig5")
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        CONDA_ENV
    shell:
        "polyinterp figure-fig5 --table {input.table:q} --out {output:q} > {log:q} 2>&1"


MNIST_FIGURES = [f for n in ("fig1", "fig2", "fig3", "fig4", "fig5") for f in figure_files(n)]
ALL_TARGETS.extend(MNIST_FIGURES)


rule fig1:
    localrule: True
    input:
        figure_files("fig1"),


rule fig2:
    localrule: True
    input:
        figure_files("fig2"),


rule fig3:
    localrule: True
    input:
        figure_files("fig3"),


rule fig4:
    localrule: True
    input:
        figure_files("fig4"),


rule fig5:
    localrule: True
    input:
        figure_files("fig5"),
