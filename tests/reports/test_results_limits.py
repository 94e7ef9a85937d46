"""A results.json handed to ``auditkit report`` is not ours to trust (issue 39): a file over the size limit, nested
deeper than the parser's recursion, or holding a string of 10^6 characters is one ``error:`` line and exit 2, fast,
and nothing is rendered. Before, deep nesting was a RecursionError traceback and a 10^6-character label took minutes
and gigabytes of rendering, then a MemoryError."""
import copy
import json

import pytest

from auditkit.cli import app
from auditkit.results import load_results, validate_results
from auditkit.config_bounds import MAX_NAME_CHARS
from auditkit.results.types import MAX_STRING_CHARS
from auditkit.strict_json import MAX_BYTES, MAX_DEPTH, dumps_strict, read_bounded

LONG = 10**6


def report(path, capsys):
    """``auditkit report PATH`` in this process: (exit status, stderr lines)."""
    with pytest.raises(SystemExit) as done:
        app.main(["report", str(path)])
    return done.value.code, capsys.readouterr().err.splitlines()


def nested(depth):
    value = []
    for _ in range(depth - 1):
        value = [value]
    return value


def long_label(doc):
    doc["settings"][0]["label"] = "x" * LONG


def long_title(doc):
    doc["title"] = "t" * (MAX_NAME_CHARS + 1)


def long_config_value(doc):
    doc["config"]["note"] = "n" * LONG


def long_param_key(doc):
    doc["settings"][1]["mechanism"]["params"]["k" * (MAX_STRING_CHARS + 1)] = 1


def deep_config(doc):
    doc["config"]["deep"] = nested(MAX_DEPTH)  # parsed, but past the limit with the levels above it


@pytest.mark.parametrize("change, line", [
    (long_label, f"results.settings[0].label must be at most 1,000 characters, got {LONG:,}"),
    (long_title, "results.title must be at most 1,000 characters, got 1,001"),
    (long_config_value, f"results.config.note must be at most 100,000 characters, got {LONG:,}"),
    (long_param_key, "a key of results.settings[1].mechanism.params must be at most 100,000 characters, got 100,001"),
    (deep_config, "nested deeper than the 100-level limit"),
])
def test_a_hostile_results_file_is_one_line_naming_the_path_and_the_limit(results_folder, capsys, change, line):
    folder, document = results_folder
    change(document)
    path = folder / "results.json"
    path.write_text(dumps_strict(document))
    code, lines = report(path, capsys)
    assert (code, lines) == (2, [f"error: {path}: {line}"])
    assert not (folder / "report.html").exists() and not (folder / "report.md").exists()


def test_a_file_nested_past_the_parsers_recursion_is_one_line(tmp_path, capsys):
    """Python's json raises RecursionError here: it was a traceback."""
    path = tmp_path / "results.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    assert report(path, capsys) == (2, [f"error: {path}: nested deeper than the 100-level limit"])


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path, capsys):
    path = tmp_path / "results.json"
    with path.open("wb") as file:
        file.truncate(MAX_BYTES + 1)  # sparse: 64 MiB of nothing on disk, and never read
    assert report(path, capsys) == (2, [f"error: {path}: larger than the 64 MiB limit (67,108,865 bytes)"])


def test_an_integer_of_more_digits_than_python_converts_is_not_valid_json(tmp_path, capsys):
    path = tmp_path / "results.json"
    path.write_text('{"schema_version": ' + "1" * 5000 + "}")
    code, lines = report(path, capsys)
    assert code == 2 and len(lines) == 1 and lines[0].startswith(f"error: {path}: not valid JSON (Exceeds the limit")


def test_the_limits_leave_every_realistic_document_valid(any_document):
    """The fixtures' documents (every command's) pass, and so do strings right at the limits."""
    _, document = any_document
    validate_results(document)
    if "settings" in document:
        at_limit = copy.deepcopy(document)
        at_limit["title"] = "t" * MAX_NAME_CHARS
        at_limit["settings"][0]["label"] = "x" * MAX_NAME_CHARS
        at_limit["config"]["note"] = "n" * MAX_STRING_CHARS
        validate_results(at_limit)


def test_nesting_at_the_limit_reads_and_one_level_more_is_refused(tmp_path):
    path = tmp_path / "nested.json"
    path.write_text(json.dumps(nested(MAX_DEPTH)))
    assert read_bounded(path) == nested(MAX_DEPTH)
    path.write_text(json.dumps(nested(MAX_DEPTH + 1)))
    with pytest.raises(ValueError, match=r"^nested deeper than the 100-level limit$"):
        read_bounded(path)


def test_load_results_refuses_a_long_label_of_a_reproduction_too(tmp_path, reproduction):
    reproduction["tables"][0]["id"] = "i" * (MAX_NAME_CHARS + 1)
    path = tmp_path / "reproduction.json"
    path.write_text(dumps_strict(reproduction))
    with pytest.raises(ValueError, match=r"reproduction\.tables\[0\]\.id must be at most 1,000 characters, got 1,001$"):
        load_results(path)
