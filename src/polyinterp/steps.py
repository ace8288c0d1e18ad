"""The one step table: rule name → step function (``"module:function"``) for ``polyinterp <rule>``
(:mod:`polyinterp.cli`). Every rule of the workflow that runs a command has its entry, under the rule's
own name; a step's function takes the rule's ``input:`` and ``output:`` keys as keyword arguments
(and ``params`` where it has any). Functions are imported only when their step runs. A figure function
reads tables and saved tensors only, writes its ``out`` files and returns the data it drew (for tests)."""

STEPS = {
    # Study 1: MLPs as polynomials (MNIST)
    "mnist_data": "polyinterp.mnist.data:data_step",
    "mnist_mixture": "polyinterp.mnist.mixture:mixture_step",
    "mnist_solver_plan": "polyinterp.mnist.approximants:solver_plan_step",
    "mnist_train": "polyinterp.mnist.train:train_step",
    "mnist_approximants": "polyinterp.mnist.approximants:approximants_step",
    "mnist_degree_approximants": "polyinterp.mnist.degrees.approximants:degree_approximants_step",
    "mnist_metrics": "polyinterp.mnist.metrics:metrics_step",
    "mnist_metrics_all": "polyinterp.mnist.metrics:metrics_all_step",
    "mnist_degree_summary": "polyinterp.mnist.degrees.summary:degree_summary_step",
    "mnist_svd_ablation": "polyinterp.mnist.attack.ablation:ablation_step",
    "mnist_svd_ablation_all": "polyinterp.mnist.attack.ablation:ablation_all_step",
    "mnist_attack_summary": "polyinterp.mnist.attack.summary:attack_summary_step",
    "mnist_early_fvu": "polyinterp.mnist.early_fvu:early_fvu_step",
    "mnist_early_fvu_summary": "polyinterp.mnist.early_fvu:early_fvu_summary_step",
    # Study 2: Cardano features in a cubic regressor
    "cubic_train": "polyinterp.cubic.regressor.train:train_step",
    "cubic_activations": "polyinterp.cubic.sae.activations:activations_step",
    "cubic_sae": "polyinterp.cubic.sae.autoencoder:sae_step",
    "cubic_landmark_table": "polyinterp.cubic.probes.landmarks:landmarks_step",
    "cubic_band_detection": "polyinterp.cubic.probes.bands:bands_step",
    "cubic_slope_search": "polyinterp.cubic.probes.bands:slopes_step",
    "cubic_clamping": "polyinterp.cubic.interventions.clamping:clamp_step",
    "cubic_joint_clamping": "polyinterp.cubic.interventions.joint_clamp:joint_clamp_step",
    "cubic_band_thresholds": "polyinterp.cubic.probes.thresholds:thresholds_step",
    "cubic_summary": "polyinterp.cubic.summary:summary_step",
    "cubic_checkpoint_model": "polyinterp.cubic.views.regressor_views:checkpoint_model_step",
    "cubic_layers_summary": "polyinterp.cubic.views.summary:layers_summary_step",
    "cubic_training_summary": "polyinterp.cubic.views.summary:training_summary_step",
    "cubic_capacity_train": "polyinterp.cubic.regressor.train:train_step",
    "cubic_capacity_summary": "polyinterp.cubic.views.capacity:capacity_summary_step",
    "cubic_grid_seed": "polyinterp.cubic.views.grid:grid_seed_step",
    "cubic_grid_summary": "polyinterp.cubic.views.grid:grid_summary_step",
    # Figures
    "fig1_features": "polyinterp.figures.mnist.features:features_figure",
    "fig2_fvu": "polyinterp.figures.mnist.curves:fvu_figure",
    "fig3_kl": "polyinterp.figures.mnist.curves:kl_figure",
    "fig4_ablated_digits": "polyinterp.figures.mnist.ablation:ablated_digits_figure",
    "fig5_ablation_accuracy": "polyinterp.figures.mnist.ablation:ablation_accuracy_figure",
    "fig6_attack_strength": "polyinterp.figures.mnist.ablation:attack_strength_figure",
    "fig_models_fvu": "polyinterp.figures.mnist.models:models_figure",
    "cubic_fig_fit": "polyinterp.figures.cubic.fit:fit_figure",
    "cubic_fig_landmarks": "polyinterp.figures.cubic.landmarks:landmarks_figure",
    "cubic_fig_bands": "polyinterp.figures.cubic.bands:bands_figure",
    "cubic_fig_slopes": "polyinterp.figures.cubic.slopes:slopes_figure",
    "cubic_fig_clamp": "polyinterp.figures.cubic.clamp:clamp_figure",
    "cubic_fig_joint_clamp": "polyinterp.figures.cubic.joint_clamp:joint_clamp_figure",
    "cubic_fig_thresholds": "polyinterp.figures.cubic.thresholds:thresholds_figure",
    "cubic_fig_layers": "polyinterp.figures.cubic.views:layers_figure",
    "cubic_fig_training": "polyinterp.figures.cubic.views:training_figure",
    "cubic_fig_capacity": "polyinterp.figures.cubic.capacity:capacity_figure",
    "cubic_fig_grid": "polyinterp.figures.cubic.grid:grid_figure",
    # Both studies
    "scorecard": "polyinterp.scorecard.table:scorecard_step",
    "run_config": "polyinterp.run_config:run_config_step",
}
