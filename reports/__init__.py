"""Render results documents (``auditkit.results``: what every auditkit command writes) as markdown and HTML
reports with figures.

What a report says is written section by section in ``auditkit.reports.sections``; ``markdown`` and ``html`` lay it
out; ``figures`` draws the summary figures.
"""
from auditkit.reports.render import render_report

__all__ = ["render_report"]
