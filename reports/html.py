"""The report as one self-contained HTML page: inline CSS, images embedded as data URIs, no script, no URL."""
from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import jinja2

from auditkit.results.model import ResultsDocument
from auditkit.results.reproduction import Reproduction
from auditkit.reports.sections.adaptive import ADAPTIVE_COLUMNS, adaptive_rows
from auditkit.reports.sections.canary import CANARY_COLUMNS, canary_heading, canary_rows
from auditkit.reports.sections.details import ESTIMATE_COLUMNS, details
from auditkit.reports.sections.figure_captions import FIGURE_CAPTIONS
from auditkit.reports.sections.findings import client_mode, findings
from auditkit.reports.sections.utility import run_scale
from auditkit.reports.sections.glossary import GLOSSARY
from auditkit.reports.sections.identification import IDENTIFICATION_COLUMNS, identification_rows
from auditkit.reports.sections.intro import intro
from auditkit.reports.sections.membership import (
    MEMBERSHIP_COLUMNS, MEMBERSHIP_EXPLANATION, MEMBERSHIP_HEADING, membership_blocks,
)
from auditkit.reports.sections.notes import notes
from auditkit.reports.sections.provenance import config_json, footer, pairs, provenance
from auditkit.reports.sections.reconstructions import REFERENCES_NOTE, reconstructions
from auditkit.reports.sections.reproduction import (
    ORDERING_COLUMNS, REPRODUCTION_GLOSSARY, REPRODUCTION_SUMMARY_COLUMNS, confidence_heading, ordering_quotes,
    ordering_rows, paper_tables, reproduction_intro, reproduction_provenance, reproduction_summary, settings_run,
)
from auditkit.reports.sections.summary import summary_tables

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_ENVIRONMENT = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


@dataclass(frozen=True)
class _Image:
    caption: str
    src: str


def png_data_uri(data: bytes, name: str) -> str:
    """The PNG image ``data`` as a ``data:image/png;base64,...`` URI (ValueError naming ``name`` if it is not a
    PNG)."""
    if not data.startswith(_PNG_SIGNATURE):
        raise ValueError(f"{name} is not a PNG file")
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def render_html(results: ResultsDocument | Reproduction, figures: Mapping[str, bytes],
                grids: Mapping[str, bytes] | None = None) -> str:
    """The report as HTML, from the template of the document's kind (both extend ``base.html.j2``: one header,
    style and footer). A results document: ``figures`` maps summary figure names (see ``FIGURE_CAPTIONS``) to
    their PNG images, ``grids`` each reconstruction grid the results name (its path relative to the folder of
    ``results.json``) to its PNG. A reproduction: ``figures`` maps each table's figure name
    (``sections.reproduction.reproduction_figure``) to its PNG."""
    if isinstance(results, Reproduction):
        return _reproduction_html(results, figures)
    settings = results.settings
    recorded = results.provenance
    shown = reconstructions(settings)
    missing = [path for path in shown.paths() if path not in (grids or {})]
    if missing:
        raise ValueError(f"{missing[0]}: the results name this reconstruction grid, and no image of it was given")
    embedded = {path: png_data_uri((grids or {})[path], path) for path in shown.paths()}
    return _ENVIRONMENT.get_template("report.html.j2").render(
        heading="auditkit report",
        footer=footer(results),
        title=results.title,
        intro=intro(results),
        findings=findings(settings, scale=run_scale(results), client_mode=client_mode(results)),
        glossary=GLOSSARY,
        identification_columns=IDENTIFICATION_COLUMNS,
        identification=identification_rows(settings),
        canary_columns=CANARY_COLUMNS,
        canary=canary_rows(settings),
        canary_heading=canary_heading(settings),
        membership_heading=MEMBERSHIP_HEADING,
        membership_explanation=MEMBERSHIP_EXPLANATION,
        membership_columns=MEMBERSHIP_COLUMNS,
        membership=membership_blocks(settings),
        summary=summary_tables(settings),
        notes=notes(settings),
        adaptive_columns=ADAPTIVE_COLUMNS,
        adaptive=adaptive_rows(settings),
        figures=[_Image(caption, png_data_uri(figures[name], f"figures/{name}.png"))
                 for name, caption in FIGURE_CAPTIONS.items() if name in figures],
        references=[_Image(grid.caption, embedded[grid.path]) for grid in shown.references],
        references_note=REFERENCES_NOTE,
        # each setting's grids behind a fold, open where there is one setting
        reconstructions=[(block, [_Image(grid.caption, embedded[grid.path]) for grid in block.grids])
                         for block in shown.settings],
        details=[details(s) for s in settings],
        details_open=len(settings) == 1,  # one setting: its details are the report's body
        estimate_columns=ESTIMATE_COLUMNS,
        provenance=provenance(results),
        versions=pairs(recorded.versions),
        threat_models=pairs(recorded.threat_models),
        config=config_json(results),
    )


def _reproduction_html(document: Reproduction, figures: Mapping[str, bytes]) -> str:
    """A reproduction's report as HTML: each table of the paper with our numbers, its verdicts and its figure."""
    return _ENVIRONMENT.get_template("reproduction.html.j2").render(
        heading="auditkit reproduction",
        footer=footer(document),
        title=document.title,
        intro=reproduction_intro(document),
        glossary=REPRODUCTION_GLOSSARY,
        summary_columns=REPRODUCTION_SUMMARY_COLUMNS,
        summary=reproduction_summary(document),
        ours_heading=confidence_heading(document),
        tables=[(table, _Image(table.figure_caption, png_data_uri(figures[table.figure], f"figures/{table.figure}.png")))
                for table in paper_tables(document)],
        ordering_columns=ORDERING_COLUMNS,
        orderings=ordering_rows(document),
        quotes=ordering_quotes(document),
        runs=settings_run(document),
        provenance=reproduction_provenance(document),
        versions=pairs(document.provenance.versions),
        config=config_json(document),
    )
