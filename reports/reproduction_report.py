"""report.html and report.md of a reproduction (``reproduction.json``): per table, the paper's number beside ours
with its interval and the row's verdict; the claimed orderings checked on our runs; a figure per table."""
from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from auditkit.stage_store import replace_atomically

__all__ = ["render_reproduction"]

_BADGE = {"reproduced": "#2e7d32", "not reproduced": "#c62828", "not comparable": "#757575",
          "holds": "#2e7d32", "reversed": "#c62828", "unresolved": "#757575"}


def _ours(row: dict[str, Any]) -> str:
    if row["interval"] is None:
        return f"{row['mean']:.2f}"
    low, high = row["interval"]
    return f"{row['mean']:.2f} [{low:.2f}, {high:.2f}]"


def _interval(pair: dict[str, Any]) -> str:
    if pair["interval"] is None:
        return f"{pair['difference']:+.2f}"
    low, high = pair["interval"]
    return f"{pair['difference']:+.2f} [{low:+.2f}, {high:+.2f}]"


def _intro(doc: dict[str, Any]) -> list[str]:
    b, paper = doc["budget"], doc["paper"]
    return [
        f"Paper: {paper['title']} (sources: {', '.join(paper['sources'])}).",
        f"Budget: {b['name']}: {b['rounds']} rounds, {len(b['seeds'])} seeds (the paper: {b['paper_rounds']} "
        f"rounds, {b['paper_seeds']} seeds). {b['why']}",
        f"Data: {doc['dataset']} (the paper's: {paper['data_note']}). Wall time {doc['seconds']:.0f} s.",
        "Ours: the mean over seeds with its 95% Student-t interval. Verdict: reproduced when the paper's number "
        "(widened by the +- it states) meets our interval; not comparable when this run, or the row's setting, "
        "differs from the paper's.",
        *(f"Not comparable, every row: {reason}." for reason in doc["not_comparable"]),
    ]


