"""What auditkit writes follows the umask (mode 0666 less the umask), as files made by ``open`` do: results.json
and the reports, figures included."""
import stat

import pytest

from auditkit.results import write_results
from auditkit.reports import render_report


@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o077, 0o600)])
def test_results_and_reports_follow_the_umask(umask, results_folder, mask, expected):
    folder, document = results_folder
    with umask(mask):
        written = [write_results(document, folder), *render_report(document, folder)]
    assert {p.name for p in written} >= {"results.json", "report.html", "report.md", "accuracy_vs_round.png"}
    assert {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in written} == {p.name: oct(expected) for p in written}
