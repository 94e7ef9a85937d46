"""A folder opened once, every operation on what lies in it relative to its descriptor, no link inside it followed.

The folder itself is opened by the path the caller gives (the user named it: links on the way to it are theirs);
every name below it is reached one component at a time relative to its parent's descriptor (``dir_fd``) with
``O_NOFOLLOW``, so a symbolic link inside it is refused in one line naming it (:class:`LinkRefused`) before anything
is read, written, moved or deleted through it. Files are created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (mode 0666
less the umask) under a temporary name beside their target and renamed over it within one directory (``os.replace``
with ``src_dir_fd`` and ``dst_dir_fd``: a rename replaces a name, it never writes through a link); folders are
removed by ``shutil.rmtree(dir_fd=...)``, which does not follow links either. Files are read with ``O_NOFOLLOW |
O_NONBLOCK`` and must be plain files (a FIFO or a device is refused, never waited on). The models: Python's
``tarfile`` data filter (no link leaves the destination), ``shutil.rmtree``'s symlink-attack protection, and
``openat(2)``'s ``O_NOFOLLOW``.
"""
from __future__ import annotations

import enum
import errno
import io
import os
import re
import secrets
import shutil
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import BinaryIO

__all__ = ["Folder", "FolderError", "Kind", "LinkRefused", "TEMPORARY", "WriteFailure", "plain_parts",
           "target_of", "temporary_name"]

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
TEMPORARY = re.compile(r"^\..*\.[0-9a-f]{12}\.tmp(\.[A-Za-z0-9]+)?$")
"""The temporary names of :func:`temporary_name`: ``.<stem>.<12 hex>.tmp<suffix>``."""


class FolderError(Exception):
    """A folder, or something in it, that cannot be used as asked; the message is one line naming it."""


class LinkRefused(FolderError):
    """A symbolic link where auditkit expects its own file or folder."""


class WriteFailure(OSError):
    """A writer failed with something other than ``OSError`` (``torch.save``'s RuntimeError on a full disk)."""


class Kind(enum.Enum):
    """What a name in a folder is, the name itself (a link is a link, not what it points to)."""

    MISSING = "missing"
    FILE = "file"
    FOLDER = "folder"
    LINK = "link"
    OTHER = "special file"  # a FIFO, a socket, a device


def _kind(mode: int) -> Kind:
    if stat.S_ISLNK(mode):
        return Kind.LINK
    if stat.S_ISDIR(mode):
        return Kind.FOLDER
    return Kind.FILE if stat.S_ISREG(mode) else Kind.OTHER


def plain_parts(relative: str | os.PathLike[str]) -> tuple[str, ...] | None:
    """The components of ``relative`` when it is a plain relative path (no ``..``, ``.``, empty component, absolute
    path or NUL), else None."""
    text = os.fspath(relative)
    if not isinstance(text, str) or not text or "\0" in text or text.startswith("/"):
        return None
    parts = tuple(text.split("/"))
    if any(part in ("", ".", "..") for part in parts):
        return None
    return parts


def target_of(path: str | os.PathLike[str]) -> str:
    """The file a temporary name stands for (``.report.1a2b3c4d5e6f.tmp.html`` -> ``report.html``), else ``path``."""
    path = Path(path)
    match = TEMPORARY.match(path.name)
    if match is None:
        return str(path)
    stem = path.name[1:].rsplit(".tmp", 1)[0].rsplit(".", 1)[0]
    return str(path.with_name(stem + (match.group(1) or "")))


def temporary_name(name: str) -> str:
    """A fresh temporary name beside ``name``, keeping its suffix (matplotlib picks the format from it)."""
    path = PurePosixPath(name)
    return f".{path.stem}.{secrets.token_hex(6)}.tmp{path.suffix}"


