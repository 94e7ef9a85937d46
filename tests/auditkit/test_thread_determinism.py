"""Results independent of the thread count (auditkit.fl.threads): one audit with every stage (train, account,
inversion, probe, distinguish, canary, membership), run by ``auditkit audit --threads N`` at N = 1, 2 and 4, gives
the same results.json, every numeric leaf equal bit for bit; only the timings (keys ending in ``seconds``) differ.

The config reaches each pool whose partition could change a number: Opacus's PRV accountant (numpy's BLAS ``ddot``:
DP-FedAvg's composed epsilon differed in its last digits at 2 threads before the fix), the analytic probe's SVD
(LAPACK), torch's training, evaluation and attacks, and JoPEQ's identification scores (numba's parallel loops, at
1, 2 and 4 threads: the runs get ``NUMBA_NUM_THREADS=4``). The three runs go side by side, so each also runs on a
machine the others keep busy.
"""
import json
import math
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # three real audits: about 20 s each on 2 CPUs

THREADS = (1, 2, 4)
CONFIG = """
title = "thread determinism"
seed = 2
device = "cpu"
[data]
dataset = "mnist-5k"
[training]
model = "mlp"
clients = 3
rounds = 2
tau = 2
batch_size = 8
checkpoints = [1, 2]
[[mechanisms]]
name = "dp-fedavg"
noise_multiplier = 1.0
clip = 1.0
[[mechanisms]]
name = "jopeq-laplace"
bits = 2
eps = 3.0
[inversion]
targets = 1
iterations = 5
[probe]
attack = "analytic"
targets = 2
[identification]
candidates = [2, 10]
trials = 40
[distinguish]
trials = 2000
[canary]
enabled = true
canaries = 50
[membership]
enabled = true
references = 2
records = 40
population = 30
"""
# the pools start as a user's shell leaves them, not as this test process may have set them
POOL_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


def leaves(node, path=""):
    """(path, value) of every leaf of a JSON document."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from leaves(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from leaves(value, f"{path}[{index}]")
    else:
        yield path, node


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def test_an_audit_gives_the_same_numbers_at_1_2_and_4_threads(tmp_path):
    config = tmp_path / "audit.toml"
    config.write_text(CONFIG)
    environment = {k: v for k, v in os.environ.items() if k not in POOL_VARIABLES} | {"NUMBA_NUM_THREADS": "4"}
    runs = {n: subprocess.Popen([sys.executable, "-m", "auditkit.cli", "audit", str(config), "--out",
                                 str(tmp_path / f"threads-{n}"), "--threads", str(n)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=environment)
            for n in THREADS}
    for n, run in runs.items():
        _, err = run.communicate(timeout=600)
        assert run.returncode == 0, f"--threads {n}: {err[-2000:]}"
    results = {n: dict(leaves(json.loads((tmp_path / f"threads-{n}" / "results.json").read_text()))) for n in THREADS}
    timings = {path for path in results[1] if path.endswith("seconds")}
    numeric = {path for path, value in results[1].items() if is_number(value) and path not in timings}
    assert timings and len(numeric) > 2000  # the stages ran: canary and membership report their seconds
    for n in THREADS[1:]:
        assert results[n].keys() == results[1].keys(), f"--threads {n}: other leaves"
        differing = sorted(path for path in numeric if not same(results[n][path], results[1][path]))
        assert not differing, (f"{len(differing)} of {len(numeric)} numbers differ at --threads {n} from --threads 1: "
                               + "; ".join(f"{p}: {results[1][p]!r} vs {results[n][p]!r}" for p in differing[:20]))
