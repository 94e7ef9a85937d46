"""An output folder as a unit: one run at a time, nothing of an earlier run deleted unless asked, nothing auditkit
did not write ever replaced, files replaced together or not at all, nothing outside the folder ever touched.

* **Inside the folder only.** The folder is opened once and every file in it is reached relative to its
  descriptor without following a link (``auditkit.folder.Folder``): a link where auditkit expects its own file or
  folder is one error line naming it, found before anything is written (:func:`check_structure`).
* **Lock.** ``.auditkit.lock`` is created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` and held with ``fcntl.flock`` while
  a run writes, removed when it ends; it names its holder, and a second run refuses in one line. The kernel drops the
  lock of a process that dies, so the file a killed run leaves locks nothing.
* **Manifest.** ``.auditkit-manifest.json`` lists every file auditkit wrote in the folder (:class:`Workspace`);
  auditkit replaces or removes only those, so a user's own file beside them (``figures/mine.png``, ``notes.md``) is
  kept, and a file of theirs at a name auditkit writes is refused in one line, never replaced. A folder written
  before the manifest existed adopts the names auditkit wrote then (``LEGACY_NAMES``).
* **Modes** (:class:`Mode`). ``new`` refuses a folder that holds an earlier run's results; ``resume`` continues in
  place; ``overwrite`` builds the new run in ``.next/`` beside the old one and swaps it in only when it has
  finished (:meth:`OutputFolder.swap_in`), so an interrupted ``overwrite`` leaves the old results whole.
* **Batches.** Files that must agree (results.json, the reports, their figures) are written to temporary names and
  renamed together (:class:`Batch`). Before the first rename the list of renames is written to ``.commit.json``;
  opening the folder again rolls an interrupted commit forward, so results.json and the report never disagree
  once auditkit has opened the folder. A journal is replayed only when every rename it names is one auditkit
  journals (:class:`Journal`); any other is refused, never replayed. Temporary files of killed runs are removed on
  open.

Writes that fail for want of space or permission raise ``OSError`` naming the file (:class:`WriteFailure` where the
writer raised something else, as ``torch.save`` does).
"""
from __future__ import annotations

import enum
import errno
import json
import os
import re
import socket
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from auditkit.folder import (TEMPORARY, Folder, FolderError, Kind, LinkRefused, WriteFailure, plain_parts,
                             target_of)

__all__ = ["Batch", "FolderError", "JOURNAL", "LEGACY_NAMES", "LOCK", "LinkRefused", "MANIFEST", "Mode", "NEXT", "NotWritable",
           "OutputFolder", "OutputFolderError", "Swap", "WriteFailure", "Workspace", "check_structure",
           "finish_commit", "holds_results", "remove_temporaries", "replace_atomically", "target_of"]

LOCK = ".auditkit.lock"
JOURNAL = ".commit.json"
MANIFEST = ".auditkit-manifest.json"
NEXT = ".next"  # an overwrite run's folder until it has finished
TRASH = ".replaced"  # what a swap replaced, until the swap is complete
RESULT_FILES = ("results.json", "reproduction.json", "report.html", "report.md")
FOLDERS = ("figures", "stages")  # the folders auditkit writes in
BOOKKEEPING = (LOCK, JOURNAL, MANIFEST, NEXT, TRASH)
LEGACY_NAMES = re.compile(
    r"(results|reproduction)\.json|report\.(html|md)|stages/s\d+/[a-z_]+\.(json|pt)"
    r"|figures/(accuracy_vs_round|privacy_utility|ssim_vs_epsilon|ssim_vs_error_std|lower_bound_vs_epsilon"
    r"|bits_vs_accuracy|identification_vs_epsilon|probe_ssim_vs_epsilon|reconstruction_vs_epsilon|tradeoff_vs_claim"
    r"|membership_roc|inversion|reproduction-\d+|(reconstruction|probe)-s\d+|[a-z]+-clean-[0-9a-f]{12})\.png")
"""The files auditkit 0.2 and earlier wrote, before it kept a manifest: a folder without one adopts these as its own."""
MAX_BOOKKEEPING_BYTES = 16 * 2**20  # a journal or manifest larger than this is not one auditkit wrote


class OutputFolderError(FolderError):
    """An output folder that cannot be used as asked (in use, holding another run's results, not a folder)."""


class NotWritable(OutputFolderError):
    """An output folder this process may not write in (its permissions, a read-only file system)."""


