"""Benchmark: each stage's peak resident memory and time as the model grows (P: 25.8k, 0.6M, 11.2M, 23.5M
parameters) and as the clients grow (K: 10, 100, 1,000), with the baselines of the same run beside them: the
process before any stage (the interpreter, torch, the data and the model: what every stage starts from) and one
plain fwd+bwd step of the model on a batch of 256 (the hardware's big-batch throughput, as time per example).

Every cell is one ``auditkit audit`` in its own process (``Audit.run``'s stage events carry each stage's peak,
``auditkit.fl.memory.PeakWatch``). The attack budgets are the defaults' shape at a
smaller size (``BUDGET``: fewer iterations, targets and trials), since memory does not grow with them; the
pool is the default 200 and the probe's 16 targets, so what scales with the model is the default's.

    python benchmarks/bench_scale.py [--cells p,k] [--out DIR]     # DIR/scale.json, scale.md, scale.png
    python benchmarks/bench_scale.py --cells p --models 11.2M --include DIR/scale.json --out DIR2  # rows joined
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODELS = {  # P -> the model and its data (the ResNets with their usual stem: 1x1 at layer 4 on 32x32 images)
    "25.8k": {"training": {"model": "mlp"}, "data": {"dataset": "mnist-5k"}},
    "0.6M": {"training": {"model": "mlp200"}, "data": {"dataset": "cifar10"}},
    "11.2M": {"training": {"model": "torchvision:resnet18"}, "data": {"dataset": "cifar10"}},
    "23.5M": {"training": {"model": "torchvision:resnet50"}, "data": {"dataset": "cifar10"}},
}
CLIENTS = (10, 100, 1000)
BUDGET = {"inversion": {"iterations": 10, "targets": 2, "restarts": 1}, "probe": {"iterations": 10, "sweep": False},
          "identification": {"trials": 200}, "distinguish": {"trials": 20000, "search": False}}

CELL = r"""
import json, sys, time
from auditkit.audit import Audit
from auditkit.config import from_dict
from auditkit.fl.memory import resident_memory
config, out = from_dict(json.loads(sys.argv[1])), sys.argv[2]
stages, started = {}, {}
start = time.perf_counter()
audit = Audit(config, out=out)
before = resident_memory()
def event(kind, **info):
    if kind == "stage" and info["status"] == "start":
        started[info["stage"]] = time.perf_counter()
    elif kind == "stage" and info["status"] == "done":
        stages[info["stage"]] = {"seconds": time.perf_counter() - started[info["stage"]], "peak": info["peak"]}
audit.run(on_event=event)
whole = max(s["peak"] for s in stages.values())  # the largest stage's peak is the run's
print(json.dumps({"before": before, "stages": stages, "whole": whole, "seconds": time.perf_counter() - start}))
"""

STEP = r"""
import json, sys, time, torch
from auditkit.models import create_model
from auditkit.fl.memory import resident_memory
cell = json.loads(sys.argv[1])
shape = (1, 28, 28) if cell["data"]["dataset"] == "mnist-5k" else (3, 32, 32)
torch.set_num_threads(1)
model = create_model(cell["training"]["model"], input_shape=shape, small_stem=cell["training"].get("small_stem", False))
x, y = torch.rand(256, *shape), torch.randint(0, 10, (256,))
def step():
    model.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
step()
start = time.perf_counter(); step(); seconds = time.perf_counter() - start
print(json.dumps({"per_example": seconds / 256, "parameters": sum(p.numel() for p in model.parameters()),
                  "resident": resident_memory()}))
