"""Writing one output file atomically: a reader never sees half a file, a failed write leaves the old one, and the
file has the mode the umask gives (``auditkit.output_folder`` writes several files together)."""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from auditkit.output_folder import temporary_beside, write_into

__all__ = ["replace_atomically"]


def replace_atomically(path: Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` on a new empty file beside ``path``, then rename it over ``path``; the temporary file
    is removed if ``write`` or the rename fails. ``write`` must write into the existing file (``open(tmp, "w")``,
    ``torch.save``, ``savefig`` do), so that it keeps the mode it was created with: 0666 less the umask."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_beside(path)
    try:
        write_into(tmp, write)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
