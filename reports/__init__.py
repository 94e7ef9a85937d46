"""Render audit results (the ``auditkit/results`` JSON document) as markdown and HTML.

This package reads only the results schema; it imports nothing else of the toolkit.
"""
