"""Benchmark: the cost of torch's and BLAS's fixed partition (``auditkit.fl.threads.PARTITION_THREADS``, one thread)
against the pools as they were before it (torch and BLAS at one thread per CPU), alone and beside one CPU-bound job
(``bench_busy_machine``'s: a pure-Python loop, a small torch training loop). numba's pool follows the load in both.
Every cell is timed in this run; the ratio is each time over the fixed partition alone. Each cell also says whether
its results.json has the numbers of the fixed partition alone (timings aside): the fixed partition's must.

    python benchmarks/bench_thread_partition.py [--config audit.toml] [--jobs python,torch]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from auditkit.fl.threads import PARTITION_THREADS, usable_cpus

_spec = importlib.util.spec_from_file_location("bench_busy_machine", Path(__file__).with_name("bench_busy_machine.py"))
busy_machine = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(busy_machine)

# the audit with torch's and BLAS's partition replaced (argv: partition, then the audit's arguments)
RUN = ("import sys\nimport auditkit.fl.threads as threads\nthreads.PARTITION_THREADS = int(sys.argv[1])\n"
       "from auditkit.cli.app import main\nmain(sys.argv[2:])")


def timed_audit(config: Path, out: Path, partition: int, job: str | None) -> float:
    """Seconds of wall time of ``auditkit audit config`` with torch and BLAS at ``partition`` threads, beside
    ``job`` (a name of ``bench_busy_machine.JOBS``) when given."""
    busy = None if job is None else subprocess.Popen([sys.executable, "-c", busy_machine.JOBS[job]])
    command = [sys.executable, "-c", RUN, str(partition), "audit", str(config), "--out", str(out), "--overwrite"]
    try:
        time.sleep(0.5 if busy else 0.0)  # the job up and spinning before the audit starts
        start = time.perf_counter()
        environment = {k: v for k, v in os.environ.items()
                       if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
        subprocess.run(command, check=True, capture_output=True, env=environment)
        return time.perf_counter() - start
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()


def numbers(results: Path) -> dict[str, float]:
    """Every numeric leaf of a results.json but its timings (keys ending in ``seconds``), by path."""
    found: dict[str, float] = {}

    def walk(node, path: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{path}/{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, f"{path}[{index}]")
        elif isinstance(node, (int, float)) and not isinstance(node, bool) and not path.endswith("seconds"):
            found[path] = node

    walk(json.loads(results.read_text()), "")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, help="the audit to time (default: a 2-setting, 5-round quick start)")
    parser.add_argument("--jobs", default="python,torch", help="busy jobs beside it, comma-separated: python, torch")
    args = parser.parse_args()
    cpus = usable_cpus()
    with tempfile.TemporaryDirectory() as folder:
        config = args.config or Path(folder) / "audit.toml"
        if args.config is None:
            config.write_text(busy_machine.SMALL_AUDIT)
        cells, reference = {}, None
        for job in [None, *args.jobs.split(",")]:
            for label, partition in (("fixed (1)", PARTITION_THREADS), (f"{cpus} per CPU", cpus)):
                out = Path(folder) / "out"
                seconds = timed_audit(config, out, partition, job)
                found = numbers(out / "results.json")
                reference = found if reference is None else reference
                cells[job, label] = seconds, found == reference
                print(f"{job or 'alone':<8} {label:<12} {seconds:8.1f} s  same numbers: {found == reference}",
                      flush=True)
        base = cells[None, "fixed (1)"][0]
        print(f"\n{cpus} CPUs; ratio: time over the fixed partition alone ({base:.1f} s)")
        print(f"{'beside':<8} {'partition':<12} {'s':>8} {'ratio':>7}  same numbers")
        for (job, label), (seconds, same) in cells.items():
            print(f"{job or 'nothing':<8} {label:<12} {seconds:8.1f} {seconds / base:7.2f}  {same}")


if __name__ == "__main__":
    main()
