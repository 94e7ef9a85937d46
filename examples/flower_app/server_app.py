"""The ServerApp: FedAvg as usual, wrapped in auditkit's AuditStrategy (decodes the mechanism's messages,
aggregates with FedAvg, records the server's view for `auditkit audit --recorded`)."""
from __future__ import annotations

from flwr.app import ArrayRecord, ConfigRecord, Context
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from auditkit.flower import AuditStrategy
from task import (AUDIT_CONFIG, LR, MECHANISM, MECHANISM_PARAMS, NUM_CLIENTS, RECORD_DIR, RECORD_ROUNDS, ROUNDS, SEED,
                  make_model)

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    # half the clients train each round (AUDIT_CONFIG says so to the audit); a fifth evaluate. FedAvg sizes its
    # sample from the nodes connected before it waits for them, so the minimums pin round 1 to half as well.
    strategy = AuditStrategy(FedAvg(fraction_train=0.5, fraction_evaluate=0.2, min_available_nodes=NUM_CLIENTS,
                                    min_train_nodes=NUM_CLIENTS // 2), MECHANISM, seed=SEED,
                             record_dir=RECORD_DIR, record_rounds=RECORD_ROUNDS, config=AUDIT_CONFIG,
                             **MECHANISM_PARAMS)
    result = strategy.start(grid=grid, initial_arrays=ArrayRecord(make_model().state_dict()), num_rounds=ROUNDS,
                            train_config=ConfigRecord({"lr": LR}))
    print(f"final accuracy (clients' evaluation): {result.evaluate_metrics_clientapp}")
