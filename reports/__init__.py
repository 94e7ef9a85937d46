"""Render results (the ``auditkit/results`` JSON document that every auditkit command writes) as markdown and
HTML reports with figures.

What a report says is written section by section in ``auditkit.reports.sections``; ``markdown`` and ``html`` lay it
out. Of the rest of the toolkit the package imports only ``auditkit.output_folder`` (files written together),
``auditkit.config_bounds`` (the sizes a document may have) and ``auditkit.attacks.verdicts`` (a headline's evidence).
"""
from auditkit.reports.render import render_report
from auditkit.reports.results_schema import load_results, upgrade_results, validate_results

__all__ = ["load_results", "render_report", "upgrade_results", "validate_results"]