class Folder:
    """A folder held open by its descriptor; ``path`` only names it in messages and in the paths returned. Every
    ``relative`` argument is a plain relative path below it (``plain_parts``), ``/``-separated."""

    def __init__(self, fd: int, path: Path) -> None:
        self.fd, self.path = fd, path

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, create: bool = False) -> Folder:
        """The folder at ``path`` (created with its parents when ``create``); ``FolderError`` when it is not a
        folder, ``OSError`` when it cannot be opened."""
        path = Path(path)
        if create:
            os.makedirs(path, exist_ok=True)
        try:
            return cls(os.open(path, _DIRECTORY), path)
        except NotADirectoryError:
            raise FolderError(f"{str(path)!r} is a file, not a folder") from None

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ names

    def _parts(self, relative: str) -> tuple[str, ...]:
        parts = plain_parts(relative)
        if parts is None:
            raise FolderError(f"{str(self.path)!r}: {relative!r} is not a plain relative path inside it")
        return parts

    def _refuse_link(self, relative: str) -> LinkRefused:
        return LinkRefused(f"{str(self.path / relative)!r} is a symbolic link; auditkit never follows a link inside a "
                           f"folder it reads or writes: remove the link, or use another folder")

    def _open_below(self, fd: int, name: str, where: str, create: bool) -> int:
        """The folder ``name`` in the folder ``fd``, opened without following a link (created when ``create``)."""
        for attempt in range(2):
            try:
                return os.open(name, _DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if not create or attempt:
                    raise
                try:
                    os.mkdir(name, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass  # made meanwhile: open it
            except OSError as err:
                if err.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                kind = _kind(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
                if kind is Kind.LINK:
                    raise self._refuse_link(where) from None
                raise FolderError(f"{str(self.path / where)!r} is a {kind.value}, not a folder") from None
        raise AssertionError("unreachable")

    @contextmanager
    def _parent(self, relative: str, *, create: bool = False) -> Iterator[tuple[int, str]]:
        """(the descriptor of ``relative``'s folder, its last component), held for the block."""
        parts = self._parts(relative)
        fd = os.dup(self.fd)
        try:
            for i, name in enumerate(parts[:-1]):
                below = self._open_below(fd, name, "/".join(parts[: i + 1]), create)
                os.close(fd)
                fd = below
            yield fd, parts[-1]
        finally:
            os.close(fd)

    def open_sub(self, relative: str, *, create: bool = False) -> Folder:
        """The folder ``relative`` (created with its parents when ``create``), open until the caller closes it."""
        with self._parent(relative, create=create) as (fd, name):
            return Folder(self._open_below(fd, name, relative, create), self.path / relative)

    @contextmanager
    def sub(self, relative: str, *, create: bool = False) -> Iterator[Folder]:
        """The folder ``relative`` (created with its parents when ``create``), held for the block."""
        with self.open_sub(relative, create=create) as below:
            yield below

    def kind(self, relative: str) -> Kind:
        """What ``relative`` is (``Kind.MISSING`` when it or a folder above it is absent); ``LinkRefused`` when a
        folder above it is a link."""
        try:
            with self._parent(relative) as (fd, name):
                return _kind(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return Kind.MISSING
        except FolderError as err:
            if isinstance(err, LinkRefused):
                raise
            return Kind.MISSING  # a file where a folder above it would be: nothing is at ``relative``

    def expect(self, relative: str, *kinds: Kind) -> Kind:
        """``relative``'s kind, refused in one line unless it is one of ``kinds`` or missing (a link:
        ``LinkRefused``)."""
        found = self.kind(relative)
        if found is Kind.LINK:
            raise self._refuse_link(relative)
        if found is not Kind.MISSING and found not in kinds:
            wanted = " or a ".join("plain file" if kind is Kind.FILE else kind.value for kind in kinds)
            raise FolderError(f"{str(self.path / relative)!r} is a {found.value}, where auditkit expects a {wanted}")
        return found

    def entries(self, relative: str = "") -> list[tuple[str, Kind]]:
        """The names in the folder ``relative`` ("": this folder) and what each is, sorted; [] when it is absent."""
        if relative and self.expect(relative, Kind.FOLDER) is Kind.MISSING:
            return []
        if not relative:
            return self._entries(self.fd)
        with self.sub(relative) as below:
            return self._entries(below.fd)

    @staticmethod
    def _entries(fd: int) -> list[tuple[str, Kind]]:
        with os.scandir(fd) as listing:
            return sorted((entry.name, _kind(entry.stat(follow_symlinks=False).st_mode)) for entry in listing)

    def files(self, relative: str = "") -> list[str]:
        """Every plain file below the folder ``relative``, as paths relative to this folder, sorted; links and
        what they point to are left out (never entered)."""
        found = []
        for name, kind in self.entries(relative):
            path = f"{relative}/{name}" if relative else name
            if kind is Kind.FILE:
                found.append(path)
            elif kind is Kind.FOLDER:
                found += self.files(path)
        return found

    # ------------------------------------------------------------------ reading

    def open_read(self, relative: str) -> BinaryIO:
        """The plain file ``relative`` opened for reading (the caller closes it); ``FileNotFoundError`` when absent,
        ``LinkRefused`` for a link, ``FolderError`` for anything but a plain file (a FIFO is never waited on)."""
        with self._parent(relative) as (fd, name):
            try:
                file = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
            except OSError as err:
                if err.errno == errno.ELOOP:
                    raise self._refuse_link(relative) from None
                raise
        mode = os.fstat(file).st_mode
        if not stat.S_ISREG(mode):
            os.close(file)
            raise FolderError(f"{str(self.path / relative)!r} is a {_kind(mode).value}, not a plain file")
        return io.BufferedReader(io.FileIO(file, "r"))

    def read_bytes(self, relative: str, *, max_bytes: int | None = None) -> bytes:
        """The bytes of the plain file ``relative`` (as :meth:`open_read`); ``FolderError`` for a file larger than
        ``max_bytes``."""
        with self.open_read(relative) as stream:
            data = stream.read() if max_bytes is None else stream.read(max_bytes + 1)
        if max_bytes is not None and len(data) > max_bytes:
            raise FolderError(f"{str(self.path / relative)!r} is larger than the {max_bytes:,}-byte limit")
        return data

    # ------------------------------------------------------------------ writing

    def create(self, relative: str, write: Callable[[BinaryIO], object]) -> None:
        """A new file ``relative`` (refused if the name is taken, a link included), ``write`` writing into it;
        ``OSError`` naming the file when writing fails (:class:`WriteFailure` for a writer's RuntimeError of a full
        disk), the half-written file removed."""
        with self._parent(relative, create=True) as (fd, name):
            file = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666,
                           dir_fd=fd)
            try:
                _write_named(file, write, self.path / relative)
            except BaseException:
                os.unlink(name, dir_fd=fd)
                raise

    def write(self, relative: str, write: Callable[[BinaryIO], object]) -> Path:
        """Replace ``relative`` atomically (readers see the old file or the whole new one): ``write`` into a new
        temporary file beside it, renamed over it; its folders are created. A link or a folder at ``relative`` is
        refused before anything is written. Returns the file's path."""
        self.expect(relative, Kind.FILE)
        temporary = self.temporary(relative)
        try:
            self.create(temporary, write)
            self.replace(temporary, relative)
        finally:
            self.unlink(temporary)
        return self.path / relative

    def temporary(self, relative: str) -> str:
        """A fresh temporary name beside ``relative`` (not created)."""
        parts = self._parts(relative)
        return "/".join((*parts[:-1], temporary_name(parts[-1])))

    def replace(self, source: str, target: str) -> None:
        """Rename the file or folder ``source`` over ``target`` (its folders created); a link at either, or
        above either, is refused."""
        self.expect(source, Kind.FILE, Kind.FOLDER)
        self.expect(target, Kind.FILE, Kind.FOLDER)
        with self._parent(source) as (src_fd, src_name), self._parent(target, create=True) as (dst_fd, dst_name):
            os.replace(src_name, dst_name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)

    def mkdir(self, relative: str) -> None:
        """The folder ``relative`` and the folders above it, where absent."""
        with self.sub(relative, create=True):
            pass

    def unlink(self, relative: str) -> bool:
        """Remove the file (or the link itself) ``relative`` where it is there; whether it was."""
        try:
            with self._parent(relative) as (fd, name):
                os.unlink(name, dir_fd=fd)
            return True
        except (FileNotFoundError, NotADirectoryError):
            return False

    def prune(self, relative: str) -> None:
        """Remove the folder ``relative`` and then each folder above it while they are empty (never this folder)."""
        parts = self._parts(relative)
        for end in range(len(parts), 0, -1):
            try:
                with self._parent("/".join(parts[:end])) as (fd, name):
                    os.rmdir(name, dir_fd=fd)
            except OSError:
                return  # not empty, absent or not a folder: the folders above it are not empty either

    def rmtree(self, relative: str) -> None:
        """Remove the folder ``relative`` and everything in it without following a link (absent: nothing)."""
        if self.expect(relative, Kind.FOLDER) is Kind.MISSING:
            return
        with self._parent(relative) as (fd, name):
            shutil.rmtree(name, dir_fd=fd)


def _write_named(file: int, write: Callable[[BinaryIO], object], path: Path) -> None:
    """``write(stream)`` into the open file ``file`` (closed after), a failure that is not an ``OSError`` naming a
    file reported as one on ``path``: the close's own flush included, which a full disk fails too."""
    try:
        with io.FileIO(file, "w", closefd=True) as raw, io.BufferedWriter(raw) as stream:
            write(stream)
    except OSError as err:
        if err.filename is None:  # a write into an open file names none: the disk filled while writing this one
            raise OSError(err.errno, err.strerror, str(path)) from None
        raise
    except RuntimeError as err:  # torch.save: "PytorchStreamWriter failed writing file ..." on a full disk
        if "PytorchStreamWriter" not in str(err):
            raise  # not a write: a bug keeps its traceback
        raise WriteFailure(errno.EIO, f"write failed ({str(err).splitlines()[0]})", str(path)) from None
