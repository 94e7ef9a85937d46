"""The memory estimate checked before a run starts (``auditkit.fl.memory``, issue 39): a run that needs more than
the limit is refused in one line before anything is allocated, the quick start passes, a raised limit lets it
through, and the estimate follows a real run's measured peak."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from auditkit.config import ConfigError, from_dict, merge, preset_dict
from auditkit.fl import memory
from auditkit.fl.memory import (GIB, RUNTIME, SAFETY, activation_values, available_memory, estimate_memory,
                                free_memory, resident_memory)
from auditkit.models import create_model
from auditkit.stages import train

ABSURD = {"training": {"clients": 3500, "model": "mlp200"}, "limits": {"max_memory_gib": 8}}


def test_the_parts_follow_the_run_sizes():
    t = from_dict({"training": {"clients": 100, "tau": 5, "batch_size": 10, "checkpoints": [1, 2]}}).training
    e = estimate_memory(t, num_params=1000, input_numel=784, activations=2000, dataset_bytes=10**6)
    assert e.parts["client state"] == 100 * 1000 * 4  # K x P float32 momentum
    assert e.parts["round"] == 100 * 1000 * memory.PER_CLIENT_PARAMETER  # no chunk: all 100 train at once
    assert e.parts["batches"] == 100 * 5 * 10 * 3 * 8 + 100 * 10 * (784 * 4 + 8)  # indices; one step's images
    assert e.parts["activations"] == 3 * 100 * 10 * 2000 * 4
    assert e.parts["checkpoints"] == 2 * (3 * 100 * 1000 * 4 + 100 * 5 * 10 * 8)
    kept = estimate_memory(t, num_params=1000, input_numel=784, activations=2000, dataset_bytes=10**6, kept_rows=4)
    assert kept.parts["checkpoints"] == 2 * (3 * 4 * 1000 * 4 + 100 * 5 * 10 * 8)  # the audit's 4 targets' rows
    assert {k: v for k, v in kept.parts.items() if k != "checkpoints"} == {
        k: v for k, v in e.parts.items() if k != "checkpoints"}
    assert e.parts["data"] == 10**6 and e.parts["runtime"] == RUNTIME
    assert e.needed == pytest.approx(SAFETY * e.total, abs=1)
    uniform = from_dict({"training": {"clients": 100, "participation": "uniform", "clients_per_round": 10}}).training
    smaller = estimate_memory(uniform, num_params=1000, input_numel=784, activations=2000, dataset_bytes=10**6)
    assert smaller.parts["client state"] == e.parts["client state"]  # every client keeps its momentum
    assert smaller.parts["round"] == e.parts["round"] // 10  # a tenth of them take part
    chunked = estimate_memory(t, num_params=1000, input_numel=784, activations=2000, dataset_bytes=10**6, chunk=4)
    assert chunked.parts["round"] == 1000 * (100 * (memory.PER_CLIENT_PARAMETER - memory.TRAINING_PER_PARAMETER)
                                             + 4 * memory.TRAINING_PER_PARAMETER)
    assert chunked.parts["activations"] == 3 * 4 * 10 * 2000 * 4  # one chunk's step at a time
    reset = from_dict({"training": {"clients": 100, "optimizer_state": "reset"}}).training
    assert estimate_memory(reset, num_params=1000, input_numel=784, activations=2000,
                           dataset_bytes=0).parts["client state"] == 0
    adam = from_dict({"training": {"clients": 100, "optimizer": "adam"}}).training
    assert estimate_memory(adam, num_params=1000, input_numel=784, activations=2000,
                           dataset_bytes=0).parts["client state"] == 2 * 100 * 1000 * 4
    epochs = from_dict({"training": {"clients": 100, "local_epochs": 2, "batch_size": 10}}).training
    assert "x 12 x 10 sample indices" in estimate_memory(  # the largest client: 2 x ceil(55 / 10) steps
        epochs, num_params=1000, input_numel=784, activations=2000, dataset_bytes=0,
        client_sizes=[55, 20]).what["batches"]


def test_activations_count_the_input_and_every_layer_output():
    assert activation_values(create_model("linear"), (1, 28, 28)) == 784 + 784 + 10  # input, flatten, logits


def test_activations_are_counted_on_the_model_device(device):
    """The example runs on the model's device (a CUDA model given a CPU example raised), the count is the same;
    a model without parameters or buffers runs on the CPU."""
    cnn = create_model("cnn")
    expected = activation_values(cnn, (1, 28, 28))
    on_device = cnn.to(device)
    assert memory.model_device(on_device).type == device.type
    assert activation_values(on_device, (1, 28, 28)) == expected
    assert memory.client_chunk(on_device, (1, 28, 28), 5, device) >= 1
    flatten = torch.nn.Flatten()
    assert memory.model_device(flatten) == torch.device("cpu") and activation_values(flatten, (1, 28, 28)) == 2 * 784


def _meminfo(key: str) -> int:
    line = next(x for x in open("/proc/meminfo") if x.startswith(key + ":"))
    return int(line.split()[1]) * 1024


def test_the_free_memory_is_what_the_kernel_reports_available_and_follows_what_this_process_holds():
    """``available_memory`` is MemAvailable (or a cgroup's remaining memory where lower), never the total; the
    resident figure grows by a 512 MiB tensor's pages once they are written; under ``max_memory_gib`` the free
    memory is that limit less what is held."""
    # MemAvailable moves while other processes (the other test worker) allocate and free: bracket the reading and
    # allow 64 MiB of drift, far below the gap to the total the function must never report.
    first = _meminfo("MemAvailable")
    available = available_memory()
    last = _meminfo("MemAvailable")
    assert 256 * 2**20 < available <= max(first, last) + 64 * 2**20
    assert max(first, last) < _meminfo("MemTotal")
    before = resident_memory()
    block = torch.ones(2**27)  # 512 MiB, written
    assert resident_memory() - before >= 0.9 * 512 * 2**20
    free, source = free_memory(64)
    assert abs(free - (64 * GIB - resident_memory())) < 64 * 2**20 and source.startswith("[limits] max_memory_gib")
    del block


def test_a_run_is_checked_against_the_free_memory_not_the_total(monkeypatch):
    """With 1 GiB available the quick start still fits; with 10 MiB it is refused in one line naming the free
    memory as the limit."""
    monkeypatch.setattr(memory, "resident_memory", lambda: 0)
    monkeypatch.setattr(memory, "available_memory", lambda: GIB)
    assert train.Experiment(_quickstart()).memory.needed < GIB
    monkeypatch.setattr(memory, "available_memory", lambda: 10 * 2**20)
    with pytest.raises(ConfigError, match=r"but the memory limit is 10 MiB \(free on this machine, with what this "
                                          r"process holds\); lower training.clients") as err:
        train.Experiment(_quickstart())
    assert "\n" not in str(err.value)


def test_an_absurd_client_count_is_refused_in_one_line_before_anything_is_allocated(monkeypatch):
    """3,500 clients of the 159,010-parameter mlp200 need about 29 GiB (trained in chunks): refused before the simulation (and its
    K x P momentum) is built."""
    def built(*args, **kwargs):
        raise AssertionError("the simulation was built")

    monkeypatch.setattr(train, "FederatedSimulation", built)
    with pytest.raises(ConfigError) as err:
        train.Experiment(from_dict(ABSURD))
    message = str(err.value)
    assert re.match(r"the run needs about 2\d\.\d GiB \(", message)
    assert "a round's 3,500 clients x 159,010 parameters in training and the protocol" in message
    assert message.endswith("but the memory limit is 8 GiB ([limits] max_memory_gib); lower training.clients (or "
                            "clients_per_round), tau, batch_size, client_chunk or checkpoints, or raise [limits] max_memory_gib / "
                            "--max-memory")
    assert "\n" not in message


def _quickstart(**limits) -> object:
    """The quick start's first setting (what ``Audit`` builds its Experiment from), with ``[limits]``."""
    config = from_dict(merge(preset_dict("quickstart"), {"limits": limits}))
    return config.with_setting(config.settings()[0])


def test_the_quick_start_passes_and_a_raised_limit_lets_a_run_through():
    quick = train.Experiment(_quickstart())  # this machine's memory
    assert quick.memory is not None and quick.memory.needed < GIB
    with pytest.raises(ConfigError, match=r"but the memory limit is 102 MiB \(\[limits\] max_memory_gib\)"):
        train.Experiment(_quickstart(max_memory_gib=0.1))
    assert train.Experiment(_quickstart(max_memory_gib=2)).memory.needed == quick.memory.needed


def test_the_command_line_refuses_it_in_one_line_and_max_memory_raises_the_limit(tmp_path):
    """``--max-memory`` sets ``[limits] max_memory_gib``: an absurd run is one error line and writes nothing; a
    small run refused under a tiny limit trains under a larger one."""
    def run(*args, out="out"):
        return subprocess.run([sys.executable, "-m", "auditkit.cli", "train", *args, "--out", str(tmp_path / out)],
                              capture_output=True, text=True, timeout=300)

    refused = run("--clients", "3500", "--model", "mlp200", "--max-memory", "8")
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the run needs about ")
    assert "but the memory limit is 8 GiB" in lines[0] and not (tmp_path / "out").exists()
    small = ("--clients", "2", "--rounds", "1", "--tau", "1")
    tight = run(*small, "--max-memory", "0.1", out="tight")
    assert tight.returncode == 2 and "but the memory limit is 102 MiB ([limits] max_memory_gib)" in tight.stderr
    raised = run(*small, "--max-memory", "2", out="raised")
    assert raised.returncode == 0, raised.stderr
    assert (tmp_path / "raised" / "results.json").is_file()


MEASURE = """
import json, sys
import torch
from auditkit.config import from_dict
from auditkit.stages.train import Experiment

def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))

torch.set_num_threads(1)
raw = json.loads(sys.argv[1])
Experiment(from_dict({**raw, "training": {**raw["training"], "clients": 2, "rounds": 1, "checkpoints": [1]}})).train()
with open("/proc/self/clear_refs", "w") as f:  # resets the peak (VmHWM) to the resident memory now
    f.write("5")
before = status("VmRSS")
experiment = Experiment(from_dict(raw))
experiment.train()
print(json.dumps({"measured": status("VmHWM") - before, "parts": experiment.memory.parts}))
"""


def _peak_resettable():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux") or not _peak_resettable(),
                    reason="resets and reads the peak resident memory through /proc/self (Linux)")
