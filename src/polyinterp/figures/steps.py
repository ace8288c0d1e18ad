"""Every figure's step: rule name → figure function (``polyinterp <rule>``, see :mod:`polyinterp.cli`).
A figure function reads tables and saved tensors only, writes its ``out`` files and returns the data
it drew (for tests)."""

STEPS = {
    "fig1_features": "polyinterp.figures.mnist_features:features_figure",
    "fig2_fvu": "polyinterp.figures.mnist_curves:fvu_figure",
    "fig3_kl": "polyinterp.figures.mnist_curves:kl_figure",
    "fig4_ablated_digits": "polyinterp.figures.mnist_ablation:ablated_digits_figure",
    "fig5_ablation_accuracy": "polyinterp.figures.mnist_ablation:ablation_accuracy_figure",
    "fig6_attack_strength": "polyinterp.figures.mnist_ablation:attack_strength_figure",
    "fig_models_fvu": "polyinterp.figures.mnist_models:models_figure",
    "cubic_fig_fit": "polyinterp.figures.cubic_fit:fit_figure",
    "cubic_fig_landmarks": "polyinterp.figures.cubic_landmarks:landmarks_figure",
    "cubic_fig_bands": "polyinterp.figures.cubic_bands:bands_figure",
    "cubic_fig_slopes": "polyinterp.figures.cubic_slopes:slopes_figure",
    "cubic_fig_clamp": "polyinterp.figures.cubic_clamp:clamp_figure",
    "cubic_fig_joint_clamp": "polyinterp.figures.cubic_joint_clamp:joint_clamp_figure",
    "cubic_fig_thresholds": "polyinterp.figures.cubic_thresholds:thresholds_figure",
    "cubic_fig_layers": "polyinterp.figures.cubic_views:layers_figure",
    "cubic_fig_training": "polyinterp.figures.cubic_views:training_figure",
    "cubic_fig_capacity": "polyinterp.figures.cubic_capacity:capacity_figure",
    "cubic_fig_grid": "polyinterp.figures.cubic_grid:grid_figure",
}
