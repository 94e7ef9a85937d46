"""The bundled paper files: every number parses, every ordering names rows of its table, values quoted exactly."""
from pathlib import Path

import pytest

from auditkit.reproduction import load_paper, paper_ids
from auditkit.reproduction.paper import PaperError, parse_reported

SEEDS = Path(__file__).parents[4] / "shared" / "seeds"


def test_reported_numbers_parse_with_and_without_their_interval():
    assert parse_reported("82.06±1.35") == (82.06, 1.35, False)
    assert parse_reported("91.34") == (91.34, 0.0, False)
    assert parse_reported(" 83.99 +- 0.92 ") == (83.99, 0.92, False)
    assert parse_reported("≈70") == (70.0, 0.0, True)  # "approximately": the row's tolerance applies
    assert parse_reported("-5.34") == (-5.34, 0.0, False)
    assert parse_reported("∞") == (float("inf"), 0.0, False)
    with pytest.raises(PaperError, match="cannot read the reported number 'about 80'"):
        parse_reported("about 80")


def test_unknown_paper_names_the_argument_and_the_bundled_ones():
    with pytest.raises(ValueError, match=r"PAPER must be one of .*cepam.*; got 'nope'"):
        load_paper("nope")


@pytest.mark.parametrize("paper_id", paper_ids())
def test_every_bundled_paper_loads_and_its_rows_are_distinct(paper_id):
    paper = load_paper(paper_id)
    assert paper.tables and set(paper.budgets) == {"quick", "paper"}
    for table in paper.tables:
        labels = [row.label for row in table.rows]
        assert len(labels) == len(set(labels)), table.id
        assert all(row.comparable or row.why for row in table.rows)


SOURCES = {"000": "000_ea3e79e7d6e80d30.txt", "001": "001_ae1d62bb2a6a5948.txt", "002": "002_44a095397aeb3026.txt",
           "003": "003_a46ce00baed14370.txt", "004": "004_67ac4a587b0ccb9e.txt"}


@pytest.mark.parametrize("paper_id", paper_ids())
def test_numbers_are_quoted_from_the_seed_text_at_their_line(paper_id):
    """Each printed number (and its +-) appears on the line of the seed's text that the paper file names (the
    table's id starts with the seed's number)."""
    if not SEEDS.is_dir():
        pytest.skip("the seed papers are not beside this checkout")
    paper = load_paper(paper_id)
    checked = 0
    for table in paper.tables:
        lines = (SEEDS / SOURCES[table.id.split()[0]]).read_text(encoding="utf-8").splitlines()
        for row in table.rows:
            assert 1 <= row.line <= len(lines), row.label
            if row.reported is None:
                continue
            value, plus_minus, _ = row.reported
            line = lines[row.line - 1]
            printed = row.paper.lstrip("≈").split("±")[0].strip()
            assert printed.replace("∞", "\\infty") in line or printed in line, (row.label, line)
            assert not plus_minus or f"{plus_minus:.2f}" in line, (row.label, line)
            checked += 1
    assert checked or all(r.reported is None for t in paper.tables for r in t.rows)


def test_cepam_rows_start_their_lines():
    if not SEEDS.is_dir():
        pytest.skip("the seed papers are not beside this checkout")
    for table in load_paper("cepam").tables:
        lines = (SEEDS / SOURCES[table.id.split()[0]]).read_text(encoding="utf-8").splitlines()
        for row in table.rows:
            if row.reported is not None:
                assert lines[row.line - 1].startswith(row.method.replace(" = ", "=").split(" (")[0]), row.label


def test_an_approximate_number_needs_a_tolerance(monkeypatch):
    import dataclasses

    from auditkit.reproduction import paper as paper_module

    paper = load_paper("cepam")
    table = paper.tables[0]
    bad = dataclasses.replace(paper, tables=(dataclasses.replace(
        table, rows=(dataclasses.replace(table.rows[0], paper="≈80", tolerance=None),)),))
    with pytest.raises(PaperError, match="an approximate number needs a tolerance"):
        paper_module._check(bad)
