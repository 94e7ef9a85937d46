"""``training.backend = "flower"``: the same FL training on Flower's Simulation Engine (Ray backend).

The server side is auditkit's own training loop (``FederatedSimulation``) running inside a Flower ``ServerApp``;
only the round's exchange changes (:meth:`FlowerSimulation._exchange`):

1. the server sends each selected client a Flower ``Message`` with the global model (``"arrays"``) and the round,
   learning rate and client id (``"config"``);
2. the client, a ``ClientApp`` in a Ray actor, rebuilds its side from the config once per process (its data
   partition, the model, the mechanism), draws its batches from the same keyed streams, trains with auditkit's
   local-training code (its momentum kept in the node's ``context.state``; with ``[dp_sgd]``, DP-SGD on Poisson
   batches with the same keyed noise, ``auditkit.fl.local_training.local_batches``) and encodes the update with the
   mechanism under the round's shared seed (``UplinkProtocol.encode``);
3. the mechanism's real bytes come back in the reply (``records.PAYLOAD``); the server decodes and aggregates
   them with the same protocol object (``UplinkProtocol.receive``) and records the same views at the checkpoints.

The client's true update travels beside the payload (``records.TRUTH``) for the harness alone: it scores the
uplink SNR and the attacks, as the built-in simulator's ground truth does, and never reaches the protocol. Client
k is the k-th node in node-id order for the whole run, so its momentum stays with it.

Equivalence with ``builtin``: the same keyed randomness drives both, so global parameters agree to float
tolerance and messages bit for bit (``tests/auditkit/flower/test_backend.py``). Models with dropout draw their
masks per client here (keyed by round and client) and per round there, so they differ.
"""
from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from auditkit.config import AuditConfig, ConfigError, FlowerConfig
from auditkit.mechanisms.protocol import RoundOutcome
from auditkit.fl.local_training import local_batches, train_clients_batched, train_clients_sequential
from auditkit.fl.simulation import FederatedSimulation, RoundRecord, SimulationResult, check_finite
from auditkit.flower.install import require_flower
from auditkit.mechanisms.randomness import derive_seed

__all__ = ["FlowerSimulation", "check_protocol", "check_resources", "connect_ray"]

MOMENTUM = "auditkit.momentum"  # the node's momentum buffer in context.state
NODE_WAIT_S = 120.0  # how long the server waits for the simulated nodes to register


# ------------------------------------------------------------------ Ray


def _address(value: str) -> tuple[str, int] | None:
    """(host, port) of ``host:port`` or ``ray://host:port``; None when it has no port (e.g. ``auto``)."""
    text = value.removeprefix("ray://")
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def check_resources(flower: FlowerConfig, cpus: float, gpus: float, where: str) -> None:
    """One client must fit on what Ray has (``cpus``, ``gpus`` of ``where``), or a ConfigError names the key."""
    if flower.num_cpus > cpus:
        raise ConfigError(f"flower.num_cpus = {flower.num_cpus:g} is more than the {cpus:g} CPUs of {where}: "
                          f"give at most {cpus:g}")
    if flower.num_gpus > gpus:
        raise ConfigError(f"flower.num_gpus = {flower.num_gpus:g} is more than the {gpus:g} GPUs of {where}: "
                          f"give at most {gpus:g}")


def connect_ray(flower: FlowerConfig, *, timeout_s: float = 5.0) -> None:
    """Start Ray on this machine, or connect to the cluster at ``flower.ray_address``, after checking what can be
    checked first (the address answers, a client fits); every failure is a one-line ConfigError naming the key."""
    import ray

    address = flower.ray_address
    if address is None:
        check_resources(flower, float(os.cpu_count() or 1), float(torch.cuda.device_count()), "this machine")
    else:
        target = _address(address)
        if target is None and address != "auto":
            raise ConfigError(f"flower.ray_address must be host:port or ray://host:port of a Ray head node, got "
                              f"{address!r}")
        if target is not None:
            try:
                socket.create_connection(target, timeout=timeout_s).close()
            except OSError as err:
                raise ConfigError(f"flower.ray_address {address!r} is not reachable ({err.strerror or err}); give "
                                  "the head node's host:port, or leave it out to start Ray on this machine") from None
    if not ray.is_initialized():
        os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")  # Ray's FutureWarning on num_gpus = 0
        # the actors import auditkit and the plugins from this interpreter's path (as Flower's own init does)
        path = os.pathsep.join([*sys.path, *filter(None, [os.environ.get("PYTHONPATH")])])
        try:
            ray.init(address=address, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False,
                     runtime_env={"env_vars": {"PYTHONPATH": path}})
        except (ConnectionError, RuntimeError, ValueError) as err:
            raise ConfigError(f"flower.ray_address {address!r}: Ray could not connect ({' '.join(str(err).split())})"
                              ) from None
    if address is not None:
        resources = ray.cluster_resources()
        check_resources(flower, resources.get("CPU", 0.0), resources.get("GPU", 0.0), f"the Ray cluster at {address}")


