"""auditkit: attack and audit privacy + compression mechanisms in federated learning.

One import namespace: the harness (config, data, models, FL simulation, the audit pipeline, the CLI) and
``auditkit.mechanisms``, ``auditkit.attacks`` and ``auditkit.reports``, which live in the repository's
``mechanisms/``, ``attacks/`` and ``reports/`` folders.
"""
import os

from auditkit.version import __version__

# Tensors over 32 MB (glibc's largest mmap threshold) each come from a fresh mmap whose pages are faulted and zeroed
# one 4 KiB page at a time on first touch: measured, 40 % of a ResNet-50 audit's CPU time in the kernel. torch backs
# allocations of 2 MB or more with transparent huge pages when this is set (c10's alloc_cpu reads it at the process's
# first tensor allocation, hence here, before any; a no-op where the kernel's THP is "never"). A user's own value,
# 0 included, is kept. benchmarks/bench_huge_pages.py measures it.
HUGE_PAGES = "THP_MEM_ALLOC_ENABLE"
os.environ.setdefault(HUGE_PAGES, "1")


def run_audit(config, **kwargs):
    """Run an audit (what ``auditkit audit`` does): train every mechanism setting, account, attack, test, and
    write results.json, report.html and report.md; see :func:`auditkit.audit.run_audit`."""
    from auditkit.audit import run_audit as _run_audit  # here: `import auditkit` stays light (no torch)

    return _run_audit(config, **kwargs)


__all__ = ["HUGE_PAGES", "__version__", "run_audit"]
