"""Open a rendered ``report.html`` in headless Chromium (Playwright, Debian's ``/usr/bin/chromium``) and say what
a reader would get: the summary table's rows, whether every image decoded, every request that left the page,
every JS dialog, and a full-page screenshot.

Reusable from any test (the suite runs with ``--import-mode=importlib``, so load this file by path)::

    path = Path(__file__).parents[1] / "reports" / "browser.py"
    spec = importlib.util.spec_from_file_location("report_browser", path)
    browser = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(browser)
    seen = browser.check_report_in_browser(out / "report.html", tmp_path / "report.png")

or from a shell: ``python tests/reports/browser.py auditkit-out/report.html report.png [SUMMARY-SELECTOR]``.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
_IMAGES = "images => images.map(i => ({complete: i.complete, naturalWidth: i.naturalWidth, src: i.src.slice(0, 22)}))"


def check_report_in_browser(html_path: str | Path, screenshot_path: str | Path,
                            summary: str = "#summary-privacy") -> dict[str, Any]:
    """Load ``html_path`` by ``file://`` in headless Chromium and report what happened (asserts nothing).

    At a 1400-pixel-wide window, returns ``summary_visible`` and ``summary_rows`` (the body rows of the table
    ``summary`` selects: a results report's privacy table, or a reproduction's ``#reproduction-summary``),
    ``overflowing`` (the ids of summary tables wider than their box: a reader would scroll sideways), ``images`` (each
    ``<img>``: complete, naturalWidth, the start of its src), ``failed_requests``, ``external_requests``
    (any request not for a ``data:`` or ``file:`` URL), ``dialogs`` (JS dialog messages, dismissed),
    ``page_errors`` and ``screenshot`` (the full-page PNG written to ``screenshot_path``).
    """
    from playwright.sync_api import sync_playwright

    seen: dict[str, Any] = {"failed_requests": [], "external_requests": [], "dialogs": [], "page_errors": []}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("requestfailed", lambda r: seen["failed_requests"].append(f"{r.url[:80]}: {r.failure}"))
            page.on("request", lambda r: None if r.url.startswith(("data:", "file:"))
                    else seen["external_requests"].append(r.url))
            page.on("dialog", lambda d: (seen["dialogs"].append(d.message), d.dismiss()))
            page.on("pageerror", lambda e: seen["page_errors"].append(str(e)))
            page.goto(Path(html_path).resolve().as_uri(), wait_until="load")
            seen["summary_visible"] = page.locator(summary).is_visible()
            seen["summary_rows"] = page.locator(f"{summary} tbody tr").count()
            seen["overflowing"] = page.eval_on_selector_all(
                "table.summary", "tables => tables.filter(t => t.parentElement.scrollWidth > "
                "t.parentElement.clientWidth).map(t => t.id)")
            seen["images"] = page.eval_on_selector_all("img", _IMAGES)
            page.screenshot(path=str(screenshot_path), full_page=True)
            seen["screenshot"] = str(screenshot_path)
        finally:
            browser.close()
    return seen


if __name__ == "__main__":
    print(json.dumps(check_report_in_browser(*sys.argv[1:4]), indent=2))
