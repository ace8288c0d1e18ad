# The reproduction scorecard: every claim of the paper and the cubic blog, computed from the tables.

rule scorecard:
    input:
        metrics=rules.mnist_metrics_all.output.metrics,
        ablation=rules.mnist_svd_ablation_all.output.table,
        cubic=rules.cubic_summary.output.summary,
    output:
        scorecard="results/scorecard.parquet",
        markdown=report("results/scorecard.md", caption="../report/scorecard.rst", category="Scorecard"),
    params:
        step=step_params("scorecard", lambda wc: {"accuracy_level": config["mnist"]["ablation"]["accuracy_level"]}),
        files=step_files,
    log:
        log_path("scorecard"),
    benchmark:
        bench_path("scorecard")
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        CONDA_ENV
    shell:
        STEP


ALL_TARGETS.extend(rules.scorecard.output)
