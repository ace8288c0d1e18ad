"""Steps that span both studies: rule name → step function (``polyinterp <rule>``, see :mod:`polyinterp.cli`)."""

STEPS = {
    "scorecard": "polyinterp.scorecard:scorecard_step",
}
