"""The report as one self-contained HTML page: inline CSS, images embedded as data URIs, no script, no URL."""
from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from auditkit.reports import content
from auditkit.results.model import Command

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


def png_data_uri(path: Path) -> str:
    """The PNG file at ``path`` as a ``data:image/png;base64,...`` URI (ValueError if it is not a PNG)."""
    data = Path(path).read_bytes()
    if not data.startswith(_PNG_SIGNATURE):
        raise ValueError(f"{path} is not a PNG file")
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def render_html(results: dict[str, Any], figure_paths: Mapping[str, Path], results_dir: Path) -> str:
    """The report as HTML, from the template of the document's kind (both extend ``base.html.j2``: one header,
    style and footer). A results document: ``figure_paths`` maps summary figure names (see
    ``content.FIGURE_CAPTIONS``) to PNG files, and each reconstruction grid is read from ``results_dir`` (the
    folder of ``results.json``). A reproduction: ``figure_paths`` maps each table's figure name
    (``content.reproduction_figure``) to its PNG."""
    if results["command"] == Command.REPRODUCE:
        return _reproduction_html(results, figure_paths)
    settings = results["settings"]
    provenance = results["provenance"]
    return _ENVIRONMENT.get_template("report.html.j2").render(
        heading="auditkit report",
        footer=content.footer(results),
        title=results["title"],
        intro=content.intro(results),
        findings=content.findings(settings, content.class_count(results)),
        glossary=content.GLOSSARY,
        identification_columns=content.IDENTIFICATION_COLUMNS,
        identification=content.identification_rows(settings),
        canary_columns=content.CANARY_COLUMNS,
        canary=content.canary_rows(settings),
        canary_heading=content.canary_heading(settings),
        summary=content.summary_tables(settings),
        notes=content.notes(settings),
        adaptive_columns=content.ADAPTIVE_COLUMNS,
        adaptive=content.adaptive_rows(settings),
        figures=[_Image(caption, png_data_uri(figure_paths[name]))
                 for name, caption in content.FIGURE_CAPTIONS.items() if name in figure_paths],
        reconstructions=[_Image(grid.caption, png_data_uri(Path(results_dir) / grid.path))
                         for grid in content.reconstructions(settings)],
        details=[content.details(s) for s in settings],
        details_open=len(settings) == 1,  # one setting: its details are the report's body
        estimate_columns=content.ESTIMATE_COLUMNS,
        provenance=content.provenance(results),
        versions=content.pairs(provenance["versions"]),
        threat_models=content.pairs(provenance["threat_models"]),
        config=content.config_json(results),
    )


def _reproduction_html(document: dict[str, Any], figure_paths: Mapping[str, Path]) -> str:
    """A reproduction's report as HTML: each table of the paper with our numbers, its verdicts and its figure."""
    return _ENVIRONMENT.get_template("reproduction.html.j2").render(
        heading="auditkit reproduction",
        footer=content.footer(document),
        title=document["title"],
        intro=content.reproduction_intro(document),
        glossary=content.REPRODUCTION_GLOSSARY,
        summary_columns=content.REPRODUCTION_SUMMARY_COLUMNS,
        summary=content.reproduction_summary(document),
        ours_heading=content.confidence_heading(document),
        tables=[(table, _Image(table.figure_caption, png_data_uri(figure_paths[table.figure])))
                for table in content.paper_tables(document)],
        ordering_columns=content.ORDERING_COLUMNS,
        orderings=content.ordering_rows(document),
        quotes=content.ordering_quotes(document),
        runs=content.settings_run(document),
        provenance=content.reproduction_provenance(document),
        versions=content.pairs(document["provenance"]["versions"]),
        config=content.config_json(document),
    )
