"""The reproduction document (``reproduction.json``): a document of the results schema, validated before anything
is written, written as strict JSON with the modes the umask gives, and rendered by ``auditkit report`` as a results
document is (the same command, the same renderer). Runs are faked (``tests/reports/reproductions.py``): what is
checked here is the writing and rendering, not the training."""
import importlib.util
import json
import math
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

import auditkit.reproduction as reproduction
from auditkit.cli import app
from auditkit.output_folder import MANIFEST
from auditkit.results import load_results
from auditkit.results import write_results


def _load_reproductions():
    spec = importlib.util.spec_from_file_location(
        "reproductions", Path(__file__).parents[2] / "reports" / "reproductions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REPRODUCTIONS = _load_reproductions()
WRITTEN = ["reproduction.json", "report.html", "report.md"]


def _files(folder: Path) -> list[str]:
    """The files in ``folder``, auditkit's manifest of them (``auditkit.output_folder.MANIFEST``) aside."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST)


@pytest.fixture
def fake_training(monkeypatch):
    """``reproduce`` with every run faked: the plan's settings are not trained."""
    monkeypatch.setattr(reproduction, "run_plan", lambda plan, on_run=None: REPRODUCTIONS.fake_runs(plan))


def test_reproduce_writes_a_valid_document_and_renders_it_through_the_report_renderer(tmp_path, fake_training):
    document = reproduction.reproduce("msp", seeds=2, out=tmp_path)
    assert _files(tmp_path) == ["figures/reproduction-0.png", "figures/reproduction-1.png", *sorted(WRITTEN)]
    assert load_results(tmp_path / "reproduction.json") == document  # validated on the way back in
    assert document["command"] == "reproduce" and document["budget"]["seeds"] == [0, 1]
    page = (tmp_path / "report.html").read_text()
    assert '<header id="report-header">\n<h1>auditkit reproduction: msp (quick budget)</h1>' in page
    assert "(command: reproduce)</footer>" in page


def test_an_overwrite_says_what_it_removed_and_kept(tmp_path, fake_training):
    reproduction.reproduce("msp", seeds=2, out=tmp_path)
    (tmp_path / "figures" / "mine.png").write_bytes(b"the user's own")
    swaps = []
    reproduction.reproduce("msp", seeds=2, out=tmp_path, overwrite=True, on_swap=swaps.append)
    (swap,) = swaps
    assert swap.kept == ("figures/mine.png",) and swap.removed == ()
    assert set(swap.replaced) >= {"reproduction.json", "report.html", "report.md", "figures/reproduction-0.png"}
    assert (tmp_path / "figures" / "mine.png").read_bytes() == b"the user's own"


def test_an_invalid_document_is_refused_before_anything_is_written(tmp_path, fake_training, monkeypatch):
    build = reproduction.reproduction_document

    def with_a_nan(plan, runs, seconds):
        document = build(plan, runs, seconds)
        document["tables"][0]["rows"][0]["paper_plus_minus"] = math.nan
        return document

    monkeypatch.setattr(reproduction, "reproduction_document", with_a_nan)
    out = tmp_path / "out"
    with pytest.raises(ValueError) as error:
        reproduction.reproduce("msp", seeds=2, out=out)
    assert str(error.value) == "reproduction.tables[0].rows[0].paper_plus_minus must be a finite number, got nan"
    assert not out.exists()


@pytest.mark.parametrize("change, message", [
    (lambda d: d["budget"].pop("rounds"), "reproduction.budget.rounds is missing"),
    (lambda d: d.update(seconds=math.nan), "reproduction.seconds must be a finite number, got nan"),
    (lambda d: d["tables"][1]["rows"][0].update(mean="4.9"),
     "reproduction.tables[1].rows[0].mean must be a number, got '4.9'"),
])
def test_write_results_refuses_a_corrupted_reproduction_in_one_line_and_writes_nothing(tmp_path, change, message):
    document = REPRODUCTIONS.sample_reproduction("dpsq")
    change(document)
    with pytest.raises(ValueError) as error:
        write_results(document, tmp_path)
    assert str(error.value) == message
    assert _files(tmp_path) == []


@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o077, 0o600)])
def test_reproduction_json_is_strict_json_and_the_reproduction_files_follow_the_umask(umask, tmp_path, fake_training,
                                                                                     monkeypatch, mask, expected):
    """Runs whose SNR is infinite (a lossless uplink) or not measured (NaN) in a round."""
    fake = REPRODUCTIONS.fake_runs

    def lossless(plan):
        runs = fake(plan)
        for key, by_seed in runs.items():
            if plan.settings[key]["kind"] == "train":
                for entry in by_seed.values():
                    entry.update(snr_db=math.inf, snr_curve=[math.inf, math.nan])
        return runs

    monkeypatch.setattr(reproduction, "run_plan", lambda plan, on_run=None: lossless(plan))
    with umask(mask):
        reproduction.reproduce("dpsq", seeds=2, out=tmp_path)
    raw = json.loads((tmp_path / "reproduction.json").read_text(encoding="utf-8"),
                     parse_constant=lambda constant: pytest.fail(f"not strict JSON: {constant}"))
    trained = [run for run in raw["runs"].values() if run["kind"] == "train"]
    assert trained and all(seed["snr_db"] == "Infinity" and seed["snr_curve"] == ["Infinity", "NaN"]
                           for run in trained for seed in run["seeds"].values())
    files = [tmp_path / name for name in [*_files(tmp_path), MANIFEST]]
    assert len(files) == len(raw["tables"]) + 4
    assert {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in files} == {p.name: oct(expected) for p in files}


@pytest.fixture
def reproduction_folder(tmp_path):
    """A folder holding only a reproduction.json (its reports not yet rendered)."""
    write_results(REPRODUCTIONS.sample_reproduction("jopeq"), tmp_path)
    return tmp_path


def _report(*args: str):
    return CliRunner().invoke(app.build_cli(), ["report", *args])


def test_auditkit_report_renders_a_reproduction_folder_as_it_renders_results(reproduction_folder):
    result = _report(str(reproduction_folder))
    assert result.exit_code == 0, result.output
    written = "".join(result.output.split()).split("wrote")[1:]  # each "wrote PATH", however the console wraps
    tables = len(load_results(reproduction_folder / "reproduction.json")["tables"])
    assert written == [*(str(reproduction_folder / "figures" / f"reproduction-{i}.png") for i in range(tables)),
                       str(reproduction_folder / "report.md"), str(reproduction_folder / "report.html")]
    page = (reproduction_folder / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and '<header id="report-header">' in page
    assert '<table id="reproduction-summary" class="summary">' in page
    assert (reproduction_folder / "report.md").read_text().startswith("# auditkit reproduction: jopeq (quick budget)")


def test_auditkit_report_takes_the_reproduction_file_and_a_format(reproduction_folder, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    result = _report(str(reproduction_folder / "reproduction.json"), "--format", "md", "--out", str(elsewhere))
    assert result.exit_code == 0, result.output
    assert (elsewhere / "report.md").is_file() and not (elsewhere / "report.html").exists()
    assert not (reproduction_folder / "report.md").exists()


def test_auditkit_report_on_a_folder_without_a_document_is_one_line(tmp_path):
    result = _report(str(tmp_path))
    assert result.exit_code == 2
    assert result.output.strip() == f"error: {tmp_path}: holds no results.json or reproduction.json"
    assert _files(tmp_path) == []
