"""The cubic study's steps: rule name → step function (``polyinterp <rule>``, see :mod:`polyinterp.cli`)."""

STEPS = {
    "cubic_train": "polyinterp.cubic.train:train_step",
    "cubic_activations": "polyinterp.cubic.activations:activations_step",
    "cubic_sae": "polyinterp.cubic.sae:sae_step",
    "cubic_landmark_table": "polyinterp.cubic.landmarks:landmarks_step",
    "cubic_band_detection": "polyinterp.cubic.bands:bands_step",
    "cubic_slope_search": "polyinterp.cubic.bands:slopes_step",
    "cubic_clamping": "polyinterp.cubic.clamping:clamp_step",
    "cubic_joint_clamping": "polyinterp.cubic.joint_clamp:joint_clamp_step",
    "cubic_band_thresholds": "polyinterp.cubic.thresholds:thresholds_step",
    "cubic_summary": "polyinterp.cubic.summary:summary_step",
    "cubic_checkpoint_model": "polyinterp.cubic.views:checkpoint_model_step",
    "cubic_layers_summary": "polyinterp.cubic.view_summary:layers_summary_step",
    "cubic_training_summary": "polyinterp.cubic.view_summary:training_summary_step",
    "cubic_capacity_train": "polyinterp.cubic.train:train_step",
    "cubic_capacity_summary": "polyinterp.cubic.capacity:capacity_summary_step",
    "cubic_grid_seed": "polyinterp.cubic.grid:grid_seed_step",
    "cubic_grid_summary": "polyinterp.cubic.grid:grid_summary_step",
}