"""


def config(model: str, clients: int, data_dir: str, rate: float) -> dict:
    """The audit of one cell: ``model``'s P, ``clients`` K under Poisson participation at ``rate``, 2 rounds of
    15 local steps of batch 8, DP-FedAvg, every other setting at its default but ``BUDGET``."""
    cell = json.loads(json.dumps(MODELS[model]))
    if cell["data"]["dataset"] == "cifar10":
        cell["data"]["data_dir"] = data_dir
    cell["training"].update(clients=clients, rounds=2, participation="poisson", sample_rate=rate,
                            batch_size=8)
    cell["mechanism"] = {"name": "dp-fedavg", "noise_multiplier": 1.0, "clip": 1.0}
    return {**cell, **BUDGET, "seed": 0}


def run(script: str, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode} (-9: killed, out of memory?)"])[-1]
        raise SystemExit(f"a cell failed: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(cells: list[tuple[str, int, float]], data_dir: str, kept: Path) -> list[dict]:
    """Each cell's row; the rows so far are written to ``kept`` after each cell, so a run stopped part-way keeps
    them (``--include`` joins them to a later run's)."""
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for model, clients, rate in cells:
            cell = config(model, clients, data_dir, rate)
            baseline = run(STEP, json.dumps(cell))
            began = time.perf_counter()
            found = run(CELL, json.dumps(cell), str(Path(folder) / f"{model}-{clients}"))
            rows.append({"model": model, "clients": clients, "rate": rate, "baseline": baseline, **found})
            kept.write_text(json.dumps(rows, indent=1))
            print(f"P {model:>6} K {clients:>5}: {time.perf_counter() - began:7.1f} s, whole peak "
                  f"{found['whole'] / 2**30:6.2f} GiB, " + ", ".join(
                      f"{name} {s['seconds']:.0f} s / {s['peak'] / 2**30:.2f} GiB" for name, s in found["stages"].items()),
                  flush=True)
    return rows


def table(rows: list[dict]) -> str:
    stages = list(dict.fromkeys(name for row in rows for name in row["stages"]))
    lines = ["| P | K | a round | before (GiB) | " + " | ".join(f"{s} peak (GiB) / time (s)" for s in stages)
             + " | plain step (ms/example) | train time / plain steps of its examples |",
             "|---|---|---|---|" + "---|" * len(stages) + "---|---|"]
    for row in rows:
        cells = [f"{row['stages'][s]['peak'] / 2**30:.2f} / {row['stages'][s]['seconds']:.0f}" if s in row["stages"]
                 else "-" for s in stages]
        plain = row["baseline"]["per_example"]
        train = row["stages"].get("train", {}).get("seconds", math.nan)
        examples = 2 * row["rate"] * row["clients"] * 15 * 8  # rounds x clients a round x tau x batch, expected
        lines.append(f"| {row['model']} | {row['clients']:,} | {row['rate']:g} | {row['before'] / 2**30:.2f} | "
                     + " | ".join(cells)
                     + f" | {1000 * plain:.3g} | {train / (examples * plain):.1f} |")
    return "\n".join(lines)


def figure(rows: list[dict], path: Path) -> None:
    import matplotlib
    import matplotlib.ticker
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_p, by_k) = plt.subplots(1, 2, figsize=(11, 4.2))
    for axis, key, label in ((by_p, "parameters", "P (parameters)"), (by_k, "clients", "K (clients)")):
        chosen = [r for r in rows if (r["rate"] == 1.0 if key == "parameters" else r["rate"] == 0.1)]
        xs = [r["baseline"]["parameters"] if key == "parameters" else r["clients"] for r in chosen]
        if len(xs) < 2:
            axis.set_visible(False)
            continue
        for stage in dict.fromkeys(s for r in chosen for s in r["stages"]):
            axis.plot(xs, [r["stages"].get(stage, {}).get("peak", math.nan) / 2**30 for r in chosen], "o-",
                      label=stage)
        axis.plot(xs, [r["before"] / 2**30 for r in chosen], "k--", label="baseline: before any stage")
        if key == "parameters":
            linear = [chosen[-1]["stages"]["train"]["peak"] / 2**30 * x / xs[-1] for x in xs]
            axis.plot(xs, linear, ":", color="grey", label="linear in P (through the largest train peak)")
        axis.set(xscale="log", yscale="log", xlabel=label, ylabel="peak resident memory (GiB)")
        axis.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # the decades alone: no crowded labels
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=7)
    by_p.set_title("as the model grows (K = 10, all in every round)")
    by_k.set_title("as the clients grow (P = 25.8k, a tenth a round)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True, help="a folder with cifar-10-batches-py (write_cifar10_files.py)")
    parser.add_argument("--cells", default="p,k", help="p: the models at K = 10; k: the clients at P = 25.8k")
    parser.add_argument("--models", default=",".join(MODELS), help="the P cells to run, of " + ", ".join(MODELS))
    parser.add_argument("--out", type=Path, default=Path("scale-benchmark"))
    parser.add_argument("--include", type=Path, action="append", default=[],
                        help="an earlier run's scale.json whose rows join the table and figure (cells run apart)")
    args = parser.parse_args()
    wanted = [cell for cell in args.cells.split(",") if cell]
    cells = [(m, 10, 1.0) for m in args.models.split(",")] if "p" in wanted else []  # every client every round
    cells += [("25.8k", k, 0.1) for k in CLIENTS] if "k" in wanted else []  # a tenth of them each round
    earlier = [row for path in args.include for row in json.loads(path.read_text())]
    args.out.mkdir(parents=True, exist_ok=True)
    rows = sorted(earlier + measure(cells, args.data_dir, args.out / "cells.json"),
                  key=lambda row: (row["rate"] != 1.0, row["baseline"]["parameters"], row["clients"]))
    (args.out / "scale.json").write_text(json.dumps(rows, indent=1))
    (args.out / "scale.md").write_text(table(rows) + "\n")
    figure(rows, args.out / "scale.png")
    print(table(rows))


if __name__ == "__main__":
    main()