class Mode(enum.StrEnum):
    NEW = "new"
    RESUME = "resume"
    OVERWRITE = "overwrite"


# ---------------------------------------------------------------------------------------------- bookkeeping files


def _read_json(folder: Folder, name: str) -> object:
    """The JSON value of the bookkeeping file ``name`` (ValueError when it is not JSON)."""
    data = folder.read_bytes(name, max_bytes=MAX_BOOKKEEPING_BYTES)
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, RecursionError) as err:
        raise ValueError(type(err).__name__) from None


def _write_json(folder: Folder, name: str, value: object) -> None:
    text = json.dumps(value, indent=1).encode("utf-8")
    folder.write(name, lambda file: file.write(text))


def _journaled(source: str, target: str) -> bool:
    """Whether ``source -> target`` is a rename auditkit journals: a temporary file over the target it stands for
    (a batch), ``.next/X`` over ``X`` (an overwrite run swapped in) or ``X`` into ``.replaced/X`` (what it
    replaced); the lock and the journal are never renamed."""
    src, dst = plain_parts(source), plain_parts(target)
    if src is None or dst is None or src[0] in (LOCK, JOURNAL) or dst[0] in (LOCK, JOURNAL):
        return False
    if src[:-1] == dst[:-1] and TEMPORARY.match(src[-1]):
        return target_of(src[-1]) == dst[-1]
    return (src == (NEXT, *dst) and dst[0] not in (LOCK, JOURNAL, NEXT, TRASH)
            or dst == (TRASH, *src) and src[0] not in BOOKKEEPING)


@dataclass(frozen=True)
class Journal:
    """The renames of one commit, ``[source, target]`` relative to the folder, each one auditkit journals."""

    renames: tuple[tuple[str, str], ...]

    @classmethod
    def read(cls, folder: Folder) -> Journal:
        """The folder's journal; ``OutputFolderError`` for a file auditkit did not write (never replayed)."""
        where = str(folder.path / JOURNAL)
        try:
            value = _read_json(folder, JOURNAL)
        except (ValueError, FolderError) as err:
            raise OutputFolderError(f"{where!r} is not a commit journal auditkit wrote ({err}); it was not "
                                    "replayed: remove it, or use another folder") from None
        entries = value.get("renames") if isinstance(value, dict) else None
        if not isinstance(entries, list) or not all(
                isinstance(e, list) and len(e) == 2 and all(isinstance(p, str) for p in e) for e in entries):
            raise OutputFolderError(f"{where!r} is not a commit journal auditkit wrote (no list of renames); it was "
                                    "not replayed: remove it, or use another folder")
        for source, target in entries:
            if not _journaled(source, target):
                raise OutputFolderError(f"{where!r} names a rename auditkit never journals ({source!r} -> "
                                        f"{target!r}); it was not replayed: remove it, or use another folder")
        return cls(tuple((source, target) for source, target in entries))

    def write(self, folder: Folder) -> None:
        _write_json(folder, JOURNAL, {"renames": [list(pair) for pair in self.renames]})


def _read_manifest(folder: Folder) -> set[str] | None:
    """The files the folder's manifest lists (plain relative names only), or None when it has none."""
    if folder.expect(MANIFEST, Kind.FILE) is Kind.MISSING:
        return None
    try:
        value = _read_json(folder, MANIFEST)
    except (ValueError, FolderError) as err:
        raise OutputFolderError(f"{str(folder.path / MANIFEST)!r} is not a manifest auditkit wrote ({err}): remove "
                                "it, or use another folder") from None
    files = value.get("files") if isinstance(value, dict) else None
    if not isinstance(files, list) or not all(isinstance(f, str) and plain_parts(f) is not None for f in files):
        raise OutputFolderError(f"{str(folder.path / MANIFEST)!r} is not a manifest auditkit wrote (not a list of "
                                "plain relative file names): remove it, or use another folder")
    return {f for f in files if plain_parts(f)[0] not in BOOKKEEPING}


def _legacy_files(folder: Folder) -> set[str]:
    """The files of ``LEGACY_NAMES`` in a folder without a manifest, where it is one auditkit wrote (``_legacy``);
    none in any other folder (a user's own report.md is not auditkit's)."""
    found = [name for name, kind in folder.entries() if kind is Kind.FILE]
    for place in FOLDERS:
        if folder.kind(place) is Kind.FOLDER:
            found += folder.files(place)
    names = {name for name in found if LEGACY_NAMES.fullmatch(name)}
    return names if any(_written_by_auditkit(folder, name) for name in sorted(names)) else set()