def _quiet_flower() -> None:
    """Flower logs every message at INFO and warns that ``run_simulation`` is deprecated (it is the Python API of
    the Simulation Engine in 1.41-1.42); auditkit shows its own progress."""
    logging.getLogger("flwr").setLevel(logging.ERROR)


def check_protocol(protocol: Any) -> None:
    """The Flower backend carries one encoded upload per client (a protocol with ``encode`` and ``receive``); a
    ConfigError names the protocol otherwise."""
    if not (hasattr(protocol, "encode") and hasattr(protocol, "receive")):
        raise ConfigError(
            f"training.backend = 'flower' runs mechanisms that send one encoded upload per client; this one "
            f"runs the {protocol.name!r} protocol (use training.backend = 'builtin')")


# ------------------------------------------------------------------ client side

_RUNTIMES: dict[str, Any] = {}  # one rebuilt client side per actor process and config


class _ClientRuntime:
    """What every client of one config shares inside a Ray actor: data, model, the protocol's client half."""

    def __init__(self, spec: dict[str, Any], num_cpus: float) -> None:
        from auditkit.config import from_dict
        from auditkit.fl.aggregation import UplinkProtocol
        from auditkit.models import create_model
        from auditkit.stages.train import build_mechanism, prepare_data

        torch.set_num_threads(max(1, int(num_cpus)))
        self.config = from_dict(spec)
        self.data, input_shape, num_classes, _ = prepare_data(self.config)
        self.model = create_model(self.config.training.model, input_shape=input_shape, num_classes=num_classes)
        self.protocol = UplinkProtocol(build_mechanism(self.config), self.config.seed)


def _runtime(spec: dict[str, Any], num_cpus: float) -> _ClientRuntime:
    key = json.dumps(spec, sort_keys=True)
    if key not in _RUNTIMES:
        _RUNTIMES[key] = _ClientRuntime(spec, num_cpus)
    return _RUNTIMES[key]


def train_client(spec: dict[str, Any], num_cpus: float, message: Any, context: Any) -> Any:
    """The ``ClientApp``'s train handler: local training from the received global model, then the encoded update."""
    from flwr.app import Message, MetricRecord, RecordDict

    from auditkit.flower.records import PAYLOAD, TRUTH, flat_record, flatten_record, payload_record

    rt = _runtime(spec, num_cpus)
    t, seed = rt.config.training, rt.config.seed
    config = message.content["config"]
    client, round_, lr = int(config["client"]), int(config["round"]), float(config["lr"])
    start = flatten_record(message.content["arrays"])
    momentum = (flatten_record(context.state[MOMENTUM]) if MOMENTUM in context.state.array_records
                else torch.zeros_like(start))
    batches, dp_sgd = local_batches(rt.data.client_indices, [client], round_, seed=seed, tau=t.tau,
                                    batch_size=t.batch_size, dp_sgd=rt.config.dp_sgd)
    train = train_clients_batched if t.batched else train_clients_sequential
    rt.model.train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, "dropout", round_, client))
        local = train(rt.model, start, momentum[None], rt.data.train.x[batches], rt.data.train.y[batches],
                      lr=lr, mu=t.momentum, dp_sgd=dp_sgd)
    context.state[MOMENTUM] = flat_record(local.momentum[0])
    update = local.params[0] - start
    content = RecordDict({
        "metrics": MetricRecord({"train-loss": float(local.loss[0]),
                                 "num-examples": len(rt.data.client_indices[client])}),
        TRUTH: flat_record(update),
    })
    if torch.isfinite(update).all():
        content[PAYLOAD] = payload_record(rt.protocol.encode(update, client, round_), client, round_)
    return Message(content, reply_to=message)


