"""The server side for Flower users' own apps: a strategy wrapper that decodes, aggregates and records.

``AuditStrategy(FedAvg(...), "jopeq-laplace", seed=0, eps=3.0, bits=8, record_dir="rec", config=...)`` wraps any
Flower strategy. Each training reply holds a mechanism's message (``mechanism_mod`` on the clients); the wrapper
decodes it under the client's shared seed (``UplinkProtocol.decode``), gives the wrapped strategy the model the
decoded update implies (global + x^), so its own aggregation runs unchanged (FedAvg weights by
``num-examples``), and at ``record_rounds`` writes what the server saw: the decoded updates and the global model
before the round (``auditkit.flower.recording``). Every round's uplink bits, train loss and, when the app
evaluates, its accuracy go to ``recording.json``. ``auditkit audit --recorded DIR`` then runs the audit's
inversion, probe / identification and distinguishing stages on the recording.

Flower's central DP: ``AuditStrategy(DifferentialPrivacyClientSideFixedClipping(FedAvg(...), z, C, m),
"dp-fedavg", seed=0, ...)`` (or the ``ServerSide`` wrapper), with the AuditStrategy outside and Flower's wrapper
inside, runs the wrapper unchanged: the replies carry the clients' models (clipped by ``fixedclipping_mod``, or raw
for server-side clipping) and reach the wrapper as they came; dp-fedavg's parameters are read from the wrapper
(``auditkit.flower.central_dp.mechanism_params``). A recorded round then holds the replies' model differences (the
server's view, clients named by their node ids, as ``ground_truth_mod`` names them) and n_t times the difference
the wrapper released (the aggregate view, the noisy sum); ``recording.json`` holds each round's noise std z C / m
and effective noise multiplier z n_t / m (``central_dp.release``).
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from auditkit.flower.install import require_flower

require_flower()

from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord  # noqa: E402
from flwr.serverapp import Grid  # noqa: E402
from flwr.serverapp.strategy import Strategy  # noqa: E402

from auditkit import mechanisms  # noqa: E402
from auditkit.config import ConfigError, from_dict, merge  # noqa: E402
from auditkit.fl.aggregation import UplinkProtocol  # noqa: E402
from auditkit.fl.aggregation import client_mechanism  # noqa: E402
from auditkit.flower.backend import flower_counterpart  # noqa: E402
from auditkit.flower.recording import write_manifest, write_server_round  # noqa: E402
from auditkit.flower.records import PAYLOAD, flatten_record, read_payload, unflatten_like  # noqa: E402
from auditkit.mechanisms.views import View

__all__ = ["AuditStrategy"]

_METRIC_NAMES = {"train_loss": ("train-loss", "train_loss", "loss"), "test_accuracy": ("accuracy", "eval-acc"),
                 "test_loss": ("loss", "eval-loss")}


def _metric(record: MetricRecord | None, names: tuple[str, ...]) -> float:
    for name in names:
        if record is not None and name in record:
            return float(record[name])
    return float("nan")


class AuditStrategy(Strategy):
    """Wrap ``strategy`` so that it aggregates the updates the clients' ``mechanism`` messages decode to.

    Args:
        strategy: any Flower strategy (its ``arrayrecord_key`` must be ``"arrays"``, Flower's default); for
            ``"dp-fedavg"``, Flower's ``DifferentialPrivacy{Client,Server}SideFixedClipping`` wrapper.
        mechanism: the registered mechanism the clients' ``mechanism_mod`` uses, with the same ``params``; or
            ``"dp-fedavg"``, whose parameters are the wrapper's (``params`` may add ``delta``).
        seed: the run's seed, shared with the clients.
        record_dir: where the recording goes (None: nothing is recorded).
        record_rounds: the rounds whose server view is recorded.
        config: auditkit config tables describing the app for the audit (``{"data": {"dataset": ...},
            "training": {"model": ..., "clients": ..., "tau": ..., "batch_size": ..., "lr": ...}}``); checked
            here, so a wrong key fails before the first round.
    """

    def __init__(self, strategy: Strategy, mechanism: str, *, seed: int, record_dir: str | Path | None = None,
                 record_rounds: Iterable[int] = (1,), config: dict[str, Any] | None = None, **params: Any) -> None:
        self.strategy = strategy
        self.counterpart = flower_counterpart(mechanisms.mechanism_class(mechanism).protocol)
        if self.counterpart is not None:  # the wrapped strategy is Flower's own (central DP): it runs unchanged
            params = self.counterpart.mechanism_params(strategy, params)
            self.protocol = None
        else:
            self.protocol = UplinkProtocol(client_mechanism(mechanism, seed, params), seed)
        self.record_dir = None if record_dir is None else Path(record_dir)
        self.record_rounds = sorted({int(r) for r in record_rounds})
        self.config = merge(config or {}, {"seed": seed, "mechanism": {"name": mechanism, **params},
                                           "training": {"checkpoints": self.record_rounds}})
        try:
            from_dict(self.config)
        except ConfigError as err:
            raise ValueError(f"AuditStrategy config: {err}") from None
        self.rounds: list[dict[str, Any]] = []
        self._global: dict[int, ArrayRecord] = {}
        self._lr: dict[int, float] = {}

    # ------------------------------------------------------------------ train

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        self._global = {server_round: arrays}  # the model the clients start from: the base of their updates
        self._lr[server_round] = float(config.get("lr", self.config.get("training", {}).get("lr", float("nan"))))
        return self.strategy.configure_train(server_round, arrays, config, grid)

    def aggregate_train(self, server_round: int,
                        replies: Iterable[Message]) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = [r for r in replies if not r.has_error()]
        start = flatten_record(self._global[server_round])
        if self.counterpart is not None:
            return self._aggregate_release(server_round, replies, start)
        clients, decoded, bits = [], [], []
        for reply in replies:
            payload, client, round_ = read_payload(reply.content[PAYLOAD])
            update = self.protocol.decode(payload, client, round_)
            reply.content["arrays"] = unflatten_like(start + update, self._global[server_round])
            clients.append(client)
            decoded.append(update)
            bits.append(8 * len(payload))
        arrays, metrics = self.strategy.aggregate_train(server_round, replies)
        self._record(server_round, start, clients, torch.stack(decoded) if decoded else None, bits, metrics)
        return arrays, metrics

    def _aggregate_release(self, server_round: int, replies: list[Message],
                           start: torch.Tensor) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Flower's DP wrapper aggregates the replies as they came (the counterpart's ``release``); the replies'
        model differences and n_t times the released difference are recorded."""
        if not replies:  # Flower's wrapper releases nothing then; neither is anything recorded but the round
            arrays, metrics = self.strategy.aggregate_train(server_round, replies)
            self._record(server_round, start, [], None, [], metrics)
            return arrays, metrics
        arrays, metrics, outcome = self.counterpart.release(self.strategy, server_round, replies, start)
        self._record(server_round, start, [int(r.metadata.src_node_id) for r in replies], outcome.views[View.SERVER],
                     outcome.bits, metrics, aggregate=outcome.views[View.AGGREGATE], stats=outcome.stats)
        return arrays, metrics

    def _record(self, server_round: int, start: torch.Tensor, clients: list[int], server: torch.Tensor | None,
                bits: list[int], metrics: MetricRecord | None, *, aggregate: torch.Tensor | None = None,
                stats: dict[str, float] | None = None) -> None:
        """The round's entry in ``recording.json`` and, at a record round with replies, its server view (and the
        aggregate view of a DP wrapper's release)."""
        entry = {"round": server_round, "clients": clients, "bits": bits, "lr": self._lr[server_round],
                 "train_loss": _metric(metrics, _METRIC_NAMES["train_loss"]),
                 "test_loss": float("nan"), "test_accuracy": float("nan"), "coordinates": int(start.numel())}
        self.rounds.append(entry if stats is None else {**entry, "stats": stats})
        if self.record_dir is not None:
            if server_round in self.record_rounds and server is not None:
                write_server_round(self.record_dir, server_round, clients=clients, global_before=start,
                                   server=server, lr=self._lr[server_round], aggregate=aggregate)
            write_manifest(self.record_dir, self.config, self.rounds)

    # ------------------------------------------------------------------ evaluate, summary: the wrapped strategy's

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid) -> Iterable[Message]:
        return self.strategy.configure_evaluate(server_round, arrays, config, grid)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        metrics = self.strategy.aggregate_evaluate(server_round, replies)
        if self.rounds and self.rounds[-1]["round"] == server_round:
            self.rounds[-1]["test_accuracy"] = _metric(metrics, _METRIC_NAMES["test_accuracy"])
            self.rounds[-1]["test_loss"] = _metric(metrics, _METRIC_NAMES["test_loss"])
            if self.record_dir is not None:
                write_manifest(self.record_dir, self.config, self.rounds)
        return metrics

    def summary(self) -> None:
        self.strategy.summary()
