"""Thread pools sized to the CPUs other processes leave free (auditkit.fl.threads), measured on this machine with a
real busy process beside the test."""
import subprocess
import sys
import time

import numba
import pytest
import torch
from threadpoolctl import threadpool_info

from auditkit.fl.threads import FairShare, fair_threads, set_threads, usable_cpus


@pytest.fixture(autouse=True)
def restore_threads():
    before = torch.get_num_threads()
    yield
    set_threads(before)


@pytest.mark.parametrize(("cpus", "others", "threads"), [
    (2, 0.0, 2), (2, 1.0, 1), (2, 0.4, 2), (2, 0.6, 1), (2, 5.0, 1), (8, 3.2, 5), (16, 0.0, 16), (1, 0.0, 1)])
def test_the_fair_share_is_the_cpus_others_leave_free_rounded_and_at_least_one(cpus, others, threads):
    assert fair_threads(cpus, others) == threads


@pytest.mark.parametrize(("cpus", "others"), [(0, 0.0), (2, -0.1), (2, float("nan"))])
def test_a_fair_share_of_nothing_is_refused(cpus, others):
    with pytest.raises(ValueError, match="cpus must be >= 1"):
        fair_threads(cpus, others)


def test_a_pinned_size_sets_torch_blas_and_numba_alike():
    assert FairShare(threads=1).rebalance() == 1
    assert torch.get_num_threads() == 1 and numba.get_num_threads() == 1
    assert all(pool["num_threads"] == 1 for pool in threadpool_info() if pool["user_api"] == "blas")
    with pytest.raises(ValueError, match="threads must be >= 1"):
        FairShare(threads=0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/stat")
def test_a_process_busy_beside_the_run_takes_its_cpu_out_of_the_pools():
    """A busy loop in another process for 1.5 s is measured as about one CPU kept busy (others, e.g. another test
    worker, may add to it: only the lower side is asserted), and the pools shrink to the CPUs left."""
    share = FairShare()
    share.rebalance()
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(1.5)
        threads = share.rebalance()
    finally:
        busy.kill()
        busy.wait()
    assert share.others_busy >= 0.8
    assert threads == fair_threads(usable_cpus(), share.others_busy) == torch.get_num_threads()
    assert threads <= max(1, usable_cpus() - 1)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/stat")
def test_an_interval_too_short_to_measure_keeps_the_last_size():
    """/proc/stat counts in 10 ms ticks: a stage that took milliseconds says nothing about the machine, so the
    next call keeps the size the last measured interval gave (and measures from that interval's end later)."""
    share = FairShare(cpus=2)
    first = share.rebalance()
    measured = share.others_busy
    assert share.rebalance() == first == torch.get_num_threads() and share.others_busy == measured
