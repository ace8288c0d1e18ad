"""`snakemake --report` bundles every figure of a finished run, with its caption."""

import pytest

from workflow_helpers import SMOKE, run_snakemake, runtime_only_env


@pytest.mark.e2e
def test_report_bundles_all_figures(smoke_run):
    """Built where only the runtime dependencies can be imported (the README's first install line,
    no test extra): issue 16 found the report needing pygments, which only pytest brought."""
    report = smoke_run / "report.html"
    run_snakemake(smoke_run, "--report", str(report), configfiles=(SMOKE, smoke_run / "overlay.yaml"),
                  env=runtime_only_env())
    assert report.stat().st_size > 50_000
    # the report is a zip-less single HTML page holding every figure's name and caption text
    text = report.read_text(errors="replace")
    for name in ["fig1_mlp_relu", "fig2", "fig3", "fig4_mlp_relu", "fig5_mlp_relu", "fig6_mlp_relu", "fig_models", "fig_fits", "fig_degrees", "cubic_fit", "cubic_landmarks", "cubic_bands",
                 "cubic_slopes", "cubic_clamp", "cubic_joint_clamp", "cubic_thresholds", "cubic_layers",
                 "cubic_training", "cubic_capacity", "cubic_grid"]:
        assert f"{name}.png" in text, name
    assert "run_config.yaml" in text  # the report states the config it was built for
