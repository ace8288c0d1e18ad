"""The reproduction scorecard: every claim of the paper (arXiv 2502.01032) and of the cubic blog that
the pipeline measures, with the reference value, ours (mean, sd, min, max over seeds, and where it
was read), the tolerance and a verdict computed from the tables — never typed.

Verdicts: ``reproduced`` (ours within the tolerance), ``differs`` (outside it), ``not comparable``
(the run does not reach the setting of the claim, e.g. no checkpoint at 2^16 steps, or the SGD
baseline is off), ``measured`` (a question the source leaves open: ours is the answer, with nothing
to compare it with; the study ``cubic+`` rows of :mod:`polyinterp.scorecard.cubic_beyond`), ``yes`` /
``no`` (an open yes-or-no question, answered by the criterion in its row; the study ``mnist+`` rows of
:mod:`polyinterp.scorecard.degrees` and the early-gap row of
:func:`~polyinterp.scorecard.mnist.early_fvu_claims`). Each claim's criterion is stated in its row.

With several MNIST networks (``mnist.models``) every MNIST claim is read for each model; the
``model`` column names it (``—`` for the cubic study). Rows ``fit`` compare the approximants fitted
under the moment-matched single Gaussian with the mixture's (where ``mnist.approx.fits`` has both).

Table schema (``results/scorecard.parquet``): study, model, claim, reference, tolerance, criterion, where
(str); ours_mean, ours_sd, ours_min, ours_max (float64; sd NaN for one seed); n_seeds (int64);
verdict (str).

The package: :mod:`~polyinterp.scorecard.claim` (a claim and the columns), one module per study
(:mod:`~polyinterp.scorecard.mnist`, :mod:`~polyinterp.scorecard.degrees` for ``mnist+``,
:mod:`~polyinterp.scorecard.cubic`, :mod:`~polyinterp.scorecard.cubic_beyond` for ``cubic+``) and
:mod:`~polyinterp.scorecard.table` (the table and rule ``scorecard``); each imports only downward.
"""

from polyinterp.scorecard.claim import COLUMNS, Claim
from polyinterp.scorecard.cubic import cubic_claims
from polyinterp.scorecard.cubic_beyond import beyond_claims
from polyinterp.scorecard.degrees import degree_claims
from polyinterp.scorecard.mnist import attack_claims, early_fvu_claims, fit_claims, mnist_claims, model_claims
from polyinterp.scorecard.table import scorecard_markdown, scorecard_step, scorecard_table

__all__ = ["COLUMNS", "Claim", "attack_claims", "beyond_claims", "cubic_claims", "degree_claims", "early_fvu_claims",
           "fit_claims", "mnist_claims", "model_claims", "scorecard_markdown", "scorecard_step", "scorecard_table"]
