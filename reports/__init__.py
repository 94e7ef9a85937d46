"""Render audit results (the ``auditkit/results`` JSON document) as markdown and HTML reports with figures.

This package reads only the results schema (``reports.results_schema``); it imports nothing else of the toolkit.
"""
from reports.render import render_report
from reports.results_schema import load_results, validate_results

__all__ = ["load_results", "render_report", "validate_results"]
