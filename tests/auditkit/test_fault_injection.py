"""Faults injected into real `auditkit audit` processes: kill -9 at every rename of a tiny audit, then --resume;
two audits on one folder; a disk that fills mid-run.

Every file auditkit writes reaches its name through one ``os.replace`` (``auditkit.output_folder``), so killing the
process just before the k-th rename, for every k, visits every state a crash can leave on disk. Each killed folder is
then resumed and must give results.json byte for byte equal to an uninterrupted run's, with no temporary file left.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from auditkit.output_folder import LOCK

pytestmark = pytest.mark.slow  # real audit processes, killed and resumed: minutes

# one setting, every stage (train, account, inversion, probe with identification, distinguish), a few seconds
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
name = "jopeq-laplace"
bits = 2
eps = 2.0
[inversion]
targets = 1
iterations = 3
[probe]
targets = 1
iterations = 3
[identification]
candidates = [2]
trials = 20
[distinguish]
trials = 500
"""

# runs `auditkit` jobs in one process: each job is (arguments, k); a job with k > 0 is killed (SIGKILL) just before
# its k-th os.replace; the renames each job made are appended to the file given as argv[1]
DRIVER = textwrap.dedent("""
    import json, os, signal, sys, time

    from auditkit.cli.app import main

    log, jobs = sys.argv[1], json.loads(sys.argv[2])
    real_replace, count, kill_at = os.replace, 0, 0
    pause_at = int(os.environ.get("PAUSE_AT", "0"))  # held there until the file LOG.go exists

    def replace(src, dst, **fds):
        global count
        count += 1
        if count == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if count == pause_at:
            open(log + ".paused", "w").close()
            while not os.path.exists(log + ".go"):
                time.sleep(0.02)
        return real_replace(src, dst, **fds)

    os.replace = replace
    for arguments, kill_at in jobs:
        count = 0
        try:
            main(arguments)
        except SystemExit as stop:
            if stop.code not in (0, None):
                sys.exit(stop.code)
        with open(log, "a") as f:
            f.write(f"{count}\\n")
""")


def _drive(tmp_path, jobs, timeout=600):
    log = tmp_path / "renames.log"
    log.unlink(missing_ok=True)
    process = subprocess.run([sys.executable, "-c", DRIVER, str(log), json.dumps(jobs)], capture_output=True,
                             text=True, timeout=timeout)
    counts = [int(line) for line in log.read_text().split()] if log.exists() else []
    return process, counts


def _audit(config, out, *extra):
    return ["audit", str(config), "--out", str(out), *extra]


