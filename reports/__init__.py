"""Render results (the ``auditkit/results`` JSON document that every auditkit command writes) as markdown and
HTML reports with figures.

This package reads only the results schema (``auditkit.reports.results_schema``); it imports nothing else of the toolkit.
"""
from auditkit.reports.render import render_report
from auditkit.reports.results_schema import load_results, upgrade_results, validate_results

__all__ = ["load_results", "render_report", "upgrade_results", "validate_results"]
