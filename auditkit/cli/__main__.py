"""``python -m auditkit.cli``: the ``auditkit`` command."""
from auditkit.cli.app import main

main()
