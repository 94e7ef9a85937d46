"""Thread pools: results computed with a fixed partition, the pools that cannot change them sized to the CPUs other
processes leave free.

The rule: a pool may follow the load only where its size cannot change a result.

* torch's intra-op pool and the BLAS libraries (threadpoolctl's ``blas``: OpenBLAS under numpy and scipy) compute
  with ``PARTITION_THREADS`` (one) thread, always. Their kernels split the work into one chunk per thread, and the
  chunks change the bits: a full reduction over more than 32,768 elements adds one partial sum per thread, a
  vectorised element-wise kernel computes each chunk's tail in scalar code (``sigmoid`` differs there by an ulp),
  convolutions' gradients, LAPACK's SVD and BLAS's ``ddot`` (numpy's ``np.dot`` of vectors, Opacus's PRV
  accountant) split their sums, so one config and seed gave different numbers at 1, 2 and 4 threads. One thread is
  the one partition that needs no spinning peer on a busy machine; the same numbers come out on any number of CPUs
  (on the same instruction set and library versions).
* numba's pool follows the load: auditkit's parallel loops (``auditkit.mechanisms.laplace_uniform_kernels``) give
  each item (an output and candidate pair) to one thread, which sums its coordinates in order, so the item's value
  is the same whichever thread and however many compute it.

A pool's threads spin at every parallel region's barrier, and beside another process that keeps a CPU busy a
spinning thread waits a scheduler slice for its descheduled peer: measured on 2 CPUs, the quick start took 556 s
beside a 2-thread torch job (106 s alone) with one thread per CPU in every pool (``benchmarks/bench_busy_machine.py``).
The fixed partition costs little there: a 2-setting quick start took 0.96x its one-thread time alone with torch and
BLAS at one thread per CPU, 1.72x against 0.92x beside a busy process, 2.50x against 1.63x beside a 2-thread torch
job (``benchmarks/bench_thread_partition.py``). ``FairShare.rebalance`` measures the CPU time other processes used
since its last call (``/proc/stat`` less this process's own) and sizes numba's pool to the CPUs they left free;
``[limits] threads`` (``--threads``) pins it instead. Neither changes a result.
"""
from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass

import torch
from threadpoolctl import threadpool_limits

__all__ = ["PARTITION_THREADS", "FairShare", "fair_threads", "fix_partitions", "set_threads", "usable_cpus"]

FIRST_INTERVAL_S = 0.2  # the first call has no earlier sample: it watches the machine this long
# shorter intervals are not measured: /proc/stat and os.times count in ticks of 10 ms, too coarse for less
MIN_INTERVAL_S = 1.0
PARTITION_THREADS = 1  # torch's intra-op pool and BLAS's: the partition every result is computed with
# read by an OpenBLAS or MKL loaded later (scipy.linalg's OpenBLAS loads on its first import), which threadpoolctl
# cannot reach before it is loaded
_BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the OS has one)."""
    allowed = _cpu_set()
    return len(allowed) if allowed is not None else os.cpu_count() or 1


def fair_threads(cpus: int, others_busy: float) -> int:
    """Threads per pool for ``cpus`` CPUs of which other processes keep ``others_busy`` busy (in CPUs, averaged):
    the CPUs they leave free, rounded, at least 1 and at most ``cpus``."""
    if cpus < 1 or not math.isfinite(others_busy) or others_busy < 0:
        raise ValueError(f"cpus must be >= 1 and others_busy a finite number >= 0, got {cpus} and {others_busy}")
    return max(1, min(cpus, math.floor(cpus - others_busy + 0.5)))


def _cpu_set() -> set[int] | None:
    return os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None


def _machine_busy_s() -> float | None:
    """Busy CPU seconds since boot of the CPUs this process may run on (``/proc/stat``'s ``cpuN`` lines: user,
    nice, system, irq, softirq and steal); None where there is no ``/proc/stat``."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            lines = stat.read().splitlines()
    except OSError:
        return None
    allowed, ticks = _cpu_set(), 0
    for line in lines:
        fields = line.split()
        if not fields or not fields[0].startswith("cpu") or not fields[0][3:].isdigit():
            continue
        if allowed is not None and int(fields[0][3:]) not in allowed:
            continue
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[1:9])
        ticks += user + nice + system + irq + softirq + steal
    return ticks / os.sysconf("SC_CLK_TCK")


def _own_busy_s() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


@dataclass(frozen=True)
class _Sample:
    wall: float
    machine: float
    own: float


def _sample() -> _Sample | None:
    machine = _machine_busy_s()
    return None if machine is None else _Sample(time.monotonic(), machine, _own_busy_s())


def fix_partitions() -> None:
    """torch's intra-op pool and every BLAS library, loaded now or later, at ``PARTITION_THREADS`` threads (module
    docstring: their partition changes the bits of a result)."""
    if torch.get_num_threads() != PARTITION_THREADS:
        torch.set_num_threads(PARTITION_THREADS)
    for variable in _BLAS_THREAD_VARIABLES:
        os.environ[variable] = str(PARTITION_THREADS)
    threadpool_limits(limits=PARTITION_THREADS, user_api="blas")


def set_threads(threads: int) -> None:
    """The pools whose size changes no result (numba's) at ``threads`` threads; torch's and BLAS's at their fixed
    partition (``fix_partitions``)."""
    fix_partitions()
    numba = sys.modules.get("numba")  # sized only where something imported it: never load it for this
    if numba is not None:
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))


class FairShare:
    """Sizes the pools that follow the load (numba's) to this process's fair share of the machine (``rebalance``),
    or to ``threads`` when given (a pinned size: the same on a busy machine as on an idle one); torch's and BLAS's
    keep their fixed partition (``fix_partitions``) either way."""

    def __init__(self, threads: int | None = None, cpus: int | None = None) -> None:
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.threads = threads
        self.cpus = usable_cpus() if cpus is None else cpus
        self.others_busy: float | None = None  # CPUs other processes kept busy over the last interval
        self.size: int | None = None  # the pools' size the last call set
        self._last: _Sample | None = None

    def rebalance(self) -> int:
        """Measure the CPUs other processes kept busy since the last measurement (the first call: over
        ``FIRST_INTERVAL_S``; a call less than ``MIN_INTERVAL_S`` after it keeps the last size), size every pool to
        ``fair_threads`` of them, and return the size; a pinned size is set as is. Where the machine's load cannot
        be read, the pools that follow the load keep one thread per usable CPU."""
        if self.threads is not None:
            set_threads(self.threads)
            return self.threads
        now = _sample()
        if now is None:
            return self._set(self.cpus)
        if self._last is None:
            time.sleep(FIRST_INTERVAL_S)
            self._last, now = now, _sample()
        elif now.wall - self._last.wall < MIN_INTERVAL_S:
            return self._set(self.size or self.cpus)  # too short to measure: the size the last interval gave
        others = (now.machine - self._last.machine) - (now.own - self._last.own)
        self.others_busy = max(0.0, others / (now.wall - self._last.wall))
        self._last = now
        return self._set(fair_threads(self.cpus, self.others_busy))

    def _set(self, threads: int) -> int:
        set_threads(threads)
        self.size = threads
        return threads
