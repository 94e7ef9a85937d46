"""Bundled TOML presets (`auditkit --preset NAME`)."""
