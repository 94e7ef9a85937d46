"""The bibliography: every paper id the code cites is a key of PAPERS, and each entry cites its paper."""
import dataclasses
from pathlib import Path

import pytest

from auditkit.bibliography import PAPER_REFERENCE, PAPERS, Paper, cited_ids
from auditkit.reproduction.paper import load_paper, paper_ids

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("auditkit", "mechanisms", "attacks", "reports", "benchmarks", "examples", "tests", "docs")
SUFFIXES = {".py", ".toml", ".j2", ".md", ".html"}


def _source_files():
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in SUFFIXES and path.is_file() and "__pycache__" not in path.parts:
                yield path


def test_the_papers_are_000_to_004_each_under_its_own_id():
    assert sorted(PAPERS) == ["000", "001", "002", "003", "004"]
    for key, paper in PAPERS.items():
        assert isinstance(paper, Paper) and paper.id == key
        assert paper.authors and paper.title and paper.venue and paper.short and paper.url.startswith("https://")
    with pytest.raises(dataclasses.FrozenInstanceError):
        PAPERS["000"].year = 1999


def test_a_citation_names_authors_title_venue_year_and_url():
    cite = PAPERS["004"].citation()
    assert cite == ('Y. Wang, X. Cao, S. Jin and M.-Y. Chow, "A Novel Privacy Enhancement Scheme with Dynamic '
                    'Quantization for Federated Learning," arXiv:2405.16058, 2024. https://arxiv.org/abs/2405.16058')
    for paper in PAPERS.values():
        cite = paper.citation()
        assert paper.title in cite and str(paper.year) in cite and paper.url in cite
        assert paper.authors[-1].split()[-1] in cite


@pytest.mark.parametrize(("text", "ids"), [
    ("CEPAM (paper 003)", {"003"}), ('compat = "paper000"', {"000"}), ("support_rule=paper002", {"002"}),
    ("DP-SQ (seed 001)", {"001"}), ("CEPAM (papers 000 and 003)", {"000", "003"}), ("003 Theorem 12", {"003"}),
    ("004's footnote 5", {"004"}), ("003 L381", {"003"}),
    ("paper " + "007", {"007"}),  # written in two parts: this file is scanned too
    ("10,000 Table rows, 1,000 trials, 100 clients", set()),
])
def test_paper_references_are_recognised_in_the_forms_the_code_uses(text, ids):
    assert cited_ids(text) == ids


def test_every_paper_id_the_code_cites_is_in_the_bibliography():
    unknown, seen = [], set()
    for path in _source_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for line_no, line in enumerate(text.splitlines(), 1):
            for paper_id in cited_ids(line):
                seen.add(paper_id)
                if paper_id not in PAPERS:
                    unknown.append(f"{path.relative_to(ROOT)}:{line_no}: {line.strip()[:100]}")
    assert not unknown, "paper ids not in auditkit.bibliography.PAPERS:\n" + "\n".join(unknown)
    assert seen == set(PAPERS)  # the scan reads the code: every paper is cited somewhere
    assert PAPER_REFERENCE.pattern  # the one pattern the scan and the docs share


@pytest.mark.parametrize("reproduction", paper_ids())
def test_each_reproduction_quotes_papers_of_the_bibliography_under_their_title(reproduction):
    paper = load_paper(reproduction)
    sources = [source.split()[0] for source in paper.sources]
    assert set(sources) <= set(PAPERS), paper.sources
    assert PAPERS[sources[0]].title in paper.title
