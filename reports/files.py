"""Writing output files: atomically (a reader never sees half a file, a failed write leaves the old one) and with
the mode the umask gives."""
from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path

__all__ = ["replace_atomically"]


def replace_atomically(path: Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` on a new empty file beside ``path``, then rename it over ``path``; the temporary file
    is removed if ``write`` or the rename fails. ``write`` must write into the existing file (``open(tmp, "w")``,
    ``torch.save``, ``savefig`` do), so that it keeps the mode it was created with: 0666 less the umask."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # the temporary name keeps the suffix: writers such as matplotlib pick the format from it
    tmp = path.with_name(f".{path.stem}.{secrets.token_hex(6)}.tmp{path.suffix}")
    # not tempfile.mkstemp: its files are 0600 whatever the umask, and os.replace keeps that mode
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
