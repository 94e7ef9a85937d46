"""A property of auditkit.output_folder: wherever links are placed inside a results folder H (at auditkit's own
names, its bookkeeping files, inside figures/, stages/ and .next/, with or without a journal of renames of the kinds
auditkit journals), no operation auditkit does on H changes anything outside it."""
import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditkit.folder import FolderError, temporary_name
from auditkit.output_folder import Mode, OutputFolder
from auditkit.reports import render_report
from auditkit.results import load_results
from auditkit.stage_store import StageStore

pytestmark = pytest.mark.slow  # a real audit once, then a hundred folders

TINY_TOML = """
seed = 3
device = "cpu"
[training]
model = "linear"
clients = 2
rounds = 1
tau = 1
[mechanism]
name = "gaussian"
sigma = 1.0
clip = 1.0
[inversion]
targets = 1
iterations = 1
[probe]
enabled = false
[identification]
enabled = false
[distinguish]
trials = 200
"""

# where a link may be placed: everything auditkit reads or writes in H, and names beside them
PLACES = [".auditkit.lock", ".commit.json", ".auditkit-manifest.json", ".next", ".next/figures", ".next/stages",
          ".next/stages/s00", ".replaced", "results.json", "report.html", "report.md", "figures",
          "figures/accuracy_vs_round.png", "figures/reconstruction-s00.png", "figures/mine.png", "stages",
          "stages/s00", "stages/s00/train.json", "stages/s00/train.pt", "stages/s01", "other"]
TARGETS = ["outside/file.txt", "outside/dir", "outside/dir/sub", "outside/absent"]
# renames of the kinds auditkit journals, each of which would reach outside H through a link at PLACES
JOURNALED = [[".next/results.json", "results.json"], [".next/figures/a.png", "figures/a.png"],
             ["results.json", ".replaced/results.json"], ["figures/accuracy_vs_round.png",
                                                           ".replaced/figures/accuracy_vs_round.png"],
             [f"figures/{temporary_name('a.png')}", "figures/a.png"], [f"other/{temporary_name('x.txt')}",
                                                                       "other/x.txt"]]
OPERATIONS = ["report", "stage", "overwrite", "new", "check"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    root = tmp_path_factory.mktemp("reference")
    (root / "tiny.toml").write_text(TINY_TOML)
    done = subprocess.run([sys.executable, "-m", "auditkit.cli", "audit", str(root / "tiny.toml"), "--out",
                           str(root / "ref")], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr
    return root / "ref"


def _outside(base):
    """The user's files beside H: a file, folders holding auditkit's names and temporary names."""
    (base / "outside" / "dir" / "sub").mkdir(parents=True)
    (base / "outside" / "file.txt").write_text("mine")
    for name in ("results.json", "accuracy_vs_round.png", temporary_name("draft.png"), "train.json", "a.png"):
        (base / "outside" / "dir" / name).write_text(f"my {name}")
        (base / "outside" / "dir" / "sub" / name).write_text(f"my {name}")


def _snapshot(root):
    found = {}
    for path in sorted(root.rglob("*")):
        name = str(path.relative_to(root))
        found[name] = ("link -> " + os.readlink(path) if path.is_symlink() else
                       hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir")
    return found


def _operate(H, operation):
    if operation == "check":
        for mode in Mode:
            OutputFolder.check(H, mode, resumable=True)
        return
    mode = {"report": Mode.RESUME, "stage": Mode.RESUME, "overwrite": Mode.OVERWRITE, "new": Mode.NEW}[operation]
    folder = OutputFolder(H, mode, resumable=True)
    with folder.open("test"):
        if operation == "report":
            render_report(load_results(H / "results.json"), folder.work, results_dir=H)
        elif operation == "stage":
            store = StageStore(folder.work, resume=True)
            store.save_tensors("s00", "train", "k", {"w": torch.ones(2)})
            store.save("s00", "train", "k", {"a": 1}, seconds=0.0)
        else:
            store = StageStore(folder.work, resume=False)
            store.save("s01", "account", "k", {"a": 1}, seconds=0.0)
            folder.work.batch().commit()
            folder.swap_in()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(links=st.dictionaries(st.sampled_from(PLACES), st.sampled_from(TARGETS), min_size=1, max_size=4),
       journal=st.lists(st.sampled_from(JOURNALED), max_size=3), operation=st.sampled_from(OPERATIONS))
def test_random_links_inside_H_never_change_a_file_outside_it(tmp_path_factory, reference, links, journal,
                                                              operation):
    base = tmp_path_factory.mktemp("hostile")
    _outside(base)
    H = base / "H"
    shutil.copytree(reference, H)
    if journal:
        (H / ".commit.json").write_text(json.dumps({"renames": journal}))
    for place, target in sorted(links.items(), key=lambda item: item[0].count("/")):
        path = H / place
        if path.is_symlink() or not path.parent.is_dir() or path.parent.is_symlink():
            continue  # below a link placed already: the link above it is the one met
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        os.symlink(base / target, path)
    before = _snapshot(base / "outside")
    try:
        _operate(H, operation)
    except (FolderError, ValueError):
        # refused in one line naming the link, or (ValueError) a results.json the hostile journal renamed away; any
        # other error fails the test: its message would be unclear
        pass
    assert _snapshot(base / "outside") == before, (links, journal, operation)
