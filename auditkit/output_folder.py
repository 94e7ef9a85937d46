"""An output folder as a unit: one run at a time, nothing of an earlier run deleted unless asked, files replaced
together or not at all.

* **Lock.** ``.auditkit.lock`` is held with ``fcntl.flock`` while a run writes and removed when it ends; it names
  its holder, and a second run refuses in one line. The kernel drops the lock of a process that dies, so the file
  a killed run leaves locks nothing.
* **Modes** (:class:`Mode`). ``new`` refuses a folder that holds an earlier run's results; ``resume`` continues in
  place; ``overwrite`` builds the new run in ``.next/`` beside the old one and swaps it in only when it has
  finished (:meth:`OutputFolder.swap_in`), so an interrupted ``overwrite`` leaves the old results whole.
* **Batches.** Files that must agree (results.json, the reports, their figures) are written to temporary names and
  renamed together (:class:`Batch`). Before the first rename the list of renames is written to ``.commit.json``;
  opening the folder again rolls an interrupted commit forward, so results.json and the report never disagree
  once auditkit has opened the folder. Temporary files of killed runs are removed on open.

Writes that fail for want of space or permission raise ``OSError`` naming the file (:class:`WriteFailure` where the
writer raised something else, as ``torch.save`` does).
"""
from __future__ import annotations

import enum
import errno
import json
import os
import re
import secrets
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["Batch", "LOCK", "Mode", "OutputFolder", "OutputFolderError", "WriteFailure", "finish_commit",
           "holds_results", "remove_temporaries", "replace_atomically", "target_of", "temporary_beside"]

LOCK = ".auditkit.lock"
JOURNAL = ".commit.json"
NEXT = ".next"  # an overwrite run's folder until it has finished
TRASH = ".replaced"  # what a swap replaced, until the swap is complete
RESULT_FILES = ("results.json", "reproduction.json", "report.html", "report.md")
# the temporary names of temporary_beside: ".<stem>.<12 hex>.tmp<suffix>"
_TEMPORARY = re.compile(r"^\..*\.[0-9a-f]{12}\.tmp(\.[A-Za-z0-9]+)?$")


class OutputFolderError(Exception):
    """An output folder that cannot be used as asked (in use, holding another run's results, not a folder)."""


class WriteFailure(OSError):
    """A writer failed with something other than ``OSError`` (``torch.save``'s RuntimeError on a full disk)."""


class Mode(enum.StrEnum):
    NEW = "new"
    RESUME = "resume"
    OVERWRITE = "overwrite"


def temporary_beside(target: Path) -> Path:
    """A new empty file beside ``target`` with its suffix (matplotlib picks the format from it), created with mode
    0666 less the umask (not ``tempfile.mkstemp``: its files are 0600 whatever the umask)."""
    temporary = target.with_name(f".{target.stem}.{secrets.token_hex(6)}.tmp{target.suffix}")
    os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    return temporary


def target_of(path: str | os.PathLike[str]) -> str:
    """The file a temporary name stands for (``.report.1a2b3c4d5e6f.tmp.html`` -> ``report.html``), else ``path``."""
    path = Path(path)
    match = _TEMPORARY.match(path.name)
    if match is None:
        return str(path)
    stem = path.name[1:].rsplit(".tmp", 1)[0].rsplit(".", 1)[0]
    return str(path.with_name(stem + (match.group(1) or "")))


def write_into(temporary: Path, write: Callable[[Path], object]) -> None:
    """``write(temporary)``, a failure that is not an ``OSError`` reported as a :class:`WriteFailure` on the file."""
    try:
        write(temporary)
    except OSError as err:
        if err.filename is None:  # a write into an open file names none: the disk filled while writing this one
            raise OSError(err.errno, err.strerror, str(temporary)) from None
        raise
    except RuntimeError as err:  # torch.save: "PytorchStreamWriter failed writing file ..." on a full disk
        if "PytorchStreamWriter" not in str(err):
            raise  # not a write: a bug keeps its traceback
        raise WriteFailure(errno.EIO, f"write failed ({str(err).splitlines()[0]})", str(temporary)) from None


