"""The report as markdown: the HTML report's tables, with figures linked as files beside it."""
from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import quote

from auditkit.results.model import ResultsDocument, Setting
from auditkit.results.reproduction import Reproduction
from auditkit.reports.sections.adaptive import ADAPTIVE_COLUMNS, AdaptiveRow, adaptive_rows
from auditkit.reports.sections.canary import CANARY_COLUMNS, canary_heading, canary_rows
from auditkit.reports.sections.details import Details, ESTIMATE_COLUMNS, details
from auditkit.reports.sections.figure_captions import FIGURE_CAPTIONS
from auditkit.reports.sections.findings import client_mode, findings
from auditkit.reports.sections.utility import run_scale
from auditkit.reports.sections.glossary import GLOSSARY
from auditkit.reports.sections.identification import IDENTIFICATION_COLUMNS, identification_rows
from auditkit.reports.sections.intro import intro
from auditkit.reports.sections.membership import (
    MEMBERSHIP_COLUMNS, MEMBERSHIP_EXPLANATION, MEMBERSHIP_HEADING, MembershipBlock, membership_blocks,
)
from auditkit.reports.sections.notes import notes
from auditkit.reports.sections.provenance import config_json, footer, pairs, provenance
from auditkit.reports.sections.reconstructions import REFERENCES_NOTE, reconstructions
from auditkit.reports.sections.reproduction import (
    ORDERING_COLUMNS, REPRODUCTION_GLOSSARY, REPRODUCTION_SUMMARY_COLUMNS, confidence_heading, ordering_quotes,
    ordering_rows, paper_tables, reproduction_intro, reproduction_provenance, reproduction_summary, settings_run,
)
from auditkit.reports.sections.summary import (AttackRow, PrivacyRow, PrivacyUtilityRow, UtilityRow, Verdict,
                                               summary_tables)

# markdown punctuation that could format or link, table pipes, HTML's specials, line breaks
_ESCAPES = str.maketrans({
    "\\": "\\\\", "`": "\\`", "*": "\\*", "_": "\\_", "[": "\\[", "]": "\\]", "|": "\\|",
    "<": "&lt;", ">": "&gt;", "&": "&amp;", "\n": " ", "\r": " ",
})


def escape(text: str) -> str:
    """``text`` as literal markdown (safe in a table cell, inert if the markdown is rendered to HTML)."""
    return text.translate(_ESCAPES)


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    return ["| " + " | ".join(map(escape, header)) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(map(escape, row)) + " |" for row in rows)]


def _image(caption: str, path: str) -> list[str]:
    return [f"![{escape(caption)}]({quote(path)})", "", escape(caption), ""]


def _verdict(verdict: Verdict) -> str:
    shown = f"{verdict.text}, {verdict.evidence}" if verdict.evidence else verdict.text
    return f"{shown} ({verdict.decided_by})" if verdict.decided_by else shown


def _privacy(row: PrivacyRow) -> tuple[str, ...]:
    flags = f" (flags: {', '.join(row.flags)})" if row.flags else ""
    bound = f"{row.bound} ({row.bound_note})" if row.bound_note else row.bound
    label = f"{row.label} (plugin: {row.origin})" if row.origin else row.label
    view = f" ({row.view})" if row.view else ""
    return (label, row.claim + flags + view, _verdict(row.one_round), row.composed, row.accountant,
            _verdict(row.whole_run), bound)


def _attacks(row: AttackRow) -> tuple[str, ...]:
    return row.label, row.identification, row.probe_ssim, row.ssim, row.mse, row.psnr


def _utility(row: UtilityRow) -> tuple[str, ...]:
    mechanism = f"{row.mechanism} ({row.params})" + (f" (plugin: {row.origin})" if row.origin else "")
    return row.label, mechanism, row.accuracy, row.versus, row.bits, row.compression, row.snr


def _privacy_utility(row: PrivacyUtilityRow) -> tuple[str, ...]:
    return row.label, row.claimed, row.composed, row.certified, row.accuracy, row.versus, row.loss


def _adaptive(row: AdaptiveRow) -> tuple[str, ...]:
    return (row.label, row.test, row.claim, f"{row.lower_bound}, {row.cap}", row.verdict, row.note)


