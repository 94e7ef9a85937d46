"""Render results documents (``auditkit.results``: what every auditkit command writes) as markdown and HTML
reports with figures."""
from auditkit.reports.render import render_report

__all__ = ["render_report"]