def _written_by_auditkit(folder: Folder, name: str) -> bool:
    """Whether ``name`` is a results document auditkit wrote (a JSON object whose ``schema`` is one of auditkit's) or
    one of its stage files (an object with its ``stage`` and ``key``): the mark of an auditkit folder of before
    manifests."""
    if not name.endswith(".json"):
        return False
    try:
        value = json.loads(folder.read_bytes(name, max_bytes=64 * 2**20))
    except (OSError, ValueError, RecursionError, FolderError):
        return False
    if not isinstance(value, dict):
        return False
    if name.startswith("stages/"):
        return isinstance(value.get("stage"), str) and isinstance(value.get("key"), str)
    return isinstance(value.get("schema"), str) and value["schema"].startswith("auditkit")


# ---------------------------------------------------------------------------------------------- the folder's state


def check_structure(folder: Folder) -> None:
    """Refuse, before anything is touched, a link (or a file of the wrong kind) at a name auditkit reads or writes:
    its bookkeeping files, results and reports, ``figures/`` and ``stages/``, what is in ``stages/`` and ``.next/``,
    auditkit's figures in ``figures/`` and every file the manifest lists. A user's own link elsewhere is left alone:
    auditkit never opens it."""
    for name in (LOCK, JOURNAL, MANIFEST, *RESULT_FILES):
        folder.expect(name, Kind.FILE)
    for name in (NEXT, TRASH, *FOLDERS):
        folder.expect(name, Kind.FOLDER)
    for place in (NEXT, "stages", f"{NEXT}/stages"):  # auditkit's own folders: no link in them
        if folder.kind(place) is Kind.FOLDER:
            for name, kind in folder.entries(place):
                if kind is Kind.LINK:
                    folder.expect(f"{place}/{name}", Kind.FILE, Kind.FOLDER)
    for place in ("figures", f"{NEXT}/figures"):
        if folder.kind(place) is Kind.FOLDER:
            for name, kind in folder.entries(place):
                if kind is Kind.LINK and LEGACY_NAMES.fullmatch(f"figures/{name}"):
                    folder.expect(f"{place}/{name}", Kind.FILE)
    for name in sorted(_read_manifest(folder) or ()):
        folder.expect(name, Kind.FILE)


def finish_commit(folder: Folder) -> None:
    """Roll an interrupted commit of ``folder`` forward: every journaled rename whose source is still there is done,
    then the journal and ``.replaced/`` go. A journal naming anything but the renames auditkit journals is refused
    (``OutputFolderError``) before any rename."""
    if folder.expect(JOURNAL, Kind.FILE) is Kind.MISSING:
        return
    journal = Journal.read(folder)
    for source, target in journal.renames:  # links anywhere on the way: refused before the first rename
        folder.expect(source, Kind.FILE)
        folder.expect(target, Kind.FILE)
    for source, target in journal.renames:
        if folder.kind(source) is Kind.FILE:
            folder.replace(source, target)
    folder.unlink(JOURNAL)
    folder.rmtree(TRASH)


def remove_temporaries(folder: Folder) -> int:
    """Delete the temporary files killed runs left in ``folder``, its ``figures/`` and its stage folders; returns
    how many. Only names of the temporary pattern are touched (a link of that name: the link itself)."""
    places = ["", *FOLDERS]
    if folder.kind("stages") is Kind.FOLDER:
        places += [f"stages/{name}" for name, kind in folder.entries("stages") if kind is Kind.FOLDER]
    removed = 0
    for place in places:
        if place and folder.kind(place) is not Kind.FOLDER:
            continue
        for name, kind in folder.entries(place):
            if TEMPORARY.match(name) and kind in (Kind.FILE, Kind.LINK):
                removed += folder.unlink(f"{place}/{name}" if place else name)
    return removed


