"""Run the app on Flower's Simulation Engine, then audit what its server recorded.

    python run.py [OUT]          # the JoPEQ app; then: auditkit audit --recorded recording --out OUT audit.toml
    python run.py --dp [OUT]     # the central-DP variant (Flower's DifferentialPrivacyClientSideFixedClipping with
                                 # fixedclipping_mod), audited as dp-fedavg with dp_audit.toml
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

from task import NUM_CLIENTS  # noqa: E402

if __name__ == "__main__":
    dp = "--dp" in sys.argv[1:]
    args = [a for a in sys.argv[1:] if a != "--dp"]
    out = args[0] if args else "audit-out"
    if dp:
        from dp_client_app import app as client_app
        from dp_server_app import app as server_app
    else:
        from client_app import app as client_app
        from server_app import app as server_app
    run_simulation(server_app=server_app, client_app=client_app, num_supernodes=NUM_CLIENTS,
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0}})
    audit = [sys.executable, "-m", "auditkit.cli", "audit", "--recorded", os.environ["AUDITKIT_RECORD_DIR"],
             "--out", out, str(HERE / ("dp_audit.toml" if dp else "audit.toml"))]
    print("$", " ".join(audit[2:]))
    sys.exit(subprocess.call(audit))
