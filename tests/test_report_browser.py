"""The smoke run's report, opened in headless Chromium: the front page loads with no console error
and shows the workflow description, every category lists its figures and tables, and a figure opens.
Needs Debian's `chromium` and the `playwright` package (the test extra); skipped without them unless
POLYINTERP_REQUIRE_BROWSER=1 (set by .ci/run, which installs chromium)."""

from __future__ import annotations

import os
import shutil

import pytest

from workflow_helpers import SMOKE, run_snakemake

CATEGORIES = {
    "MNIST": ["fig_models.png", "fig_fits.png", "fig_degrees.png", "fig1_mlp_relu.png", "fig2.png", "fig3.png", "fig4_mlp_relu.png", "fig5_mlp_relu.png",
              "fig6_mlp_relu.png"],
    "Cubic regressor": ["cubic_fit.png", "cubic_landmarks.png", "cubic_bands.png", "cubic_slopes.png", "cubic_clamp.png",
                        "cubic_joint_clamp.png", "cubic_thresholds.png", "cubic_layers.png", "cubic_training.png",
                        "cubic_capacity.png", "cubic_grid.png"],
    "Tables": ["attack_strength.md", "fvu_by_degree.md", "early_fvu.md"],
    "Scorecard": ["scorecard.md", "why_differs.md"],
    "Run": ["run_config.yaml"],
}


def browser_or_skip():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if chromium and sync_playwright:
        return chromium, sync_playwright
    if os.environ.get("POLYINTERP_REQUIRE_BROWSER") == "1":
        pytest.fail(f"POLYINTERP_REQUIRE_BROWSER=1 but chromium is {chromium} and playwright "
                    f"{'importable' if sync_playwright else 'missing'}")
    pytest.skip("needs chromium (apt-get install chromium) and playwright (the test extra)")


@pytest.mark.e2e
def test_the_report_opens_in_a_browser(smoke_run, tmp_path):
    chromium, sync_playwright = browser_or_skip()
    report = tmp_path / "report.html"
    run_snakemake(smoke_run, "--report", str(report), configfiles=(SMOKE, smoke_run / "overlay.yaml"))
    errors = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"], headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            for category, files in CATEGORIES.items():
                page.goto(report.as_uri())
                page.wait_for_load_state("networkidle")
                assert "MLPs as polynomials" in page.inner_text("body")  # workflow.rst on the front page
                page.get_by_text(category, exact=True).click()
                rows = page.locator("tr").all_inner_texts()
                for name in files:
                    assert any(name in row for row in rows), (category, name, rows)
            # a figure opens: its PNG is drawn at full size
            page.goto(report.as_uri())
            page.wait_for_load_state("networkidle")
            page.get_by_text("MNIST", exact=True).click()
            page.locator("tr", has_text="results/figures/fig2.png").locator("a[iconname=eye]").click()
            image = page.locator("img[src*='filename=fig2.png']")
            image.wait_for(timeout=10_000)
            width, complete = image.evaluate("e => [e.naturalWidth, e.complete]")
            assert complete and width > 500, width
        finally:
            browser.close()
    assert not errors, errors