class Workspace:
    """A folder auditkit writes in, with the manifest of the files it wrote there: :meth:`write` and :meth:`batch`
    add to it, and refuse to replace a file it does not list (a user's own). ``path`` names it."""

    def __init__(self, folder: Folder) -> None:
        self.folder, self.path = folder, folder.path
        listed = _read_manifest(folder)
        self.adopted = listed is None  # no manifest: the legacy names are taken as auditkit's
        self.files = _legacy_files(folder) if listed is None else listed

    @classmethod
    @contextmanager
    def opened(cls, path: str | os.PathLike[str]) -> Iterator[Workspace]:
        """The folder at ``path`` (created), for the block."""
        with Folder.open(path, create=True) as folder:
            check_structure(folder)
            yield cls(folder)

    @classmethod
    @contextmanager
    def of(cls, out: str | os.PathLike[str] | Workspace) -> Iterator[Workspace]:
        """``out`` itself when it is a workspace (a held output folder's), else the folder at ``out`` opened for the
        block."""
        if isinstance(out, Workspace):
            yield out
        else:
            with cls.opened(out) as workspace:
                yield workspace

    def owns(self, relative: str) -> bool:
        """Whether ``relative`` is a file auditkit wrote here (or a name it may write: nothing is there)."""
        return relative in self.files or self.folder.kind(relative) is Kind.MISSING

    def refuse_foreign(self, targets: Iterable[str]) -> None:
        """``OutputFolderError`` naming the ``targets`` that are files auditkit did not write here."""
        foreign = [t for t in targets if not self.owns(t)]
        if foreign:
            shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
            raise OutputFolderError(
                f"{str(self.path)!r} holds {shown}, which auditkit did not write; it replaces only its own files: "
                f"move {'them' if len(foreign) > 1 else 'it'}, or choose another folder")

    def _list(self, names: Iterable[str]) -> None:
        new = set(names) - self.files
        if new or self.adopted:
            self.files |= new
            _write_json(self.folder, MANIFEST, {"files": sorted(self.files)})
            self.adopted = False

    def write(self, relative: str, write: Callable[[BinaryIO], object]) -> Path:
        """Replace ``relative`` atomically (``Folder.write``), listed in the manifest first."""
        self.refuse_foreign([relative])
        self._list([relative])
        return self.folder.write(relative, write)

    def write_bytes(self, relative: str, data: bytes) -> Path:
        return self.write(relative, lambda file: file.write(data))

    def batch(self) -> Batch:
        return Batch(self)

    def read_bytes(self, relative: str, *, max_bytes: int | None = None) -> bytes:
        return self.folder.read_bytes(relative, max_bytes=max_bytes)

    def is_file(self, relative: str) -> bool:
        return self.folder.kind(relative) is Kind.FILE


