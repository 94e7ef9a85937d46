"""auditkit.output_folder: the lock, the modes, the manifest, batches committed together and rolled forward after a
kill, journals validated before they are replayed."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from auditkit.folder import Folder, FolderError, LinkRefused, temporary_name
from auditkit.output_folder import (JOURNAL, LEGACY_NAMES, LOCK, MANIFEST, NEXT, Mode, OutputFolder,
                                    OutputFolderError, Workspace, finish_commit, holds_results, remove_temporaries)


def _manifest(folder):
    return json.loads((folder / MANIFEST).read_text())["files"]


def test_a_batch_replaces_its_files_together_lists_them_and_a_discarded_one_leaves_the_old(tmp_path):
    with Workspace.opened(tmp_path) as workspace:
        workspace.write_bytes("results.json", b"old")
        batch = workspace.batch()
        batch.write_text("results.json", "new")
        batch.write_text("figures/a.png", "png")
        assert (tmp_path / "results.json").read_text() == "old"  # nothing replaced before the commit
        assert sorted(p.name for p in batch.commit()) == ["a.png", "results.json"]
        assert (tmp_path / "results.json").read_text() == "new" and (tmp_path / "figures" / "a.png").read_text() == \
            "png"
        assert not (tmp_path / JOURNAL).exists() and remove_temporaries(workspace.folder) == 0
        assert _manifest(tmp_path) == ["figures/a.png", "results.json"]

        batch = workspace.batch()
        batch.write_text("results.json", "newer")
        batch.discard()
        assert (tmp_path / "results.json").read_text() == "new" and remove_temporaries(workspace.folder) == 0


def test_a_commit_killed_after_its_journal_is_rolled_forward_on_the_next_open(tmp_path):
    with Workspace.opened(tmp_path) as workspace:
        for name in ("results.json", "report.html"):
            workspace.write_bytes(name, f"old {name}".encode())
    temporaries = {name: temporary_name(name) for name in ("results.json", "report.html")}
    for name, tmp in temporaries.items():
        (tmp_path / tmp).write_text(f"new {name}")
    # the journal written and the first rename done, then killed: results.json new, the report still old
    (tmp_path / JOURNAL).write_text(json.dumps({"renames": [[tmp, name] for name, tmp in temporaries.items()]}))
    os.replace(tmp_path / temporaries["results.json"], tmp_path / "results.json")
    with OutputFolder(tmp_path, Mode.RESUME).open():
        pass
    assert (tmp_path / "results.json").read_text() == "new results.json"
    assert (tmp_path / "report.html").read_text() == "new report.html"
    assert not (tmp_path / JOURNAL).exists()


@pytest.mark.parametrize("renames", [
    [["x", "../victim.txt"]], [["x", "/abs/victim.txt"]], [["../victim.txt", "y"]], [3], ["junk"],
    [["x", "y"]],  # plain names, but not a rename auditkit journals
    [[".next/results.json", ".auditkit.lock"]], [[".x.0123456789ab.tmp", "other"]],
])
def test_a_journal_auditkit_never_writes_is_refused_and_nothing_is_renamed(tmp_path, renames):
    folder, outside = tmp_path / "out", tmp_path / "victim.txt"
    folder.mkdir()
    outside.write_text("mine")
    (folder / "x").write_text("x")
    (folder / JOURNAL).write_text(json.dumps({"renames": renames}))
    before = sorted(p.name for p in folder.iterdir())
    with Folder.open(folder) as held, pytest.raises(OutputFolderError, match=r"\.commit\.json' (names a rename "
                                                                             r"auditkit never journals|is not a "
                                                                             r"commit journal).*not replayed"):
        finish_commit(held)
    assert outside.read_text() == "mine" and (folder / "x").read_text() == "x"
    assert sorted(p.name for p in folder.iterdir()) == before


def test_a_damaged_journal_is_refused_not_replayed(tmp_path):
    (tmp_path / JOURNAL).write_text("{not json")
    with pytest.raises(OutputFolderError, match="is not a commit journal auditkit wrote"):
        with OutputFolder(tmp_path, Mode.RESUME).open():
            pass
    assert (tmp_path / JOURNAL).read_text() == "{not json" and not (tmp_path / LOCK).exists()


def test_temporaries_of_killed_runs_are_removed_and_nothing_else(tmp_path):
    keep = [tmp_path / "notes.tmp", tmp_path / ".hidden", tmp_path / "stages" / "s00" / "train.pt"]
    for path in keep:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("keep")
    (tmp_path / "figures").mkdir()
    left = [tmp_path / temporary_name("report.html"), tmp_path / "stages" / "s00" / temporary_name("train.pt"),
            tmp_path / "figures" / temporary_name("a.png")]
    for path in left:
        path.write_text("half")
    with Folder.open(tmp_path) as folder:
        assert remove_temporaries(folder) == 3
    assert all(path.exists() for path in keep) and not any(path.exists() for path in left)


def test_a_new_run_refuses_a_folder_holding_an_earlier_run_and_names_what_it_holds(tmp_path):
    OutputFolder.check(tmp_path / "absent", Mode.NEW)  # not there yet: fine, nothing created
    assert not (tmp_path / "absent").exists()
    (tmp_path / "stages" / "s00").mkdir(parents=True)
    (tmp_path / "stages" / "s00" / "train.json").write_text('{"stage": "train", "key": "k"}')
    (tmp_path / "results.json").write_text("{}")
    with Folder.open(tmp_path) as folder:
        assert holds_results(Workspace(folder)) == ["results.json", "1 finished stage"]  # adopted: no manifest
    with pytest.raises(OutputFolderError, match=r"holds an earlier run \(results.json, 1 finished stage\); pass "
                                                r"--resume to continue it, --overwrite"):
        OutputFolder.check(tmp_path, Mode.NEW, resumable=True)
    with pytest.raises(OutputFolderError, match=r"1 finished stage\); pass --overwrite to replace it once this run "
                                                r"has finished \(files auditkit did not write are kept\), or choose"):
        OutputFolder.check(tmp_path, Mode.NEW)  # a command without --resume does not offer it
    for mode in (Mode.RESUME, Mode.OVERWRITE):
        OutputFolder.check(tmp_path, mode)
    assert not (tmp_path / MANIFEST).exists()  # checking writes nothing


def test_a_users_own_file_at_a_name_auditkit_writes_is_refused_in_every_mode(tmp_path):
    with Workspace.opened(tmp_path) as workspace:
        workspace.write_bytes("stages/s00/train.json", b"{}")  # a manifest, which does not list report.md
    (tmp_path / "report.md").write_text("my own notes")
    for mode in Mode:
        with pytest.raises(OutputFolderError, match=r"holds report.md, which auditkit did not write; it replaces "
                                                    r"only its own files: move it, or choose another folder"):
            OutputFolder.check(tmp_path, mode)
    assert (tmp_path / "report.md").read_text() == "my own notes"


@pytest.mark.parametrize("in_the_way", ["out", "parent"])
def test_a_file_in_the_way_is_refused_in_one_line(tmp_path, in_the_way):
    (tmp_path / "f").write_text("")
    path = tmp_path / "f" if in_the_way == "out" else tmp_path / "f" / "out"
    with pytest.raises(OutputFolderError, match="is a file, not a folder"):
        OutputFolder.check(path, Mode.NEW)
    with pytest.raises(OutputFolderError, match="is a file, not a folder"):
        with OutputFolder(path, Mode.NEW).open():
            pass


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_is_refused_in_one_line(tmp_path):
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(OutputFolderError, match="cannot write there"):
            with OutputFolder(tmp_path / "out", Mode.NEW).open():
                pass
    finally:
        tmp_path.chmod(0o700)


def test_a_second_run_refuses_a_held_folder_naming_the_holder_and_a_dead_holder_frees_it(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from auditkit.output_folder import Mode, OutputFolder
        with OutputFolder({str(tmp_path)!r}, Mode.NEW).open("auditkit audit --seed 1"):
            print("held", flush=True)
            time.sleep(120)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        for mode in Mode:
            with pytest.raises(OutputFolderError, match=rf"is in use by pid {holder.pid} on .*`auditkit audit --seed "
                                                        r"1`, since .*; wait for it to finish or choose another --out"):
                OutputFolder.check(tmp_path, mode)
        with pytest.raises(OutputFolderError, match="is in use by"):
            with OutputFolder(tmp_path, Mode.RESUME).open():
                pass
    finally:
        holder.kill()  # kill -9: the kernel drops its lock
        holder.wait()
    assert (tmp_path / LOCK).is_file()
    with OutputFolder(tmp_path, Mode.RESUME).open():
        pass
    assert not (tmp_path / LOCK).exists()


@pytest.mark.parametrize("target", ["file", "fifo", "dangling"])
def test_a_lock_that_is_a_link_or_a_fifo_is_refused_and_its_target_untouched(tmp_path, target):
    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    out.mkdir()
    victim.write_text("mine")
    if target == "fifo":
        os.mkfifo(out / LOCK)
    else:
        os.symlink(victim if target == "file" else tmp_path / "absent", out / LOCK)
    expected = LinkRefused if target != "fifo" else FolderError
    with pytest.raises(expected, match=r"\.auditkit\.lock' is a (symbolic link|special file)"):
        with OutputFolder(out, Mode.RESUME).open():
            pass
    assert victim.read_text() == "mine" and not (tmp_path / "absent").exists()
    assert (out / LOCK).is_symlink() or target == "fifo"  # nothing touched, the link itself included


def test_an_overwrite_run_keeps_the_old_results_until_it_swaps_in_and_drops_only_its_own_files(tmp_path):
    with Workspace.opened(tmp_path) as earlier:
        for name in ("results.json", "report.html", "report.md", "stages/s05/train.json", "figures/old.png"):
            earlier.write_bytes(name, f"old {name}".encode())
    (tmp_path / "figures" / "mine.png").write_text("the user's own")
    (tmp_path / "stages" / "README").write_text("the user's own")
    folder = OutputFolder(tmp_path, Mode.OVERWRITE)
    with folder.open():
        assert folder.work.path == tmp_path / NEXT
        folder.work.write_bytes("stages/s00/train.json", b"new")
        for name in ("results.json", "report.html"):
            folder.work.write_bytes(name, f"new {name}".encode())
        assert (tmp_path / "results.json").read_text() == "old results.json"  # untouched until the swap
        swap = folder.swap_in()
    assert (tmp_path / "results.json").read_text() == "new results.json"
    assert (tmp_path / "report.html").read_text() == "new report.html"
    assert not (tmp_path / "report.md").exists()  # the new run wrote none: the old one must not sit beside it
    assert not (tmp_path / "figures" / "old.png").exists() and not (tmp_path / "stages" / "s05").exists()
    assert (tmp_path / "stages" / "s00" / "train.json").read_text() == "new"
    assert (tmp_path / "figures" / "mine.png").read_text() == "the user's own"  # never auditkit's to delete
    assert (tmp_path / "stages" / "README").read_text() == "the user's own"
    assert swap.replaced == ("report.html", "results.json")
    assert swap.removed == ("figures/old.png", "report.md", "stages/s05/train.json")
    assert swap.kept == ("figures/mine.png", "stages/README")
    assert _manifest(tmp_path) == ["report.html", "results.json", "stages/s00/train.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [MANIFEST, "figures", "report.html", "results.json",
                                                         "stages"]  # no lock, journal or .next left


def test_an_overwrite_refuses_to_swap_over_a_users_own_file_and_keeps_the_new_run(tmp_path):
    with Workspace.opened(tmp_path) as earlier:
        earlier.write_bytes("results.json", b"old")
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "accuracy_vs_round.png").write_text("the user's own")
    folder = OutputFolder(tmp_path, Mode.OVERWRITE)
    with folder.open():
        folder.work.write_bytes("figures/accuracy_vs_round.png", b"new")
        with pytest.raises(OutputFolderError, match=r"holds figures/accuracy_vs_round.png, which auditkit did not "
                                                    r"write; the new run is whole in .*\.next'"):
            folder.swap_in()
    assert (tmp_path / "figures" / "accuracy_vs_round.png").read_text() == "the user's own"
    assert (tmp_path / NEXT / "figures" / "accuracy_vs_round.png").read_text() == "new"


def test_a_folder_written_before_manifests_adopts_the_names_auditkit_wrote_then(tmp_path):
    names = ["results.json", "report.md", "figures/accuracy_vs_round.png", "figures/reconstruction-s03.png",
             "figures/inversion-clean-0123456789ab.png", "figures/reproduction-2.png", "stages/s00/train.pt"]
    for name in names + ["figures/my_plot.png", "stages/s00/notes.txt"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    with Folder.open(tmp_path) as folder:
        assert Workspace(folder).files == set()  # nothing marks it as auditkit's: a user's own report.md
    (tmp_path / "results.json").write_text('{"schema": "auditkit/results", "schema_version": 5}')
    with Folder.open(tmp_path) as folder:
        assert Workspace(folder).files == set(names)
    assert all(LEGACY_NAMES.fullmatch(name) for name in names)


def test_every_figure_name_auditkit_writes_today_is_one_a_legacy_folder_adopts():
    from auditkit.reports.render import FIGURES

    assert all(LEGACY_NAMES.fullmatch(f"figures/{name}.png") for name in FIGURES)
