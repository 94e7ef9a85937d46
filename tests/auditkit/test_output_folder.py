"""auditkit.output_folder: the lock, the modes, batches committed together and rolled forward after a kill."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from auditkit.output_folder import (JOURNAL, LOCK, NEXT, Batch, Mode, OutputFolder, OutputFolderError,
                                    finish_commit, holds_results, remove_temporaries, target_of, temporary_beside)


def test_a_batch_replaces_its_files_together_and_a_discarded_one_leaves_the_old(tmp_path):
    (tmp_path / "results.json").write_text("old")
    batch = Batch(tmp_path)
    batch.write_text(tmp_path / "results.json", "new")
    batch.write_text(tmp_path / "figures" / "a.png", "png")
    assert (tmp_path / "results.json").read_text() == "old"  # nothing replaced before the commit
    assert sorted(p.name for p in batch.commit()) == ["a.png", "results.json"]
    assert (tmp_path / "results.json").read_text() == "new" and (tmp_path / "figures" / "a.png").read_text() == "png"
    assert not (tmp_path / JOURNAL).exists() and remove_temporaries(tmp_path) == 0

    batch = Batch(tmp_path)
    batch.write_text(tmp_path / "results.json", "newer")
    batch.discard()
    assert (tmp_path / "results.json").read_text() == "new" and remove_temporaries(tmp_path) == 0


def test_a_commit_killed_after_its_journal_is_rolled_forward_on_the_next_open(tmp_path):
    for name in ("results.json", "report.html"):
        (tmp_path / name).write_text(f"old {name}")
    temporaries = {name: temporary_beside(tmp_path / name) for name in ("results.json", "report.html")}
    for name, tmp in temporaries.items():
        tmp.write_text(f"new {name}")
    # the journal written and the first rename done, then killed: results.json new, the report still old
    (tmp_path / JOURNAL).write_text(json.dumps({"renames": [[tmp.name, name] for name, tmp in temporaries.items()]}))
    os.replace(temporaries["results.json"], tmp_path / "results.json")
    with OutputFolder(tmp_path, Mode.RESUME).open():
        pass
    assert (tmp_path / "results.json").read_text() == "new results.json"
    assert (tmp_path / "report.html").read_text() == "new report.html"
    assert not (tmp_path / JOURNAL).exists()


def test_a_journal_never_renames_anything_outside_its_folder(tmp_path):
    folder, outside = tmp_path / "out", tmp_path / "victim.txt"
    folder.mkdir()
    outside.write_text("mine")
    (folder / "x").write_text("x")
    (folder / JOURNAL).write_text(json.dumps({"renames": [["x", "../victim.txt"], ["x", str(outside)],
                                                          ["../victim.txt", "y"], 3, "junk"]}))
    finish_commit(folder)
    assert outside.read_text() == "mine" and (folder / "x").read_text() == "x" and not (folder / "y").exists()
    (folder / JOURNAL).write_text("{not json")
    finish_commit(folder)  # a damaged journal is dropped, nothing renamed
    assert not (folder / JOURNAL).exists()


def test_temporaries_of_killed_runs_are_removed_and_nothing_else(tmp_path):
    keep = [tmp_path / "notes.tmp", tmp_path / ".hidden", tmp_path / "stages" / "s00" / "train.pt"]
    for path in keep:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("keep")
    left = [temporary_beside(tmp_path / "report.html"), temporary_beside(tmp_path / "stages" / "s00" / "train.pt"),
            temporary_beside(tmp_path / "figures" / "a.png") if (tmp_path / "figures").mkdir() is None else None]
    assert remove_temporaries(tmp_path) == 3
    assert all(path.exists() for path in keep) and not any(path.exists() for path in left)
    assert target_of(left[0]) == str(tmp_path / "report.html")


def test_a_new_run_refuses_a_folder_holding_an_earlier_run_and_names_what_it_holds(tmp_path):
    OutputFolder.check(tmp_path / "absent", Mode.NEW)  # not there yet: fine, nothing created
    assert not (tmp_path / "absent").exists()
    (tmp_path / "stages" / "s00").mkdir(parents=True)
    (tmp_path / "stages" / "s00" / "train.json").write_text("{}")
    (tmp_path / "results.json").write_text("{}")
    assert holds_results(tmp_path) == ["results.json", "1 finished stage"]
    with pytest.raises(OutputFolderError, match=r"holds an earlier run \(results.json, 1 finished stage\); pass "
                                                r"--resume to continue it, --overwrite"):
        OutputFolder.check(tmp_path, Mode.NEW, resumable=True)
    with pytest.raises(OutputFolderError, match=r"1 finished stage\); pass --overwrite to replace it once this run "
                                                r"has finished, or choose another --out"):
        OutputFolder.check(tmp_path, Mode.NEW)  # a command without --resume does not offer it
    for mode in (Mode.RESUME, Mode.OVERWRITE):
        OutputFolder.check(tmp_path, mode)


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


def test_an_overwrite_run_keeps_the_old_results_until_it_swaps_in_and_drops_what_it_does_not_have(tmp_path):
    for name in ("results.json", "report.html", "report.md"):
        (tmp_path / name).write_text(f"old {name}")
    (tmp_path / "stages" / "s05").mkdir(parents=True)
    (tmp_path / "stages" / "s05" / "train.json").write_text("old")
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "old.png").write_text("old")
    folder = OutputFolder(tmp_path, Mode.OVERWRITE)
    with folder.open():
        assert folder.work == tmp_path / NEXT
        (folder.work / "stages" / "s00").mkdir(parents=True)
        (folder.work / "stages" / "s00" / "train.json").write_text("new")
        for name in ("results.json", "report.html"):
            (folder.work / name).write_text(f"new {name}")
        assert (tmp_path / "results.json").read_text() == "old results.json"  # untouched until the swap
        folder.swap_in()
    assert (tmp_path / "results.json").read_text() == "new results.json"
    assert (tmp_path / "report.html").read_text() == "new report.html"
    assert not (tmp_path / "report.md").exists()  # the new run wrote none: the old one must not sit beside it
    assert not (tmp_path / "figures").exists() and not (tmp_path / "stages" / "s05").exists()
    assert (tmp_path / "stages" / "s00" / "train.json").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "results.json", "stages"]  # no lock left
