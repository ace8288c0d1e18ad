# Named targets: each figure's short name (fig1 ... fig6, fig_fits, fig_degrees, fig_models, cubic_fit ... cubic_grid), the cubic
# study's tables and figures (cubic), every figure (figures), and what `rule all` (Snakefile) builds:
# ALL_TARGETS, to which each study's rules file adds its summary tables.


MNIST_FIGURES = [f for n in ("fig2", "fig3", "fig_fits", "fig_models") for f in figure_files(n)] + [
    f for n in ("fig1", "fig4", "fig5", "fig6") for f in model_figure_files(n)
]
# the degrees beyond the paper: in `rule all` only where the run fits them (mnist.approx.degrees); its
# named target builds it either way
if config["mnist"]["approx"]["degrees"]:
    MNIST_FIGURES += figure_files("fig_degrees")
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


rule fig_fits:
    localrule: True
    input:
        figure_files("fig_fits"),
        RUN_CONFIG,


rule fig_degrees:
    localrule: True
    input:
        figure_files("fig_degrees"),
        RUN_CONFIG,


rule fig_models:
    localrule: True
    input:
        figure_files("fig_models"),
        RUN_CONFIG,


CUBIC_TABLES = [
    *expand(rules.cubic_train.output.fit, seed=SEEDS),
    *expand(VIEWS.root(rules.cubic_sae.output.metrics), seed=SEEDS),
    *expand(VIEWS.root(rules.cubic_landmark_table.output.ranking), seed=SEEDS),
    *expand(VIEWS.root(rules.cubic_band_detection.output.latents), seed=SEEDS),
    *expand(VIEWS.root(rules.cubic_slope_search.output.best), seed=SEEDS),
    *expand(rules.cubic_clamping.output.summary, seed=SEEDS),
    *expand(rules.cubic_joint_clamping.output.fits, seed=SEEDS),
    *expand(rules.cubic_band_thresholds.output.table, seed=SEEDS),
    *rules.cubic_summary.output,
    *rules.cubic_layers_summary.output,
    *rules.cubic_training_summary.output,
]
CUBIC_FIGURES = [
    f for n in ("cubic_fit", "cubic_landmarks", "cubic_bands", "cubic_slopes", "cubic_clamp", "cubic_joint_clamp",
                "cubic_thresholds", "cubic_layers", "cubic_training")
    for f in figure_files(n)
]
# capacity and the single-polynomial grid: in `rule all` and `cubic` only where the config enables them
# (cubic.capacity.enabled, cubic.grid.enabled); their named targets build them either way.
if config["cubic"]["capacity"]["enabled"]:
    CUBIC_TABLES += rules.cubic_capacity_summary.output
    CUBIC_FIGURES += figure_files("cubic_capacity")
if config["cubic"]["grid"]["enabled"]:
    CUBIC_TABLES += rules.cubic_grid_summary.output
    CUBIC_FIGURES += figure_files("cubic_grid")
ALL_TARGETS.extend(CUBIC_TABLES + CUBIC_FIGURES)


rule cubic_fit:
    localrule: True
    input:
        figure_files("cubic_fit"),
        RUN_CONFIG,


rule cubic_landmarks:
    localrule: True
    input:
        figure_files("cubic_landmarks"),
        RUN_CONFIG,


rule cubic_bands:
    localrule: True
    input:
        figure_files("cubic_bands"),
        RUN_CONFIG,


rule cubic_slopes:
    localrule: True
    input:
        figure_files("cubic_slopes"),
        RUN_CONFIG,


rule cubic_clamp:
    localrule: True
    input:
        figure_files("cubic_clamp"),
        RUN_CONFIG,


rule cubic_joint_clamp:
    localrule: True
    input:
        figure_files("cubic_joint_clamp"),
        expand(rules.cubic_joint_clamping.output.fits, seed=SEEDS),
        RUN_CONFIG,


rule cubic_thresholds:
    localrule: True
    input:
        figure_files("cubic_thresholds"),
        RUN_CONFIG,


rule cubic_layers:
    localrule: True
    input:
        figure_files("cubic_layers"),
        rules.cubic_layers_summary.output.table,
        RUN_CONFIG,


rule cubic_training:
    localrule: True
    input:
        figure_files("cubic_training"),
        rules.cubic_training_summary.output.table,
        RUN_CONFIG,


rule cubic_capacity:
    localrule: True
    input:
        figure_files("cubic_capacity"),
        rules.cubic_capacity_summary.output.table,
        RUN_CONFIG,


rule cubic_grid:
    localrule: True
    input:
        figure_files("cubic_grid"),
        rules.cubic_grid_summary.output,
        RUN_CONFIG,


rule cubic:
    localrule: True
    input:
        CUBIC_TABLES + CUBIC_FIGURES,
        RUN_CONFIG,


rule figures:
    localrule: True
    input:
        [f for f in ALL_TARGETS if f.startswith("results/figures/")],
        RUN_CONFIG,
