"""Run the app on Flower's Simulation Engine, then audit what its server recorded.

    python run.py                      # simulation, then: auditkit audit --recorded recording --out audit-out
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("AUDITKIT_RECORD_DIR", str(Path("recording").resolve()))

from flwr.simulation import run_simulation  # noqa: E402

from client_app import app as client_app  # noqa: E402
from server_app import app as server_app  # noqa: E402
from task import NUM_CLIENTS  # noqa: E402

if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "audit-out"
    run_simulation(server_app=server_app, client_app=client_app, num_supernodes=NUM_CLIENTS,
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0}})
    audit = [sys.executable, "-m", "auditkit.cli", "audit", "--recorded", os.environ["AUDITKIT_RECORD_DIR"],
             "--out", out, str(HERE / "audit.toml")]
    print("$", " ".join(audit[2:]))
    sys.exit(subprocess.call(audit))
