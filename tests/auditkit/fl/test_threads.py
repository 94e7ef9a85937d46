"""Thread pools (auditkit.fl.threads): torch's and BLAS's at their fixed partition whatever the size asked, numba's
sized to the CPUs other processes leave free (measured on this machine with a real busy process beside the test),
and the kernels behind the rule: torch's bits change with its pool size, numba's loops' do not."""
import os
import subprocess
import sys
import time

import numba
import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_info, threadpool_limits

from auditkit.fl.threads import PARTITION_THREADS, FairShare, fair_threads, fix_partitions, set_threads, usable_cpus
from auditkit.mechanisms.laplace_uniform_kernels import exact_sums, interpolated_sums

BLAS_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@pytest.fixture(autouse=True)
def restore_threads():
    """The pools and the BLAS variables as the test found them (other tests in this worker run with those)."""
    before = torch.get_num_threads(), numba.get_num_threads(), {k: os.environ.get(k) for k in BLAS_VARIABLES}
    blas = {pool["filepath"]: pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}
    yield
    torch.set_num_threads(before[0])
    numba.set_num_threads(before[1])
    for name, value in before[2].items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    for path, threads in blas.items():
        threadpool_limits(limits={path: threads})


def _blas_threads() -> set[int]:
    return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}


@pytest.mark.parametrize(("cpus", "others", "threads"), [
    (2, 0.0, 2), (2, 1.0, 1), (2, 0.4, 2), (2, 0.6, 1), (2, 5.0, 1), (8, 3.2, 5), (16, 0.0, 16), (1, 0.0, 1)])
def test_the_fair_share_is_the_cpus_others_leave_free_rounded_and_at_least_one(cpus, others, threads):
    assert fair_threads(cpus, others) == threads


@pytest.mark.parametrize(("cpus", "others"), [(0, 0.0), (2, -0.1), (2, float("nan"))])
def test_a_fair_share_of_nothing_is_refused(cpus, others):
    with pytest.raises(ValueError, match="cpus must be >= 1"):
        fair_threads(cpus, others)


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_a_pinned_size_sizes_numba_and_leaves_torch_and_blas_at_their_partition(threads):
    torch.set_num_threads(2)
    assert FairShare(threads=threads).rebalance() == threads
    assert torch.get_num_threads() == PARTITION_THREADS == 1
    assert _blas_threads() == {1}
    assert all(os.environ[name] == "1" for name in BLAS_VARIABLES)  # an OpenBLAS loaded later starts at one thread
    assert numba.get_num_threads() == min(threads, numba.config.NUMBA_NUM_THREADS)
    with pytest.raises(ValueError, match="threads must be >= 1"):
        FairShare(threads=0)


def test_torch_kernels_bits_follow_its_pool_size_and_the_fixed_partition_removes_that():
    """The rule's premise, on this torch: a full sum of 10^6 floats adds one partial sum per thread, and sigmoid's
    vectorised kernel computes each thread's chunk tail in scalar code (117,603 values: 4 threads' chunks of 29,401 are
    no multiple of a vector, 8 floats with AVX2 or 16 with AVX-512); at 1 and 4 threads the bits differ. Under
    ``set_threads(4)`` torch stays at its partition and gives the 1-thread bits. (Should a torch release make
    both kernels partition-free, this test says so and the rule can be relaxed.)"""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1_000_003, generator=gen)
    tails = torch.randn(117_603, generator=gen) * 3
    kernels = {"sum": lambda: x.sum(), "sigmoid": lambda: torch.sigmoid(tails)}
    bits = {}
    for threads in (1, 4):
        torch.set_num_threads(threads)
        bits[threads] = {name: kernel() for name, kernel in kernels.items()}
    assert not any(torch.equal(bits[1][name], bits[4][name]) for name in kernels), \
        "torch's bits no longer depend on its pool size"
    set_threads(4)
    assert all(torch.equal(kernel(), bits[1][name]) for name, kernel in kernels.items())


def test_numbas_loops_give_the_same_bits_at_every_pool_size():
    """``laplace_uniform_kernels`` give each (output, candidate) pair to one thread, which sums its coordinates in
    order: the same float64 bits at 1 thread and at every size up to numba's pool (``NUMBA_NUM_THREADS``), 3,000
    pairs of 200 coordinates."""
    rng = np.random.default_rng(0)
    ys, xs = rng.normal(size=(30, 200)), rng.normal(size=(100, 200))
    rows, columns = np.repeat(np.arange(30), 100), np.tile(np.arange(100), 30)
    scales, coefficients = rng.uniform(0.5, 2.0, size=100), tuple(rng.normal(size=25))
    sums = {}
    for threads in range(1, numba.config.NUMBA_NUM_THREADS + 1):
        numba.set_num_threads(threads)
        sums[threads] = (interpolated_sums(ys, xs, rows, columns, scales, 1.5, coefficients),
                         exact_sums(ys, xs, rows, columns, scales, 1.5, 0.9))
    for threads, (interpolated, exact) in sums.items():
        assert np.array_equal(interpolated, sums[1][0]) and np.array_equal(exact, sums[1][1]), threads


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
    assert threads == fair_threads(usable_cpus(), share.others_busy)
    assert numba.get_num_threads() == min(threads, numba.config.NUMBA_NUM_THREADS)
    assert threads <= max(1, usable_cpus() - 1)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/stat")
def test_an_interval_too_short_to_measure_keeps_the_last_size():
    """/proc/stat counts in 10 ms ticks: a stage that took milliseconds says nothing about the machine, so the
    next call keeps the size the last measured interval gave (and measures from that interval's end later)."""
    share = FairShare(cpus=2)
    first = share.rebalance()
    measured = share.others_busy
    assert share.rebalance() == first and share.others_busy == measured
    assert numba.get_num_threads() == min(first, numba.config.NUMBA_NUM_THREADS)
