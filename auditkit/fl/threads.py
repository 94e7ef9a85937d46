"""Thread pools sized to the CPUs other processes leave free, so a busy machine costs a run at most its fair share.

Torch's intra-op pool, OpenBLAS and numba each start one thread per CPU, and their threads spin at every parallel
region's barrier. Beside another process that keeps a CPU busy, a spinning thread waits a scheduler slice for its
descheduled peer at every small op: measured on 2 CPUs, the quick start took 556 s beside a 2-thread torch job
(106 s alone), and 165 s with its pools sized to the CPU left free (``benchmarks/bench_busy_machine.py``). ``FairShare.rebalance`` measures the CPU time
other processes used since its last call (``/proc/stat`` less this process's own) and sizes the pools to the CPUs
they left free; ``[limits] threads`` (``--threads``) pins them instead.
"""
from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass

import torch
from threadpoolctl import threadpool_limits

__all__ = ["FairShare", "fair_threads", "usable_cpus"]

FIRST_INTERVAL_S = 0.2  # the first call has no earlier sample: it watches the machine this long
# shorter intervals are not measured: /proc/stat and os.times count in ticks of 10 ms, too coarse for less
MIN_INTERVAL_S = 1.0


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


def set_threads(threads: int) -> None:
    """One pool size for torch's intra-op threads, the BLAS libraries loaded (threadpoolctl) and numba's pool."""
    torch.set_num_threads(threads)
    threadpool_limits(limits=threads, user_api="blas")
    numba = sys.modules.get("numba")  # sized only where something imported it: never load it for this
    if numba is not None:
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))


class FairShare:
    """Sizes the thread pools to this process's fair share of the machine (``rebalance``), or to ``threads``
    when given (a pinned size: the same on a busy machine as on an idle one)."""

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
        be read, the pools keep one thread per usable CPU."""
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
