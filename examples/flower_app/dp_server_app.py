"""The ServerApp of the central-DP variant: FedAvg inside Flower's DifferentialPrivacyClientSideFixedClipping,
inside auditkit's AuditStrategy (which records the clients' clipped models and the noisy aggregate the wrapper
releases, for `auditkit audit --recorded`)."""
from __future__ import annotations

from flwr.app import ArrayRecord, ConfigRecord, Context
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import DifferentialPrivacyClientSideFixedClipping, FedAvg

from auditkit.flower import AuditStrategy
from task import (DP_AUDIT_CONFIG, DP_CLIP, DP_NOISE_MULTIPLIER, LR, NUM_CLIENTS, RECORD_DIR, RECORD_ROUNDS, ROUNDS,
                  SEED, make_model)

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    # every client trains every round (num_sampled_clients = NUM_CLIENTS is then the realised count); a fifth evaluate
    dp = DifferentialPrivacyClientSideFixedClipping(
        FedAvg(fraction_train=1.0, fraction_evaluate=0.2, min_available_nodes=NUM_CLIENTS, min_train_nodes=NUM_CLIENTS),
        noise_multiplier=DP_NOISE_MULTIPLIER, clipping_norm=DP_CLIP, num_sampled_clients=NUM_CLIENTS)
    strategy = AuditStrategy(dp, "dp-fedavg", seed=SEED, record_dir=RECORD_DIR, record_rounds=RECORD_ROUNDS,
                             config=DP_AUDIT_CONFIG)
    result = strategy.start(grid=grid, initial_arrays=ArrayRecord(make_model().state_dict()), num_rounds=ROUNDS,
                            train_config=ConfigRecord({"lr": LR}))
    print(f"final accuracy (clients' evaluation): {result.evaluate_metrics_clientapp}")
