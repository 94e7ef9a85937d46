"""auditkit: attack and audit privacy + compression mechanisms in federated learning.

One import namespace: the harness (config, data, models, FL simulation, the audit pipeline, the CLI) and
``auditkit.mechanisms``, ``auditkit.attacks`` and ``auditkit.reports``, which live in the repository's
``mechanisms/``, ``attacks/`` and ``reports/`` folders.
"""
from auditkit.version import __version__


def run_audit(config, **kwargs):
    """Run an audit (what ``auditkit audit`` does): train every mechanism setting, account, attack, test, and
    write results.json, report.html and report.md; see :func:`auditkit.audit.run_audit`."""
    from auditkit.audit import run_audit as _run_audit  # here: `import auditkit` stays light (no torch)

    return _run_audit(config, **kwargs)


__all__ = ["__version__", "run_audit"]
