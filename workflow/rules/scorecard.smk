# The reproduction scorecard: every claim of the paper and the cubic blog, computed from the tables.

rule scorecard:
    input:
        metrics=rules.mnist_metrics_all.output.metrics,
        ablation=expand(rules.mnist_svd_ablation_all.output.table, model=MODEL_NAMES),
        early=expand(rules.mnist_early_fvu.output.table, model=MODEL_NAMES, seed=SEEDS),
        cubic=rules.cubic_summary.output.summary,
        # the cubic study beyond the blog (rows "cubic+"); capacity and grid where enabled
        joint_clamp=expand(rules.cubic_joint_clamping.output.fits, seed=SEEDS),
        thresholds=expand(rules.cubic_band_thresholds.output.table, seed=SEEDS),
        layers=rules.cubic_layers_summary.output.table,
        training=rules.cubic_training_summary.output.table,
        capacity=rules.cubic_capacity_summary.output.table if config["cubic"]["capacity"]["enabled"] else [],
        grid=rules.cubic_grid_summary.output.table if config["cubic"]["grid"]["enabled"] else [],
    output:
        scorecard="results/scorecard.parquet",
        markdown=report("results/scorecard.md", caption="../report/scorecard.rst", category="Scorecard"),
        why=report("results/why_differs.md", caption="../report/why_differs.rst", category="Scorecard"),
    params:
        **step_args("scorecard", lambda wc: {"accuracy_level": config["mnist"]["ablation"]["accuracy_level"],
                                             "optimizer": config["mnist"]["train"]["optimizer"]}),
    log: log_path("scorecard")
    resources: **TABLE_JOB
    conda: CONDA_ENV
    shell: STEP


ALL_TARGETS.extend(rules.scorecard.output)
