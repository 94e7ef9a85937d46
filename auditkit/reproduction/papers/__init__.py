"""Bundled paper files (`auditkit reproduce PAPER`)."""
