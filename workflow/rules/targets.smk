# Named targets: each figure's short name (fig1 ... fig6, fig_fits, fig_degrees, fig_models,
# cubic_fit ... cubic_grid), the cubic study's tables and figures (cubic), every figure (figures), and
# what `rule all` (Snakefile) builds: ALL_TARGETS, to which each study's rules file adds its summary tables.


MNIST_FIGURES = [f for n in ("fig2", "fig3", "fig_fits", "fig_models") for f in figure_files(n)] + [
    f for n in ("fig1", "fig4", "fig5", "fig6") for f in model_figure_files(n)
]
# the degrees beyond the paper: in `rule all` only where the run fits them (mnist.approx.degrees); its
# named target builds it either way
if config["mnist"]["approx"]["degrees"]:
    MNIST_FIGURES += figure_files("fig_degrees")
ALL_TARGETS.extend(MNIST_FIGURES)


# One named target per figure: its files (every model's for a per-model figure) and the run's config record.
FIGURE_TARGETS = {
    **{name: model_figure_files(name) for name in ("fig1", "fig4", "fig5", "fig6")},
    **{name: figure_files(name) for name in ("fig2", "fig3", "fig_fits", "fig_degrees", "fig_models")},
}
for _name, _files in FIGURE_TARGETS.items():

    rule:
        name: _name
        localrule: True
        input:
            _files,
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


# One named target per cubic figure: the figure, the tables it is the face of, the run's config record.
CUBIC_FIGURE_TARGETS = {
    **{name: [] for name in ("cubic_fit", "cubic_landmarks", "cubic_bands", "cubic_slopes", "cubic_clamp",
                             "cubic_thresholds")},
    "cubic_joint_clamp": expand(rules.cubic_joint_clamping.output.fits, seed=SEEDS),
    "cubic_layers": [rules.cubic_layers_summary.output.table],
    "cubic_training": [rules.cubic_training_summary.output.table],
    "cubic_capacity": [rules.cubic_capacity_summary.output.table],
    "cubic_grid": list(rules.cubic_grid_summary.output),
}
for _name, _tables in CUBIC_FIGURE_TARGETS.items():

    rule:
        name: _name
        localrule: True
        input:
            figure_files(_name),
            _tables,
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