def _details(block: Details) -> list[str]:
    lines = [f"### {escape(block.label)}", "", escape(block.summary), ""]
    lines += [f"- **{escape(name)}**: {escape(text)}" for name, text in block.facts]
    if block.estimates:
        lines += ["", f"{escape(block.estimates_heading)}:", "", *_table(ESTIMATE_COLUMNS, block.estimates)]
    for heading, items in (("assumptions", block.assumptions), ("caveats", block.caveats)):
        lines += ["", f"{heading.capitalize()}:", "", *(f"- {escape(item)}" for item in items or ["none"])]
    return lines + [""]


def _membership(blocks: list[MembershipBlock]) -> list[str]:
    """The membership section: its explanation, then per setting the game, the claim judged and the attacks."""
    if not blocks:
        return []
    lines = [f"## {escape(MEMBERSHIP_HEADING)}", "", escape(MEMBERSHIP_EXPLANATION), ""]
    for block in blocks:
        lines += [f"### {escape(block.label)}", "", escape(block.game), "",
                  f"Claim judged: {escape(block.claim)} ({escape(block.note)})", "",
                  *_table(MEMBERSHIP_COLUMNS, [cells for cells, _ in block.rows]), ""]
    return lines


def _code_block(text: str, language: str) -> list[str]:
    """A fenced block longer than any backtick run in ``text``."""
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    return [fence + language, text, fence]


def render_markdown(results: ResultsDocument | Reproduction, figures: Mapping[str, str]) -> str:
    """The report as markdown, laid out as the HTML report of the document's kind. A results document:
    ``figures`` maps summary figure names (see ``FIGURE_CAPTIONS``) to paths relative to the report, and
    each reconstruction grid is linked by its path in the results document (the report's folder holds it:
    ``auditkit.reports.render_report`` copies it there). A reproduction: ``figures`` maps each table's figure name
    (``sections.reproduction.reproduction_figure``) to its path relative to the report."""
    if isinstance(results, Reproduction):
        return _reproduction_markdown(results, figures)
    settings = results.settings
    adaptive = adaptive_rows(settings)
    lines = [f"# auditkit report: {escape(results.title)}", "", escape(intro(results)), ""]
    found = findings(settings, scale=run_scale(results), client_mode=client_mode(results))
    if found:
        lines += ["## Findings", ""]
        for heading, _, items in found.sections():
            lines += [f"### {escape(heading[0].upper() + heading[1:])}", "", *(f"- {escape(item)}" for item in items), ""]
    lines += _glossary(GLOSSARY)
    lines += ["## Summary", ""]
    cells = {"summary-privacy": _privacy, "summary-attacks": _attacks, "summary-utility": _utility,
             "summary-privacy-utility": _privacy_utility}
    for table_id, heading, columns, rows in summary_tables(settings):
        lines += [f"### {heading}", "", *_table(columns, [cells[table_id](row) for row in rows]), ""]
    summary_notes = notes(settings)
    if summary_notes:
        lines += ["### Notes", "", *(f"- {escape(note)}" for note in summary_notes), ""]
    if adaptive:
        lines += ["## Adaptive tests", "", *_table(ADAPTIVE_COLUMNS, list(map(_adaptive, adaptive))), ""]
    identification = [cells for cells, _ in identification_rows(settings)]
    if identification:
        lines += ["## Reconstruction against the claim", "",
                  escape("A DP claim bounds the success of every reconstruction attack: with the target one of M real "
                         "candidates, no attack identifies it with probability above the claim's "
                         "reconstruction-robustness bound."), "",
                  *_table(IDENTIFICATION_COLUMNS, identification), ""]
    canary = [cells for cells, _ in canary_rows(settings)]
    if canary:
        heading, explanation = canary_heading(settings)
        lines += [f"## {escape(heading)}", "", escape(explanation), "", *_table(CANARY_COLUMNS, canary), ""]
    lines += _membership(membership_blocks(settings))
    drawn = [(caption, figures[name]) for name, caption in FIGURE_CAPTIONS.items() if name in figures]
    if drawn:
        lines += ["## Figures", ""]
    for caption, path in drawn:
        lines += _image(caption, path)
    lines += _reconstructions(settings)
    lines += ["## Claim details", ""]
    for setting in settings:
        lines += _details(details(setting))
    p = results.provenance
    lines += [
        "## Provenance", "",
        *(f"- **{escape(name)}**: {escape(text)}" for name, text in provenance(results)), "",
        "### Versions", "", *_table(("package", "version"), pairs(p.versions)), "",
        "### Threat models (who sees what)", "",
        *_table(("view", "what it sees"), pairs(p.threat_models)), "",
        "### Config", "", *_code_block(config_json(results), "json"), "",
        *_footer(results),
    ]
    return "\n".join(lines)