class Batch:
    """Files written under temporary names in ``folder`` (or below it), renamed over their targets together by
    :meth:`commit`, or all deleted by :meth:`discard`."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self._pending: dict[Path, Path] = {}

    def temporary(self, target: Path) -> Path:
        target.parent.mkdir(parents=True, exist_ok=True)
        self._pending[target] = temporary_beside(target)
        return self._pending[target]

    def write(self, target: Path, write: Callable[[Path], object]) -> Path:
        """``write(temporary)`` for ``target``; returns the temporary file (what readers see until the commit)."""
        temporary = self.temporary(target)
        write_into(temporary, write)
        return temporary

    def write_text(self, target: Path, text: str) -> None:
        self.write(target, lambda tmp: tmp.write_text(text, encoding="utf-8"))

    def commit(self) -> list[Path]:
        """Rename every file over its target: the renames are journaled first, so an interrupted commit is
        finished by the next :func:`finish_commit` of the folder."""
        _journal(self.folder, [(tmp, target) for target, tmp in self._pending.items()])
        finish_commit(self.folder)
        return list(self._pending)

    def discard(self) -> None:
        for temporary in self._pending.values():
            temporary.unlink(missing_ok=True)


def _journal(folder: Path, renames: list[tuple[Path, Path]]) -> None:
    entries = [[str(src.relative_to(folder)), str(dst.relative_to(folder))] for src, dst in renames]
    text = json.dumps({"renames": entries})
    temporary = temporary_beside(folder / JOURNAL)
    try:
        write_into(temporary, lambda tmp: tmp.write_text(text, encoding="utf-8"))
        os.replace(temporary, folder / JOURNAL)
    finally:
        temporary.unlink(missing_ok=True)


def _inside(folder: Path, relative: object) -> Path | None:
    """``folder / relative`` when ``relative`` is a plain relative path below ``folder`` (a journal is read from
    a folder someone may have prepared: it never renames anything outside it)."""
    if not isinstance(relative, str) or not relative or Path(relative).is_absolute() or ".." in Path(relative).parts:
        return None
    return folder / relative


def finish_commit(folder: Path) -> None:
    """Roll an interrupted commit of ``folder`` forward: every journaled rename whose source is still there is
    done (a folder's target is first moved aside into ``.replaced/``), then the journal and ``.replaced/`` go."""
    folder = Path(folder)
    journal = folder / JOURNAL
    if not journal.is_file():
        return
    try:
        entries = json.loads(journal.read_text(encoding="utf-8"))["renames"]
    except (OSError, ValueError, KeyError, TypeError):
        entries = []  # not ours or damaged: nothing to roll forward
    trash = folder / TRASH
    for entry in entries if isinstance(entries, list) else []:
        pair = entry if isinstance(entry, list) and len(entry) == 2 else [None, None]
        src, dst = _inside(folder, pair[0]), _inside(folder, pair[1])
        if src is None or dst is None or not src.exists():
            continue
        if src.is_dir() and dst.exists():
            trash.mkdir(exist_ok=True)
            os.replace(dst, trash / f"{dst.name}.{secrets.token_hex(4)}")
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dst)
    journal.unlink(missing_ok=True)
    shutil.rmtree(trash, ignore_errors=True)


def remove_temporaries(folder: Path) -> int:
    """Delete the temporary files killed runs left in ``folder``, its ``figures/`` and its stage folders; returns
    how many. Only names of the temporary pattern are touched."""
    folder = Path(folder)
    places = [folder, folder / "figures", folder / "stages", *(folder / "stages").glob("*/")]
    removed = 0
    for place in places:
        if not place.is_dir():
            continue
        for path in place.iterdir():
            if _TEMPORARY.match(path.name) and path.is_file():
                path.unlink(missing_ok=True)
                removed += 1
    return removed


def holds_results(folder: Path) -> list[str]:
    """What of an earlier run ``folder`` holds: its result files and, as one entry, its finished stages."""
    found = [name for name in RESULT_FILES if (folder / name).is_file()]
    stages = sum(1 for _ in (folder / "stages").glob("*/*.json"))
    return found + ([f"{stages} finished stage{'s' * (stages != 1)}"] if stages else [])


def _usable(path: Path, flag: str) -> Path:
    """``path`` unless it, or a folder above it, is a file."""
    for place in (path, *path.parents):
        if place.exists() and not place.is_dir():
            where = "" if place == path else f": {str(place)!r}"
            raise OutputFolderError(f"{flag} {str(path)!r}{where} is a file, not a folder")
    return path


def _refuse_earlier(path: Path, flag: str, resumable: bool) -> None:
    earlier = holds_results(path) if path.is_dir() else []
    if earlier:
        resume = "--resume to continue it, " if resumable else ""
        raise OutputFolderError(
            f"{flag} {str(path)!r} holds an earlier run ({', '.join(earlier)}); pass {resume}--overwrite to replace it "
            f"once this run has finished, or choose another {flag}")