def test_the_estimate_is_within_a_factor_of_two_of_a_measured_peak():
    """100 clients of the 25,818-parameter mlp, 5 steps of 10 samples, 2 rounds, both checkpointed, through the
    Gaussian mechanism: the peak resident memory the run adds (VmHWM, reset through /proc/self/clear_refs after a
    warm-up run loaded what is loaded lazily, over the resident memory then) against the estimate without the
    libraries' share; tolerance: a factor of 2 either way. The checked figure, times SAFETY, covers the measured peak."""
    raw = {"training": {"model": "mlp", "clients": 100, "tau": 5, "batch_size": 10, "rounds": 2,
                        "checkpoints": [1, 2]}, "mechanism": {"name": "gaussian", "sigma": 0.01}}
    done = subprocess.run([sys.executable, "-c", MEASURE, json.dumps(raw)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    modelled = sum(v for k, v in found["parts"].items() if k != "runtime")
    assert found["measured"] / 2 <= modelled <= 2 * found["measured"], found
    assert SAFETY * modelled >= found["measured"]


def test_flower_runs_are_not_estimated():
    """Flower's clients run in Ray's workers, whose resources Ray manages: no estimate, no refusal."""
    flower = SimpleNamespace(training=SimpleNamespace(backend="flower"))
    assert memory.check_memory(flower, torch.nn.Linear(1, 1), None) is None


WATCHED = """
import json, resource, time, torch
from auditkit.fl.memory import PeakWatch, resident_memory
with PeakWatch() as first:
    began_first = resident_memory()
    block = torch.ones(3 * 2**26)
    del block
with PeakWatch() as second:
    began_second = resident_memory()
    block = torch.ones(2**26)
    time.sleep(0.2)
    del block
print(json.dumps({"first": first.peak - began_first, "second": second.peak - began_second,
                  "first_peak": first.peak, "maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def test_a_stages_peak_is_its_own_and_the_process_keeps_the_runs_peak():
    """In a fresh process, a first stretch allocating 768 MiB sets the process's peak: its watch reads the
    high-water mark. A second allocating 256 MiB for 0.2 s (20 sampling intervals) reads about 256 MiB above where
    it began, not the first's peak, and afterwards ``getrusage`` (what GNU time prints) still reads the first's:
    nothing was reset."""
    if memory.peak_memory() is None:
        pytest.skip("this system does not report the peak resident memory")
    done = subprocess.run([sys.executable, "-c", WATCHED], capture_output=True, text=True, check=True)
    found = json.loads(done.stdout)
    assert found["first"] >= 0.95 * 768 * 2**20
    assert 0.9 * 256 * 2**20 <= found["second"] < 384 * 2**20
    assert found["maxrss"] >= found["first_peak"]


def test_a_rounds_real_and_canary_clients_are_bounded_by_their_binomial_tail():
    """100 clients and 500 canaries each taking part with the run's rate 0.05 (30 expected): the bound, six
    standard deviations above the mean of both together, is exceeded with probability below 1e-8 (scipy's Binomial
    tail, independently) and is far below the 120 rows a bound scaled from the real clients' would give; uniform
    participation adds the canaries' own tail to its fixed S; full participation counts everyone."""
    from scipy import stats

    poisson = SimpleNamespace(participation="poisson", sample_rate=0.05, clients=100, clients_per_round=None)
    bound = memory.round_rows(poisson, 500)
    assert stats.binom.sf(bound, 600, 0.05) < 1e-8 and 55 <= bound <= 65
    uniform = SimpleNamespace(participation="uniform", sample_rate=None, clients=100, clients_per_round=10)
    assert stats.binom.sf(memory.round_rows(uniform, 500) - 10, 500, 0.1) < 1e-8
    assert memory.round_rows(SimpleNamespace(participation="full", clients=20), 40) == 60
    assert memory.round_rows(poisson, 0) == memory.round_clients(poisson)


def test_round_sizes_are_the_runs_own_draws_and_never_above_the_bounds():
    """100 clients and 500 canaries at rate 0.05 over 3 rounds: the sizes are those the simulation's
    ``select_clients`` and the canary wrapper's ``sent`` give for the same seed (REPLACE_ONE: every canary whose
    coin comes up sends), another seed draws another schedule, and both stay below the Binomial bounds."""
    from types import SimpleNamespace as Training

    from auditkit.fl.sampling import select_clients
    from auditkit.mechanisms.guarantee import NeighboringRelation
    from auditkit.stages.canary import CanaryClients

    training = Training(participation="poisson", sample_rate=0.05, clients=100, clients_per_round=None, rounds=3)
    for seed in (0, 1):
        wrapper = CanaryClients(Training(name="inner"), first=100, canaries=500, size=8, norm=1.0, rate=0.05,
                                relation=NeighboringRelation.REPLACE_ONE, seed=seed)
        real = [len(select_clients(100, r, seed=seed, participation="poisson", sample_rate=0.05)) for r in (1, 2, 3)]
        rows = [n + len(wrapper.sent(r)) for n, r in zip(real, (1, 2, 3))]
        assert memory.round_sizes(training, 500, seed) == (max(real), max(rows))
        assert max(rows) < memory.round_rows(training, 500) and max(real) < memory.round_clients(training)
    assert memory.round_sizes(training, 500, 0) != memory.round_sizes(training, 500, 1)
    full = Training(participation="full", sample_rate=None, clients=20, clients_per_round=None, rounds=3)
    assert memory.round_sizes(full, 40, 0) == (20, 60)


def test_room_on_disk_is_what_the_file_system_has_free_and_none_in_memory(tmp_path):
    """A folder on a disk has its file system's free bytes; one on tmpfs (``/dev/shm``) has none, since a file
    there takes memory."""
    import shutil

    if memory.disk_room(str(tmp_path)) == 0:
        pytest.skip("the test's folder is itself in memory")
    assert memory.disk_room(str(tmp_path)) == pytest.approx(shutil.disk_usage(tmp_path).free, rel=0.01)
    if not Path("/dev/shm").is_dir():
        pytest.skip("no /dev/shm")
    assert memory.disk_room("/dev/shm") == 0