def _leftovers(folder):
    """Temporary files, journals or an unfinished .next/ left in an output folder."""
    return [p for p in folder.rglob("*") if re.search(r"\.tmp|\.commit\.json|\.next|\.replaced", p.name)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The config, and an uninterrupted run of it: (config path, its folder, the renames it made)."""
    root = tmp_path_factory.mktemp("tiny")
    config = root / "tiny.toml"
    config.write_text(TINY_TOML)
    process, counts = _drive(root, [[_audit(config, root / "reference"), 0]])
    assert process.returncode == 0, process.stderr
    return config, root / "reference", counts[0]


def test_a_kill_at_every_write_resumes_to_the_results_of_an_uninterrupted_run(tiny, tmp_path, every_write):
    config, reference, renames = tiny
    assert renames >= 15  # every stage file, the figures, results.json and the reports, the commit journal
    # every write with --every-write; by default (CI) every 4th and the last, about 30 s a kill on 2 cores
    kills = sorted({*range(1, renames + 1, 1 if every_write else 4), renames})
    folders = [tmp_path / f"killed-at-{k}" for k in kills]
    # each process resumes the folder killed before, then starts a fresh audit killed at its rename
    for i, (k, folder) in enumerate(zip(kills, folders)):
        jobs = ([[_audit(config, folders[i - 1], "--resume"), 0]] if i else []) + [[_audit(config, folder), k]]
        process, _ = _drive(tmp_path, jobs)
        assert process.returncode == -signal.SIGKILL, (k, process.stderr[-2000:])
    process, _ = _drive(tmp_path, [[_audit(config, folders[-1], "--resume"), 0]])
    assert process.returncode == 0, process.stderr
    expected = (reference / "results.json").read_bytes()
    identical = [f for f in folders if (f / "results.json").read_bytes() == expected]
    assert identical == folders, f"{len(identical)} of {len(folders)} killed runs recovered identical"
    for folder in folders:
        assert not _leftovers(folder), folder
        assert (folder / "report.md").read_text() == (reference / "report.md").read_text()
    print(f"kill -9 at {len(kills)} of {renames} writes: {len(identical)} of {len(folders)} resumed runs identical")


def test_a_second_audit_on_a_folder_in_use_refuses_in_one_line_and_the_first_finishes_alone(tiny, tmp_path):
    config, reference, _ = tiny
    out, log = tmp_path / "out", tmp_path / "first.log"
    # the first audit is held at its 3rd write (the folder locked, stages being written) until the others have run
    first = subprocess.Popen([sys.executable, "-c", DRIVER, str(log), json.dumps([[_audit(config, out), 0]])],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ,
                                                                                            "PAUSE_AT": "3"})
    others = textwrap.dedent(f"""
        from auditkit.cli.app import main
        for extra in ([], ["--resume"], ["--overwrite", "--seed", "6"]):
            try:
                main({_audit(config, out)!r} + extra)
            except SystemExit as stop:
                print(stop.code)
    """)
    try:
        while not Path(f"{log}.paused").exists() and first.poll() is None:
            time.sleep(0.02)
        second = subprocess.run([sys.executable, "-c", others], capture_output=True, text=True, timeout=300)
    finally:
        Path(f"{log}.go").touch()
        _, stderr = first.communicate(timeout=600)
    assert first.returncode == 0, stderr
    assert second.stdout.split() == ["2", "2", "2"], second.stderr
    line = (rf"error: --out '{re.escape(str(out))}' is in use by pid {first.pid} on .*, `auditkit audit`, since "
            r"[-0-9: ]+; wait for it to finish or choose another --out")
    assert re.fullmatch(rf"({line}\n){{3}}", second.stderr), second.stderr
    # the first's own run, whole: nothing of the others mixed in
    assert (out / "results.json").read_bytes() == (reference / "results.json").read_bytes()


def test_a_new_audit_never_deletes_an_earlier_one_and_overwrite_replaces_it_only_when_finished(tiny, tmp_path):
    config, reference, _ = tiny
    out = tmp_path / "out"
    shutil.copytree(reference, out)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name != LOCK}
    refused = subprocess.run([sys.executable, "-m", "auditkit.cli", *_audit(config, out, "--seed", "6")],
                             capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and refused.stderr.startswith(f"error: --out '{out}' holds an earlier run ("), \
        refused.stderr
    # an overwrite killed half way leaves the earlier run whole; repeated, it finishes and replaces it
    process, _ = _drive(tmp_path, [[_audit(config, out, "--seed", "6", "--overwrite"), 6]])
    assert process.returncode == -signal.SIGKILL
    assert all(p.read_bytes() == content for p, content in before.items()), "the earlier run was changed"
    process, _ = _drive(tmp_path, [[_audit(config, out, "--seed", "6", "--overwrite"), 0]])
    assert process.returncode == 0, process.stderr
    document = json.loads((out / "results.json").read_text())
    assert document["provenance"]["seed"] == 6 and not _leftovers(out)


def _mountable_tmpfs():
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--mount", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"],
                           capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _mountable_tmpfs(), reason="needs `unshare --mount` and tmpfs (root or CAP_SYS_ADMIN)")
def test_a_disk_that_fills_ends_in_one_line_and_leaves_the_earlier_results_whole(tiny, tmp_path):
    config, reference, _ = tiny
    mount = tmp_path / "disk"
    mount.mkdir()
    size = sum(p.stat().st_size for p in reference.rglob("*") if p.is_file())
    # the earlier run fits; the overwrite run's own copy of everything does not
    script = textwrap.dedent(f"""
        mount -t tmpfs -o size={size + size // 2} tmpfs {mount} && cp -r {reference} {mount}/out &&
        {sys.executable} -m auditkit.cli {' '.join(_audit(config, mount / 'out', '--overwrite'))};
        echo "exit $?"; cd {mount}/out && sha256sum results.json report.html report.md && ls -a . stages/*
    """)
    process = subprocess.run(["unshare", "--mount", "sh", "-c", script], capture_output=True, text=True, timeout=600)
    assert "exit 1" in process.stdout, (process.stdout, process.stderr)
    assert re.fullmatch(r"error: \S+: No space left on device\n", process.stderr), process.stderr
    sums = subprocess.run(["sha256sum", "results.json", "report.html", "report.md"], cwd=reference,
                          capture_output=True, text=True).stdout
    assert sums in process.stdout  # the earlier run's files, byte for byte
    assert not re.search(r"\.tmp", process.stdout)  # no temporary file in the folder or its stages


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_out_is_one_line(tiny, tmp_path):
    config, _, _ = tiny
    tmp_path.chmod(0o500)
    try:
        process = subprocess.run([sys.executable, "-m", "auditkit.cli", *_audit(config, tmp_path / "out")],
                                 capture_output=True, text=True, timeout=300)
    finally:
        tmp_path.chmod(0o700)
    assert process.returncode == 2 and re.fullmatch(r"error: .*cannot write there \(Permission denied\)\n",
                                                    process.stderr), process.stderr
