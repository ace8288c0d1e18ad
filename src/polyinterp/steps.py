"""Steps that span both studies: rule name → step function (``polyinterp <rule>``, see :mod:`polyinterp.cli`)."""

STEPS = {
    "scorecard": "polyinterp.scorecard:scorecard_step",
    "run_config": "polyinterp.run_config:run_config_step",
}
