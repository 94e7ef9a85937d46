"""auditkit.folder: a folder opened once, every name in it reached without following a link."""
import os
import stat

import pytest

from auditkit.folder import Folder, FolderError, Kind, LinkRefused, plain_parts, target_of, temporary_name


@pytest.fixture
def tree(tmp_path):
    """An outside folder with a file, and a folder holding links into it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("mine")
    inside = tmp_path / "inside"
    (inside / "real").mkdir(parents=True)
    (inside / "real" / "a.txt").write_text("a")
    os.symlink(outside, inside / "dirlink")
    os.symlink(outside / "victim.txt", inside / "filelink")
    os.symlink(outside / "absent.txt", inside / "dangling")
    os.mkfifo(inside / "fifo")
    return inside, outside


def test_plain_parts_accepts_only_plain_relative_paths():
    assert plain_parts("figures/a.png") == ("figures", "a.png")
    for bad in ("", "/etc/passwd", "../x", "a/../b", "a//b", "./a", "a/.", "a\0b"):
        assert plain_parts(bad) is None, bad


def test_kinds_name_the_thing_itself_never_what_a_link_points_to(tree):
    inside, _ = tree
    with Folder.open(inside) as folder:
        assert folder.kind("real") is Kind.FOLDER and folder.kind("real/a.txt") is Kind.FILE
        assert folder.kind("dirlink") is Kind.LINK and folder.kind("filelink") is Kind.LINK
        assert folder.kind("dangling") is Kind.LINK and folder.kind("fifo") is Kind.OTHER
        assert folder.kind("absent") is Kind.MISSING and folder.kind("real/a.txt/below") is Kind.MISSING
        with pytest.raises(LinkRefused, match=r"dirlink' is a symbolic link; auditkit never follows a link"):
            folder.kind("dirlink/victim.txt")
        assert [name for name, _ in folder.entries()] == ["dangling", "dirlink", "fifo", "filelink", "real"]
        assert folder.files() == ["real/a.txt"]  # links are never entered


@pytest.mark.parametrize("name", ["dirlink/new.txt", "filelink", "dangling"])
def test_writing_through_a_link_is_refused_and_nothing_outside_changes(tree, name):
    inside, outside = tree
    with Folder.open(inside) as folder:
        with pytest.raises(LinkRefused, match="is a symbolic link"):
            folder.write(name, lambda file: file.write(b"attack"))
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]
    assert (outside / "victim.txt").read_text() == "mine"


def test_reading_refuses_links_and_never_waits_on_a_fifo(tree):
    inside, _ = tree
    with Folder.open(inside) as folder:
        assert folder.read_bytes("real/a.txt") == b"a"
        for name in ("filelink", "dirlink/victim.txt"):
            with pytest.raises(LinkRefused):
                folder.read_bytes(name)
        with pytest.raises(FolderError, match="is a special file, not a plain file"):
            folder.read_bytes("fifo")
        with pytest.raises(FolderError, match="larger than the 0-byte limit"):
            folder.read_bytes("real/a.txt", max_bytes=0)


def test_replace_unlink_and_rmtree_stay_inside(tree):
    inside, outside = tree
    with Folder.open(inside) as folder:
        with pytest.raises(LinkRefused):
            folder.replace("real/a.txt", "dirlink/victim.txt")
        with pytest.raises(LinkRefused):
            folder.rmtree("dirlink")
        assert folder.unlink("filelink")  # the link itself goes; its target stays
        folder.replace("real/a.txt", "moved/b.txt")
        folder.rmtree("moved")
    assert (outside / "victim.txt").read_text() == "mine" and not (inside / "filelink").exists()
    assert not (inside / "moved").exists() and (inside / "dirlink").is_symlink()


def test_a_write_is_atomic_follows_the_umask_and_a_failed_writer_leaves_nothing(tmp_path, umask):
    with umask(0o027), Folder.open(tmp_path) as folder:
        folder.write("deep/new/file.bin", lambda file: file.write(b"x"))

        def broken(file):
            file.write(b"half")
            raise RuntimeError("a bug in the writer")

        with pytest.raises(RuntimeError, match="a bug"):
            folder.write("deep/new/file.bin", broken)
    assert (tmp_path / "deep" / "new" / "file.bin").read_bytes() == b"x"
    assert stat.S_IMODE((tmp_path / "deep" / "new" / "file.bin").stat().st_mode) == 0o640
    assert os.listdir(tmp_path / "deep" / "new") == ["file.bin"]  # no temporary left


def test_a_folder_where_a_file_is_expected_and_a_file_where_a_folder_is_are_one_line(tmp_path):
    (tmp_path / "f").write_text("")
    (tmp_path / "d").mkdir()
    with Folder.open(tmp_path) as folder:
        with pytest.raises(FolderError, match=r"'.*/d' is a folder, where auditkit expects a plain file"):
            folder.write("d", lambda file: file.write(b"x"))
        with pytest.raises(FolderError, match=r"'.*/f' is a file, not a folder"):
            folder.write("f/x", lambda file: file.write(b"x"))
        with pytest.raises(FolderError, match="not a plain relative path"):
            folder.write("../escape", lambda file: file.write(b"x"))
    with pytest.raises(FolderError, match="is a file, not a folder"):
        Folder.open(tmp_path / "f")


def test_temporary_names_stand_for_their_targets():
    name = temporary_name("report.html")
    assert name.startswith(".report.") and name.endswith(".tmp.html") and target_of(name) == "report.html"
    assert target_of("plain.txt") == "plain.txt"