def client_app(spec: dict[str, Any], num_cpus: float) -> Any:
    """A Flower ``ClientApp`` training as auditkit's clients do, for the config ``spec`` (plain data, so the app
    pickles small into every Ray actor)."""
    from flwr.clientapp import ClientApp

    app = ClientApp()

    @app.train()
    def _train(message, context):
        return train_client(spec, num_cpus, message, context)

    return app


# ------------------------------------------------------------------ server side


class FlowerSimulation(FederatedSimulation):
    """``FederatedSimulation`` whose clients are Flower ``ClientApp``s on the Simulation Engine.

    Args (beyond ``FederatedSimulation``'s):
        flower: the ``[flower]`` table (client resources, Ray address).
        spec: the run's config as plain data; each client process rebuilds its side from it.
    """

    def __init__(self, *args: Any, flower: FlowerConfig, spec: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        check_protocol(self.protocol)
        self.flower = flower
        self.spec = spec
        self.momentum = None  # the clients keep their own, in their nodes' context.state
        self._grid: Any = None
        self._nodes: list[int] = []  # client k is node self._nodes[k]
        self._clients: dict[int, int] = {}  # node id -> client

    def run(self, on_round: Callable[[RoundRecord], None] | None = None) -> SimulationResult:
        """Train on Flower's Simulation Engine: this loop runs as the ``ServerApp``, the clients as ``ClientApp``s."""
        require_flower()
        from flwr.serverapp import ServerApp
        from flwr.simulation import run_simulation

        connect_ray(self.flower)
        _quiet_flower()
        done: dict[str, SimulationResult] = {}
        server = ServerApp()

        @server.main()
        def _main(grid, context) -> None:
            self._grid = grid
            self._nodes = self._wait_for_nodes(grid)
            self._clients = {node: k for k, node in enumerate(self._nodes)}
            done["result"] = FederatedSimulation.run(self, on_round)

        resources = {"num_cpus": self.flower.num_cpus, "num_gpus": self.flower.num_gpus}
        # Ray is already up (connect_ray), so Flower reuses it; the address is passed on for the record
        init_args = {} if self.flower.ray_address is None else {"address": self.flower.ray_address}
        run_simulation(server, client_app(self.spec, self.flower.num_cpus), num_supernodes=self.training.clients,
                       backend_config={"client_resources": resources, "init_args": init_args})
        if "result" not in done:
            raise RuntimeError("Flower's simulation ended without running the ServerApp")
        return done["result"]

    def _wait_for_nodes(self, grid: Any) -> list[int]:
        deadline = time.monotonic() + NODE_WAIT_S
        while len(nodes := sorted(grid.get_node_ids())) < self.training.clients:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(nodes)} of {self.training.clients} Flower nodes registered in "
                                   f"{NODE_WAIT_S:.0f} s")
            time.sleep(0.02)
        return nodes

    def _exchange(self, clients: list[int], batches: torch.Tensor, lr: float, round_: int,
                  before: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, RoundOutcome]:
        from flwr.app import ConfigRecord, Message, RecordDict

        from auditkit.flower.records import PAYLOAD, TRUTH, flat_record, flatten_record, read_payload

        model = flat_record(before)
        unique = sorted(set(clients))  # a client drawn twice (with replacement) trains once: the same data and seeds
        messages = [Message(RecordDict({"arrays": model,
                                        "config": ConfigRecord({"round": round_, "lr": float(lr), "client": k})}),
                            dst_node_id=self._nodes[k], message_type="train")
                    for k in unique]
        replies: dict[int, Any] = {}
        for reply in self._grid.send_and_receive(messages):
            if reply.has_error():
                raise RuntimeError(f"a Flower client failed in round {round_}: {reply.error.reason}")
            replies[self._clients[reply.metadata.src_node_id]] = reply.content
        truth = {k: flatten_record(c[TRUTH]).to(self.device, before.dtype) for k, c in replies.items()}
        updates = torch.stack([truth[k] for k in clients])
        check_finite(updates, round_)
        payloads = [read_payload(replies[k][PAYLOAD])[0] for k in clients]
        losses = torch.tensor([float(replies[k]["metrics"]["train-loss"]) for k in clients])
        outcome = self.protocol.receive(payloads, clients, self.client_weights[clients], round_, like=updates)
        return updates, losses, outcome
