"""A results folder from someone else (H) cannot touch anything outside it: each attack of issue 54 built as a
hostile folder, the command run as a real `auditkit` process, every file outside H compared byte for byte."""
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # real auditkit processes: seconds each

# one setting, every stage but identification, a few seconds
TINY_TOML = """
seed = 5
device = "cpu"
[training]
model = "linear"
clients = 3
rounds = 2
tau = 1
checkpoints = [1, 2]
[mechanism]
name = "gaussian"
sigma = 1.0
clip = 1.0
[inversion]
targets = 1
iterations = 2
[probe]
targets = 1
iterations = 2
[identification]
enabled = false
[distinguish]
trials = 300
"""


def auditkit(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "auditkit.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=600, cwd=cwd, env={**os.environ, "OMP_NUM_THREADS": "1"})


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """(config, a finished audit's folder) made once."""
    root = tmp_path_factory.mktemp("reference")
    config = root / "tiny.toml"
    config.write_text(TINY_TOML)
    done = auditkit("audit", config, "--out", root / "ref")
    assert done.returncode == 0, done.stderr
    return config, root / "ref"


def snapshot(root: Path, skip: Path) -> dict[str, str]:
    """Every entry under ``root`` but ``skip``: a link's target, a file's SHA-256, "dir"."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path == skip or skip in path.parents:
            continue
        name = str(path.relative_to(root))
        found[name] = ("link -> " + os.readlink(path) if path.is_symlink() else
                       hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir")
    return found


def hostile(tmp_path, reference):
    """A copy of the reference folder as H, beside the user's own files that an attack would reach."""
    base = tmp_path / "base"
    home, thesis = base / "home", base / "thesis"
    for folder in (home, thesis):
        folder.mkdir(parents=True)
    (home / ".bashrc").write_text("# my shell start-up\n")
    (thesis / "ch1.tex").write_text("chapter 1")
    (thesis / "accuracy_vs_round.png").write_bytes(b"my own figure")
    (thesis / ".draft.0123456789ab.tmp.png").write_bytes(b"my draft, named like a temporary file")
    shutil.copytree(reference, base / "H", symlinks=True)
    return base, base / "H"


def check_refused(process, base, H, before, *, says):
    """Exit 2, one error line saying ``says``, nothing outside H changed."""
    assert process.returncode == 2, (process.returncode, process.stderr[-2000:])
    lines = process.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], process.stderr
    assert snapshot(base, H) == before


def _journal(H, renames):
    (H / ".commit.json").write_text(json.dumps({"renames": renames}))


ATTACKS = {
    # a crafted journal that moves the user's files into H and H's payload over their shell start-up file
    "journal": (lambda H: (os.symlink("../thesis", H / "t"), os.symlink("../home", H / "h"),
                           (H / "payload").write_text("echo pwned\n"),
                           _journal(H, [["t/ch1.tex", "stolen"], ["payload", "h/.bashrc"]])),
                "names a rename auditkit never journals"),
    # a rename of the kind auditkit journals (.next/X -> X), through a link
    "journal through a link": (lambda H: (os.symlink("../thesis", H / ".next"),
                                          _journal(H, [[".next/ch1.tex", "ch1.tex"]])),
                               ".next' is a symbolic link"),
    "lock": (lambda H: os.symlink("../home/.bashrc", H / ".auditkit.lock"), ".auditkit.lock' is a symbolic link"),
    "figures": (lambda H: (shutil.rmtree(H / "figures"), os.symlink("../thesis", H / "figures")),
                "figures' is a symbolic link"),
    # a stage folder linked to the user's folder, which holds a file named like a temporary file
    "stages": (lambda H: os.symlink("../../thesis", H / "stages" / "x"), "stages/x' is a symbolic link"),
    "a manifest naming a file through a link": (
        lambda H: (os.symlink("../home", H / "h"), (H / ".auditkit-manifest.json").write_text(
            json.dumps({"files": ["h/.bashrc", "results.json"]}))), "h' is a symbolic link"),
}


@pytest.mark.parametrize("attack", ATTACKS)
@pytest.mark.parametrize("command", ["report", "audit --resume", "train"])
def test_a_hostile_folder_is_refused_in_one_line_and_nothing_outside_it_changes(tmp_path, reference, attack,
                                                                                command):
    config, ref = reference
    base, H = hostile(tmp_path, ref)
    build, says = ATTACKS[attack]
    build(H)
    before = snapshot(base, H)
    if command == "report":
        process = auditkit("report", H)
    elif command == "audit --resume":
        process = auditkit("audit", config, "--out", H, "--resume")
    else:  # train of a folder holding no results: the journal and links are met all the same
        for name in ("results.json", "report.html", "report.md"):
            (H / name).unlink()
        shutil.rmtree(H / "stages", ignore_errors=True) if attack != "stages" else None
        before = snapshot(base, H)
        process = auditkit("train", config, "--out", H, "--rounds", "1")
    check_refused(process, base, H, before, says=says)


def test_an_overwrite_keeps_the_users_own_files_and_says_what_it_replaced_removed_and_kept(tmp_path, reference):
    config, ref = reference
    out = tmp_path / "out"
    shutil.copytree(ref, out)
    (out / "figures" / "mine.png").write_bytes(b"the user's own")
    (out / "stages" / "notes.txt").write_text("the user's own")
    (out / "stages" / "s07").mkdir()
    (out / "stages" / "s07" / "train.json").write_text("{}")  # a stage file auditkit did not write (no manifest entry)
    refused = auditkit("audit", config, "--out", out)
    assert refused.returncode == 2 and "holds an earlier run (results.json, report.html, report.md, 5 finished " \
                                       "stages); pass --resume" in refused.stderr, refused.stderr
    done = auditkit("audit", config, "--out", out, "--overwrite", "--seed", "6")
    assert done.returncode == 0, done.stderr
    assert (out / "figures" / "mine.png").read_bytes() == b"the user's own"
    assert (out / "stages" / "notes.txt").read_text() == "the user's own"
    assert (out / "stages" / "s07" / "train.json").read_text() == "{}"
    assert "kept 3 files in" in done.stdout and "figures/mine.png, stages/notes.txt, stages/s07/train.json" in \
        done.stdout, done.stdout
    assert json.loads((out / "results.json").read_text())["provenance"]["seed"] == 6


def test_report_out_never_replaces_a_file_auditkit_did_not_write_there(tmp_path, reference):
    _, ref = reference
    out = tmp_path / "mine"
    out.mkdir()
    (out / "report.md").write_text("my own notes")
    process = auditkit("report", ref, "--out", out)
    assert process.returncode == 2 and process.stderr.strip() == (
        f"error: {str(out)!r} holds report.md, which auditkit did not write; it replaces only its own files: move "
        "it, or choose another folder"), process.stderr
    assert sorted(p.name for p in out.iterdir()) == ["report.md"] and (out / "report.md").read_text() == \
        "my own notes"
    (out / "report.md").unlink()
    first = auditkit("report", ref, "--out", out)
    again = auditkit("report", ref, "--out", out)
    assert first.returncode == again.returncode == 0, (first.stderr, again.stderr)
    assert f"wrote {out / 'report.html'}" in first.stdout and f"replaced {out / 'report.html'}" in again.stdout


def test_report_in_place_says_where_it_writes(tmp_path, reference):
    _, ref = reference
    H = tmp_path / "H"
    shutil.copytree(ref, H)
    process = auditkit("report", H)
    assert process.returncode == 0, process.stderr
    assert process.stdout.splitlines()[0] == (f"writing the report into {H} (the folder of results.json); --out DIR "
                                              "writes it into another folder")
