"""The bundled paper files: every number parses, every ordering names rows of its table, values quoted exactly."""
from pathlib import Path

import pytest

from auditkit.reproduction import load_paper, paper_ids
from auditkit.reproduction.paper import PaperError, parse_reported

SEEDS = Path(__file__).parents[4] / "shared" / "seeds"


def test_reported_numbers_parse_with_and_without_their_interval():
    assert parse_reported("82.06±1.35") == (82.06, 1.35)
    assert parse_reported("91.34") == (91.34, 0.0)
    assert parse_reported(" 83.99 +- 0.92 ") == (83.99, 0.92)
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


SOURCES = {"000": "000_ea3e79e7d6e80d30.txt", "003": "003_a46ce00baed14370.txt"}


def test_cepam_numbers_are_quoted_from_the_seed_text_at_their_line():
    """Each number (and its +-) appears on the line of the seed's text that the paper file names."""
    if not SEEDS.is_dir():
        pytest.skip("the seed papers are not beside this checkout")
    for table in load_paper("cepam").tables:
        lines = (SEEDS / SOURCES[table.id.split()[0]]).read_text(encoding="utf-8").splitlines()
        for row in table.rows:
            value, plus_minus = row.reported
            line = lines[row.line - 1]
            assert f"{value:.2f}" in line and (not plus_minus or f"{plus_minus:.2f}" in line), (row.label, line)
            assert line.startswith(row.method.replace(" = ", "=").split(" (")[0]), (row.label, line)
