# polyinterp: end-to-end reproduction of two interpretability studies of small MLPs.
#   snakemake --cores 2                                   default config (both studies, 2-core CPU)
#   snakemake --cores 2 --configfile workflow/configs/smoke.yaml
#   snakemake --cores 2 results/figures/fig2.pdf          one figure and only what it needs
import sys
from pathlib import Path

from snakemake.utils import min_version

min_version("9.0")

sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from polyinterp.rules import one_reevaluation_timer

# Snakemake's scheduler adds a chain of re-evaluation passes, one a second, for each job that finishes while
# others wait: most of the CPU a paper run spent outside its jobs (bench/README.md, "Snakemake's
# re-evaluation timers"). One pending re-evaluation is enough (polyinterp.rules, "Snakemake's scheduler").
if not one_reevaluation_timer():
    print("polyinterp: this Snakemake's scheduler has no _schedule_reevalutation, so its re-evaluation timers are "
          "as Snakemake makes them (see polyinterp.rules, \"Snakemake's scheduler\")", file=sys.stderr)


# The default config lives beside this file (also when run with --directory elsewhere);
# --configfile FILE ... overrides the keys it names.
configfile: Path(workflow.basedir) / "config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/mnist.smk"
include: "workflow/rules/cubic.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/scorecard.smk"
include: "workflow/rules/run_config.smk"
include: "workflow/rules/targets.smk"


rule all:
    default_target: True
    input:
        ALL_TARGETS,