class Batch:
    """Files written under temporary names in a workspace, renamed over their targets together by :meth:`commit`,
    or all deleted by :meth:`discard`."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self._pending: dict[str, str] = {}  # target -> temporary, relative to the workspace

    def write(self, target: str, write: Callable[[BinaryIO], object]) -> None:
        """``write`` into a new temporary file for ``target``."""
        folder = self.workspace.folder
        folder.expect(target, Kind.FILE)
        temporary = folder.temporary(target)
        folder.create(temporary, write)
        self._pending[target] = temporary

    def write_bytes(self, target: str, data: bytes) -> None:
        self.write(target, lambda file: file.write(data))

    def write_text(self, target: str, text: str) -> None:
        self.write_bytes(target, text.encode("utf-8"))

    def commit(self) -> list[Path]:
        """Rename every file over its target, listed in the manifest first: the renames are journaled, so an
        interrupted commit is finished by the next :func:`finish_commit` of the folder. A target that is a file
        auditkit did not write is refused (``OutputFolderError``) and nothing is renamed."""
        workspace = self.workspace
        try:
            workspace.refuse_foreign(self._pending)
        except OutputFolderError:
            self.discard()
            raise
        workspace._list(self._pending)
        Journal(tuple((tmp, target) for target, tmp in self._pending.items())).write(workspace.folder)
        finish_commit(workspace.folder)
        return [workspace.path / target for target in self._pending]

    def discard(self) -> None:
        for temporary in self._pending.values():
            self.workspace.folder.unlink(temporary)


def holds_results(workspace: Workspace) -> list[str]:
    """What of an earlier run the folder holds, among the files auditkit wrote there: its result files and, as one
    entry, its finished stages."""
    present = {name for name in workspace.files if workspace.is_file(name)}
    found = [name for name in RESULT_FILES if name in present]
    stages = sum(1 for name in present if re.fullmatch(r"stages/[^/]+/[^/]+\.json", name))
    return found + ([f"{stages} finished stage{'s' * (stages != 1)}"] if stages else [])


def _usable(path: Path, flag: str) -> Path:
    """``path`` unless it, or a folder above it, is a file."""
    for place in (path, *path.parents):
        if place.exists() and not place.is_dir():
            where = "" if place == path else f": {str(place)!r}"
            raise OutputFolderError(f"{flag} {str(path)!r}{where} is a file, not a folder")
    return path


def _refuse_earlier(workspace: Workspace, flag: str, resumable: bool) -> None:
    earlier = holds_results(workspace)
    if earlier:
        resume = "--resume to continue it, " if resumable else ""
        raise OutputFolderError(
            f"{flag} {str(workspace.path)!r} holds an earlier run ({', '.join(earlier)}); pass {resume}--overwrite to "
            f"replace it once this run has finished (files auditkit did not write are kept), or choose another {flag}")


def _holder(folder: Folder) -> str:
    try:
        info = _read_json(folder, LOCK)
        return (f"pid {int(info['pid'])} on {str(info['host'])[:64]}, `{str(info['command'])[:80]}`, since "
                f"{str(info['since'])[:32]}")
    except (OSError, ValueError, KeyError, TypeError, FolderError):
        return "another process"


def _open_lock(folder: Folder) -> int:
    """The lock file's descriptor: created with ``O_CREAT | O_EXCL | O_NOFOLLOW``, or the one a killed run left
    (a plain file, opened without following a link or waiting on a FIFO)."""
    try:
        return os.open(LOCK, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=folder.fd)
    except FileExistsError:
        pass
    try:
        fd = os.open(LOCK, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder.fd)
    except OSError as err:
        if err.errno == errno.ELOOP:
            folder.expect(LOCK, Kind.FILE)  # raises LinkRefused naming it
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        folder.expect(LOCK, Kind.FILE)
    return fd


@contextmanager
def _locked(folder: Folder, flag: str) -> Iterator[int]:
    import fcntl  # POSIX; auditkit's platforms

    while True:
        try:
            fd = _open_lock(folder)
        except FileNotFoundError:
            continue  # the holder we met removed it meanwhile: create a fresh one
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OutputFolderError(f"{flag} {str(folder.path)!r} is in use by {_holder(folder)}; wait for it to "
                                    f"finish or choose another {flag}") from None
        try:  # the file may have been removed by the holder we waited on: lock the one at the path
            same = os.stat(LOCK, dir_fd=folder.fd, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        yield fd
    finally:
        folder.unlink(LOCK)  # before the release: whoever locks next creates a fresh file
        os.close(fd)


@dataclass(frozen=True)
class Swap:
    """What an ``overwrite`` run's swap did to the earlier run's folder: the files it replaced, those of the earlier
    run it removed (the new run has none of that name), and the files auditkit did not write, kept."""

    replaced: tuple[str, ...]
    removed: tuple[str, ...]
    kept: tuple[str, ...]


class OutputFolder:
    """The folder a run writes to, held (locked) while open. ``work`` (a :class:`Workspace`, while open) is where
    the run writes: the folder itself, or ``.next/`` in it for an ``overwrite`` run until :meth:`swap_in`."""

    def __init__(self, path: str | Path, mode: Mode, *, resumable: bool = False, flag: str = "--out",
                 writes: tuple[str, ...] = RESULT_FILES) -> None:
        self.path, self.mode, self.resumable, self.flag = Path(path), Mode(mode), resumable, flag
        self.writes = writes  # the result files the run writes: one of the user's there is refused when it opens
        self.root: Workspace | None = None
        self.work: Workspace | None = None

    @classmethod
    def check(cls, path: str | Path, mode: Mode, *, flag: str = "--out", resumable: bool = False) -> Path:
        """Refuse, before any work and without writing: a path that is not a folder, a link inside it where auditkit
        writes, a folder in use, a file auditkit did not write at one of its result names, or (mode ``new``) a folder
        holding an earlier run's results (``resumable``: the command has ``--resume``, and the refusal says so)."""
        path = _usable(Path(path), flag)
        if not path.is_dir():
            return path
        try:
            folder = Folder.open(path)
        except PermissionError:
            return path  # a folder we cannot read: open() says so
        with folder:
            check_structure(folder)
            if folder.kind(LOCK) is Kind.FILE:
                try:
                    with _locked(folder, flag):
                        pass
                except PermissionError:
                    pass  # a folder we cannot write: open() says so
            workspace = Workspace(folder)
            workspace.refuse_foreign(RESULT_FILES)
            if mode is Mode.NEW:
                _refuse_earlier(workspace, flag, resumable)
        return path

    @contextmanager
    def open(self, command: str = "auditkit") -> Iterator[OutputFolder]:
        """Hold the folder: check it holds no link where auditkit writes, lock it, finish an interrupted commit,
        remove killed runs' temporary files; in mode ``new`` re-check under the lock that it holds no earlier run."""
        _usable(self.path, self.flag)
        try:
            folder = Folder.open(self.path, create=True)
        except OSError as err:
            raise NotWritable(f"{self.flag} {str(self.path)!r}: cannot write there ({err.strerror})") from None
        with folder:
            check_structure(folder)  # before the lock: a link anywhere auditkit writes touches nothing
            try:
                held = _locked(folder, self.flag)
                fd = held.__enter__()
            except PermissionError as err:
                raise NotWritable(f"{self.flag} {str(self.path)!r}: cannot write there ({err.strerror})") from None
            try:
                self._hold(folder, fd, command)
                yield self
            finally:
                if self.work is not None and self.work is not self.root:
                    self.work.folder.close()
                self.root = self.work = None
                held.__exit__(None, None, None)

    def _hold(self, folder: Folder, fd: int, command: str) -> None:
        holder = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "command": command,
                             "since": time.strftime("%Y-%m-%d %H:%M:%S")})
        os.ftruncate(fd, 0)
        os.pwrite(fd, holder.encode("utf-8"), 0)
        finish_commit(folder)
        self.root = Workspace(folder)
        self.root.refuse_foreign(self.writes)
        if self.mode is Mode.NEW:
            _refuse_earlier(self.root, self.flag, self.resumable)
            folder.rmtree(NEXT)  # an overwrite run given up
        remove_temporaries(folder)
        if self.mode is Mode.OVERWRITE:
            work = folder.open_sub(NEXT, create=True)
            finish_commit(work)
            remove_temporaries(work)
            self.work = Workspace(work)
        else:
            self.work = self.root

    def swap_in(self) -> Swap | None:
        """An ``overwrite`` run, finished: its files replace the earlier run's, journaled as one commit. What the
        new run does not have, among the earlier run's files, is removed; a file auditkit did not write is kept,
        and one at a name the new run writes is refused (``OutputFolderError``, the new run kept in ``.next/``)."""
        if self.mode is not Mode.OVERWRITE or self.root is None or self.work is None:
            return None
        root, new = self.root, sorted(name for name in self.work.files if self.work.is_file(name))
        foreign = [name for name in new if not root.owns(name)]
        if foreign:
            raise OutputFolderError(
                f"{self.flag} {str(self.path)!r} holds {', '.join(foreign[:5])}, which auditkit did not write; the new "
                f"run is whole in {str(self.path / NEXT)!r}: move {'them' if len(foreign) > 1 else 'it'} and run the "
                f"same command again to swap it in")
        old = sorted(name for name in root.files if root.is_file(name))
        removed = sorted(set(old) - set(new))
        # the manifest last: until the journal is done, the earlier run's names stay listed as auditkit's
        _write_json(self.work.folder, MANIFEST, {"files": new})
        renames = [(f"{NEXT}/{name}", name) for name in new]
        renames += [(name, f"{TRASH}/{name}") for name in removed]
        renames.append((f"{NEXT}/{MANIFEST}", MANIFEST))
        Journal(tuple(renames)).write(root.folder)
        finish_commit(root.folder)
        for folder in sorted({name.rpartition("/")[0] for name in removed} - {""}, reverse=True):
            root.folder.prune(folder)  # a folder the removed files leave empty (a dropped setting's stages)
        self.work.folder.close()
        root.folder.rmtree(NEXT)
        self.work = self.root = Workspace(root.folder)
        kept = sorted(set(root.folder.files()) - set(new) - {MANIFEST} - {LOCK})
        kept = [name for name in kept if plain_parts(name)[0] not in BOOKKEEPING]
        return Swap(tuple(name for name in new if name in old), tuple(removed), tuple(kept))


def replace_atomically(path: str | os.PathLike[str], write: Callable[[BinaryIO], object]) -> Path:
    """Write one file so that a reader never sees half of it: ``write(file)`` into a new file beside ``path``
    (mode 0666 less the umask), renamed over it (``auditkit.folder.Folder.write``: a link at ``path`` is refused,
    never written through); the temporary file is removed if ``write`` or the rename fails."""
    path = Path(path)
    with Folder.open(path.parent, create=True) as folder:
        return folder.write(path.name, write)