def _holder(lock: Path) -> str:
    try:
        info = json.loads(lock.read_text(encoding="utf-8"))
        return f"pid {int(info['pid'])} on {str(info['host'])[:64]}, `{str(info['command'])[:80]}`, since {str(info['since'])[:32]}"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


class OutputFolder:
    """The folder a run writes to, held (locked) while open. ``work`` is where the run writes: the folder itself,
    or ``.next/`` in it for an ``overwrite`` run until :meth:`swap_in`."""

    def __init__(self, path: str | Path, mode: Mode, *, resumable: bool = False) -> None:
        self.path, self.mode, self.resumable = Path(path), Mode(mode), resumable
        self.work = self.path / NEXT if self.mode is Mode.OVERWRITE else self.path

    @classmethod
    def check(cls, path: str | Path, mode: Mode, *, flag: str = "--out", resumable: bool = False) -> Path:
        """Refuse, before any work, a path that is not a folder, a folder in use, or (mode ``new``) a folder holding
        an earlier run's results (``resumable``: the command has ``--resume``, and the refusal says so)."""
        path = _usable(Path(path), flag)
        if (path / LOCK).is_file():
            try:
                with cls._locked(path / LOCK, flag=flag):
                    pass
            except PermissionError:
                pass  # a folder we cannot write: open() says so
        if mode is Mode.NEW:
            _refuse_earlier(path, flag, resumable)
        return path

    @staticmethod
    @contextmanager
    def _locked(lock: Path, *, flag: str = "--out") -> Iterator[int]:
        import fcntl  # POSIX; auditkit's platforms

        while True:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise OutputFolderError(f"{flag} {str(lock.parent)!r} is in use by {_holder(lock)}; wait for it to "
                                        f"finish or choose another {flag}") from None
            try:  # the file may have been removed by the holder we waited on: lock the one at the path
                same = os.stat(lock).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        try:
            yield fd
        finally:
            lock.unlink(missing_ok=True)  # before the release: whoever locks next creates a fresh file
            os.close(fd)

    @contextmanager
    def open(self, command: str = "auditkit") -> Iterator[OutputFolder]:
        """Hold the folder: lock it, finish an interrupted commit, remove killed runs' temporary files; in mode
        ``new`` re-check under the lock that it holds no earlier run."""
        _usable(self.path, "--out")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            held = self._locked(self.path / LOCK)
            fd = held.__enter__()
        except OSError as err:
            raise OutputFolderError(f"--out {str(self.path)!r}: cannot write there ({err.strerror})") from None
        try:
            holder = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "command": command,
                                 "since": time.strftime("%Y-%m-%d %H:%M:%S")})
            os.ftruncate(fd, 0)
            os.pwrite(fd, holder.encode("utf-8"), 0)
            finish_commit(self.path)
            if self.mode is Mode.NEW:
                _refuse_earlier(self.path, "--out", self.resumable)
            if self.mode is Mode.NEW:
                shutil.rmtree(self.path / NEXT, ignore_errors=True)  # an overwrite run given up
            if self.work.is_dir():
                finish_commit(self.work)
            remove_temporaries(self.path)
            remove_temporaries(self.work)
            self.work.mkdir(exist_ok=True)
            yield self
        finally:
            held.__exit__(None, None, None)

    def swap_in(self) -> None:
        """An ``overwrite`` run, finished: its files replace the earlier run's, journaled as one commit (what the new
        run does not have, such as the stages of settings it dropped, goes with the old)."""
        if self.mode is not Mode.OVERWRITE:
            return
        renames = [(entry, self.path / entry.name) for entry in sorted(self.work.iterdir())]
        renames += [(self.path / name, self.path / TRASH / name) for name in (*RESULT_FILES, "figures", "stages")
                    if (self.path / name).exists() and not (self.work / name).exists()]
        moved = [(src, dst) for src, dst in renames if src.name != JOURNAL]
        # files are renamed over their targets; folders are moved aside first (finish_commit)
        _journal(self.path, moved)
        finish_commit(self.path)
        shutil.rmtree(self.work, ignore_errors=True)


def replace_atomically(path: Path, write: Callable[[Path], None]) -> Path:
    """Write one file so that a reader never sees half of it: ``write(tmp)`` on a new empty file beside ``path``,
    then a rename over ``path``; the temporary file is removed if ``write`` or the rename fails. ``write`` must
    write into the existing file (``open(tmp, "w")``, ``torch.save``, ``savefig`` do), so that it keeps the mode
    it was created with: 0666 less the umask (``Batch`` writes several files together)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_beside(path)
    try:
        write_into(tmp, write)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