def _figure(doc: dict[str, Any], table: dict[str, Any], out: Path, index: int) -> str:
    """Our mean test-accuracy curve per row (the paper's final number as a marker at its last round)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    columns = list(dict.fromkeys(r["column"] for r in table["rows"]))
    fig, axes = plt.subplots(1, len(columns), figsize=(6 * len(columns), 4), squeeze=False)
    for ax, column in zip(axes[0], columns, strict=True):
        for row in (r for r in table["rows"] if r["column"] == column):
            seeds = doc["runs"][row["setting"]]["seeds"]
            curve = 100 * np.mean([seeds[str(s)]["curve"] for s in doc["budget"]["seeds"]], axis=0)
            line, = ax.plot(np.arange(1, len(curve) + 1), curve, label=row["method"])
            ax.plot([len(curve)], [row["paper_value"]], marker="*", markersize=10, color=line.get_color())
        ax.set_title(f"{table['id']}: {column}" if column else table["id"])
        ax.set_xlabel("round")
        ax.set_ylabel("test accuracy (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    name = f"figures/reproduction-{index}.png"
    replace_atomically(out / name, lambda tmp: fig.savefig(tmp, dpi=110))
    plt.close(fig)
    return name


def _markdown(doc: dict[str, Any], figures: list[str]) -> str:
    lines = [f"# Reproduction: {doc['paper']['id']}", ""]
    lines += [*(f"- {text}" for text in _intro(doc)), ""]
    for table, figure in zip(doc["tables"], figures, strict=True):
        lines += [f"## {table['id']}: {table['caption']}", "", f"Metric: {table['metric']}.", "",
                  "| method | column | paper (line) | ours [95%] | ours - paper | verdict | why |",
                  "|---|---|---|---|---|---|---|"]
        for row in table["rows"]:
            why = "; ".join(row["why"]).replace("|", "\\|")
            lines.append(f"| {row['method']} | {row['column']} | {row['paper']} (l. {row['line']}) | {_ours(row)} | "
                         f"{row['difference']:+.2f} | {row['verdict']} | {why} |")
        lines += ["", f"![{table['id']}]({figure})", ""]
    if doc["orderings"]:
        lines += ["## Orderings the paper claims", "",
                  "| claim | column | above | below | difference [95%] | verdict |", "|---|---|---|---|---|---|"]
        for o in doc["orderings"]:
            for p in o["pairs"]:
                lines.append(f"| {o['id']} | {p['column']} | {p['above']} | {p['below']} | {_interval(p)} | "
                             f"{p['verdict']} |")
        lines += ["", *(f"- {o['id']}: \"{o['quote']}\"" for o in doc["orderings"]), ""]
    return "\n".join(lines)


def _badge(verdict: str) -> str:
    return (f'<span class="badge" style="background:{_BADGE.get(verdict, "#757575")}">'
            f"{html.escape(verdict)}</span>")


def _html(doc: dict[str, Any], figures: list[str]) -> str:
    e = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>auditkit reproduction: {e(doc['paper']['id'])}</title><style>",
        "body{font-family:sans-serif;margin:2em;max-width:1300px;color:#222}table{border-collapse:collapse;"
        "margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;font-size:14px;vertical-align:top}"
        "th{background:#f3f3f3;text-align:left}.num{text-align:right;white-space:nowrap}"
        ".badge{color:#fff;border-radius:8px;padding:1px 8px;font-size:12px;white-space:nowrap}"
        "img{max-width:100%}.why{color:#555;font-size:12px}",
        "</style></head><body>",
        f"<h1>auditkit reproduction: {e(doc['paper']['id'])}</h1>",
        "<ul>", *(f"<li>{e(t)}</li>" for t in _intro(doc)), "</ul>",
    ]
    for table, figure in zip(doc["tables"], figures, strict=True):
        parts += [f"<h2>{e(table['id'])}: {e(table['caption'])}</h2><p>Metric: {e(table['metric'])}.</p>",
                  "<table><tr><th>method</th><th>column</th><th>paper (line)</th><th>ours [95%]</th>"
                  "<th>ours - paper</th><th>verdict</th><th>why</th></tr>"]
        for row in table["rows"]:
            why = "<br>".join(e(w) for w in row["why"])
            parts.append(f"<tr><td>{e(row['method'])}</td><td>{e(row['column'])}</td>"
                         f"<td class='num'>{e(row['paper'])} (l. {row['line']})</td><td class='num'>{e(_ours(row))}</td>"
                         f"<td class='num'>{row['difference']:+.2f}</td><td>{_badge(row['verdict'])}</td>"
                         f"<td class='why'>{why}</td></tr>")
        parts += ["</table>", f"<img src='{e(figure)}' alt='{e(table['id'])}'>",
                  "<p class='why'>Our mean test accuracy per round (lines); the paper's final number (stars).</p>"]
    if doc["orderings"]:
        parts += ["<h2>Orderings the paper claims</h2>",
                  "<table><tr><th>claim</th><th>column</th><th>above</th><th>below</th><th>difference [95%]</th>"
                  "<th>verdict</th></tr>"]
        for o in doc["orderings"]:
            for p in o["pairs"]:
                parts.append(f"<tr><td>{e(o['id'])}</td><td>{e(p['column'])}</td><td>{e(p['above'])}</td>"
                             f"<td>{e(p['below'])}</td><td class='num'>{e(_interval(p))}</td>"
                             f"<td>{_badge(p['verdict'])}</td></tr>")
        parts.append("</table>")
        parts += [f"<p class='why'>{e(o['id'])}: &ldquo;{e(o['quote'])}&rdquo;</p>" for o in doc["orderings"]]
    parts.append("</body></html>")
    return "\n".join(parts)


def render_reproduction(doc: dict[str, Any], out: Path) -> list[Path]:
    """Write report.html, report.md and the figures of a reproduction document into ``out``."""
    figures = [_figure(doc, table, out, i) for i, table in enumerate(doc["tables"])]
    written = []
    for name, text in (("report.html", _html(doc, figures)), ("report.md", _markdown(doc, figures))):
        written.append(replace_atomically(out / name, lambda tmp, text=text: tmp.write_text(text, encoding="utf-8")))
    return written