def _reconstructions(settings: list[Setting]) -> list[str]:
    """The clean references the settings share, then each setting's grids under its heading."""
    grids = reconstructions(settings)
    if not grids.settings:
        return []
    lines = ["## Reconstructions", ""]
    if grids.references:
        lines += [escape(REFERENCES_NOTE), ""]
    for grid in grids.references:
        lines += _image(grid.caption, grid.path)
    for block in grids.settings:
        lines += [f"### {escape(block.label)}", "", escape(block.summary), ""]
        for grid in block.grids:
            lines += _image(grid.caption, grid.path)
    return lines


def _footer(document: ResultsDocument | Reproduction) -> list[str]:
    return ["---", "", escape(footer(document)), ""]


def _glossary(glossary: tuple[tuple[str, str], ...]) -> list[str]:
    return ["## How to read this report", "", *(f"- **{escape(term)}**: {escape(text)}" for term, text in glossary),
            ""]


def _badges(counts: list[tuple[str, str]]) -> str:
    return ", ".join(text for text, _ in counts)


def _reproduction_markdown(document: Reproduction, figures: Mapping[str, str]) -> str:
    """A reproduction's report as markdown: the HTML report's sections, each table's figure linked as a file."""
    lines = [f"# auditkit reproduction: {escape(document.title)}", ""]
    lines += [*(f"- {escape(line)}" for line in reproduction_intro(document)), ""]
    lines += _glossary(REPRODUCTION_GLOSSARY)
    summary = [(heading, metric, _badges(rows), _badges(pairs) or "none claimed")
               for heading, metric, rows, pairs in reproduction_summary(document)]
    lines += ["## Summary", "", *_table(REPRODUCTION_SUMMARY_COLUMNS, summary), ""]
    columns = ("method", "column", "paper (line)", confidence_heading(document), "ours − paper", "verdict",
               "why")
    for table in paper_tables(document):
        lines += [f"## {escape(table.heading)}", "", escape(table.metric), ""]
        if table.note:
            lines += [f"> {escape(table.note)}", ""]
        rows = [(r.method, r.column, f"{r.paper} ({r.line})" + (f"; {r.compared}" if r.compared else ""),
                 f"{r.ours}; {r.per_seed}", r.difference, r.verdict, "; ".join(r.why)) for r in table.rows]
        lines += [*_table(columns, rows), "", *_image(table.figure_caption, figures[table.figure])]
    orderings = ordering_rows(document)
    if orderings:
        rows = [(o.claim, o.column, o.above, o.below, o.difference, o.verdict,
                 f"{o.gap}: {o.gap_verdict}" if o.gap else "") for o in orderings]
        lines += ["## Orderings the paper claims", "", *_table(ORDERING_COLUMNS, rows), "",
                  "### As the paper words them", "", *(f"> {escape(q)}\n" for q in ordering_quotes(document))]
    lines += ["## Settings run", ""]
    for run in settings_run(document):
        lines += [f"### {escape(run.label)}: {escape(run.kind)}", "", f"Read by {escape('; '.join(run.rows))}.", "",
                  *_table(("measured", *run.seeds), run.measured), "", *_code_block(run.config, "json"), ""]
    lines += ["## Provenance", "",
              *(f"- **{escape(name)}**: {escape(text)}" for name, text in reproduction_provenance(document)),
              "", "### Versions", "", *_table(("package", "version"), pairs(document.provenance.versions)),
              "", "### Config", "", *_code_block(config_json(document), "json"), "", *_footer(document)]
    return "\n".join(lines)
