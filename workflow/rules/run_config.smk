# Which config made results/: rule run_config records it (packaged by `snakemake --report`), and
# every invocation compares its own config with the record (polyinterp.run_config).
from snakemake.logging import logger

from polyinterp.config import config_hash
from polyinterp.run_config import (RUN_CONFIG, config_mismatch, read_run_config, refuse_foreign_report,
                                   repository_relative)

# the --configfile overlays on config.yaml, relative to the repository where they lie in it
_CONFIGFILES = repository_relative(workflow.overwrite_configfiles, workflow.basedir)
_MISMATCH = config_mismatch(RUN_CONFIG, config, _CONFIGFILES) if workflow.is_main_process else None
if _MISMATCH:
    # A report has no job that would rebuild the figures, so it refuses; a run rebuilds what changed.
    if any(arg == "--report" or arg.startswith("--report=") for arg in sys.argv):
        raise refuse_foreign_report(_MISMATCH, " ".join(read_run_config(RUN_CONFIG)["configfiles"]))
    logger.warning(f"{_MISMATCH}\nJobs whose parameters differ are rerun; {RUN_CONFIG} is rewritten by this run.")


rule run_config:
    output:
        run_config=report(RUN_CONFIG, caption="../report/run_config.rst", category="Run"),
    params:
        **step_args("run_config",
                    lambda wc: {"config": config, "configfiles": _CONFIGFILES, "config_hash": config_hash(config)}),
    log: log_path("run_config")
    resources:
        mem_mb=500,
        runtime=2,
    conda: CONDA_ENV
    shell: STEP


ALL_TARGETS.extend(rules.run_config.output)
