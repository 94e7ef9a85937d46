"""The papers auditkit implements and audits, by the three-digit id the code cites them with.

Code, configs and reports name a paper by its id: "paper 003" (or "seed 003", the same paper), "003 Theorem 12",
"003 L381" (a line of the paper's text), ``compat = "paper000"`` (a mechanism's reading of paper 000 where it
differs from the correct one) and ``support_rule = "paper002"``. Every such id is a key of :data:`PAPERS`
(``tests/auditkit/test_bibliography.py`` checks the whole source tree with :data:`PAPER_REFERENCE`)::

    from auditkit.bibliography import PAPERS
    PAPERS["003"].citation()   # 'C. W. Ling, C. H. M. Shiu, ... "Communication-Efficient ...," arXiv:2501.12046 ...'

Papers 000 and 003 are two versions of one arXiv entry (003 adds Shiu, norm clipping and Theorems 12-13); the code
keeps their ids apart because they differ (000 normalises the update, 003 clips it). Authors and titles are as the
papers' first pages print them; the arXiv numbers are those of the public entries with these titles and authors.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["PAPERS", "PAPER_REFERENCE", "Paper", "cited_ids"]


@dataclass(frozen=True)
class Paper:
    """One paper: ``id`` (the code's three-digit id), ``short`` (the name the code uses for its scheme),
    ``authors`` (as printed), ``title``, ``venue``, ``year``, ``url`` and ``note`` (what sets it apart, or "")."""

    id: str
    short: str
    authors: tuple[str, ...]
    title: str
    venue: str
    year: int
    url: str
    note: str = ""

    def citation(self) -> str:
        """One line: authors, "title", venue, year, then the URL."""
        names = [_initials(a) for a in self.authors]
        authors = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
        return f'{authors}, "{self.title}," {self.venue}, {self.year}. {self.url}'


def _initials(name: str) -> str:
    """"Chih Wei Ling" -> "C. W. Ling"; "Mo-Yuen Chow" -> "M.-Y. Chow"; "Sergiy A. Vorobyov" -> "S. A. Vorobyov"."""
    *given, family = name.split()
    return " ".join(["-".join(part[0] + "." for part in g.rstrip(".").split("-")) for g in given] + [family])


_CEPAM_TITLE = "Communication-Efficient and Privacy-Adaptable Mechanism for Federated Learning"

PAPERS: dict[str, Paper] = {
    p.id: p
    for p in (
        Paper(
            id="000", short="CEPAM",
            authors=("Chih Wei Ling", "Youqi Wu", "Jiande Sun", "Cheuk Ting Li", "Linqi Song", "Weitao Xu"),
            title=_CEPAM_TITLE, venue="arXiv:2501.12046 (earlier version)", year=2025,
            url="https://arxiv.org/abs/2501.12046",
            note="earlier version of 003: the update normalised to clip * x / ||x||, ||x|| sent in clear (compat = "
                 "\"paper000\"); Laplace experiments (Table II)",
        ),
        Paper(
            id="001", short="DP-SQ",
            authors=("Dang Qua Nguyen", "Morteza Hashemi", "Erik Perrins", "Sergiy A. Vorobyov", "David J. Love",
                     "Taejoon Kim"),
            title="Privacy-Preserving Quantized Federated Learning with Diverse Precision",
            venue="arXiv:2507.00920", year=2025, url="https://arxiv.org/abs/2507.00920",
            note="the DP stochastic quantizer, LaplaceSQ, devices of diverse precision (fusion weights, cluster sizes)",
        ),
        Paper(
            id="002", short="JoPEQ",
            authors=("Natalie Lang", "Elad Sofer", "Tomer Shaked", "Nir Shlezinger"),
            title="Joint Privacy Enhancement and Quantization in Federated Learning",
            venue="arXiv:2208.10888", year=2022, url="https://arxiv.org/abs/2208.10888",
            note="extends the authors' ISIT 2022 paper of the same name; its reference code is cited as \"jopeq-code\"",
        ),
        Paper(
            id="003", short="CEPAM",
            authors=("Chih Wei Ling", "Chun Hei Michael Shiu", "Youqi Wu", "Jiande Sun", "Cheuk Ting Li",
                     "Linqi Song", "Weitao Xu"),
            title=_CEPAM_TITLE, venue="arXiv:2501.12046 (later version)", year=2025,
            url="https://arxiv.org/abs/2501.12046",
            note="later version of 000: norm clipping, Theorem 12 (Gaussian) and Theorem 13 (Laplace), Table I",
        ),
        Paper(
            id="004", short="MSP-FL",
            authors=("Yifan Wang", "Xianghui Cao", "Shi Jin", "Mo-Yuen Chow"),
            title="A Novel Privacy Enhancement Scheme with Dynamic Quantization for Federated Learning",
            venue="arXiv:2405.16058", year=2024, url="https://arxiv.org/abs/2405.16058",
            note="model splitting with consensus rounds (MSP-FL, MSP+Lap) and shrinking-interval quantization "
                 "(MSPDQ-FL)",
        ),
    )
}

_LOCATORS = (r"Theorem|Lemma|Table|Tables|Fig\.|Figs\.|Sec\.|Section|Algorithm|Alg\.|eq\.|footnote|Remark|"
             r"Proposition|Definition|Appendix|appendix|L\d+")
PAPER_REFERENCE = re.compile(
    r"\b(?:papers?|seeds?) (\d{3}) and (\d{3})\b"            # papers 000 and 003
    r"|\b(?:papers?|seeds?)[ _-]?(\d{3})\b"                  # paper 003, paper003, seed 004
    rf"|(?<![\d,.])\b(\d{{3}})(?:'s)? (?:{_LOCATORS})"       # 003 Theorem 12, 004's footnote 5, 003 L381
)
"""How code cites a paper by id; every match's id must be a key of :data:`PAPERS`."""


def cited_ids(text: str) -> set[str]:
    """The paper ids ``text`` cites (:data:`PAPER_REFERENCE`)."""
    return {g for match in PAPER_REFERENCE.finditer(text) for g in match.groups() if g}
