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

A round protocol with a Flower counterpart (:data:`FLOWER_COUNTERPARTS`: dp-fedavg's ``central-noise``, run by
Flower's own DP strategy wrappers, ``auditkit.flower.central_dp``) runs as that counterpart instead: the messages
come from the wrapper's ``configure_train`` for the sampled nodes, each client replies with its trained model
(``"arrays"``, FedAvg weight ``num-examples`` 1) through the counterpart's client mods (``fixedclipping_mod``),
and the wrapper's ``aggregate_train`` makes the round's release.
"""
from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from auditkit.config_bounds import ConfigError
from auditkit.fl.spec import BNStats, DPSGDSpec, Optimizer, OptimizerState, TrainingSpec
from auditkit.mechanisms.protocol import RoundOutcome, SendsUploads
from auditkit.fl.local_training import (LocalSteps, LocalTraining, local_batches, train_clients_batched,
                                        train_clients_sequential)
from auditkit.fl.optimizers import LocalOptimizer
from auditkit.fl.simulation import FederatedSimulation, Observation, RoundRecord, SimulationResult, check_finite
from auditkit.flower.install import require_flower
from auditkit.flower.settings import FLOWER_COUNTERPARTS, FlowerConfig, check_training, flower_counterpart  # noqa: F401
from auditkit.mechanisms.randomness import derive_seed
from auditkit.fl.aggregation import UplinkProtocol

__all__ = ["FLOWER_COUNTERPARTS", "FlowerSimulation", "check_protocol", "check_resources", "check_training",
           "connect_ray", "flower_counterpart"]

_STATE = "auditkit.optimizer."  # + slot: the node's optimiser state in context.state (optimizer_state = kept)


def _slots(optimizer: LocalOptimizer) -> tuple[str, ...]:
    """The optimiser state a node keeps: its (P,) slots, and Adam's step count."""
    return (*optimizer.slots, "step") if optimizer.name == Optimizer.ADAM else optimizer.slots
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
    """The Flower backend carries one encoded upload per client (a protocol with ``encode`` and ``receive``), or
    runs a protocol's Flower counterpart (:data:`FLOWER_COUNTERPARTS`); a ConfigError names the protocol otherwise."""
    uploads = isinstance(protocol, SendsUploads)
    if not uploads and flower_counterpart(protocol.name) is None:
        raise ConfigError(
            f"training.backend = 'flower' runs mechanisms that send one encoded upload per client, and dp-fedavg on "
            f"Flower's DP wrappers; this one runs the {protocol.name!r} protocol (use training.backend = 'builtin')")


# ------------------------------------------------------------------ client side

_RUNTIMES: dict[str, Any] = {}  # one rebuilt client side per actor process and config


@dataclass(frozen=True)
class ClientSetup:
    """What a client process rebuilds from a run's ``spec`` (``FlowerSimulation``'s ``client_setup``, given by the
    stages layer: ``auditkit.stages.setting.flower_client_setup``): the run's training and DP-SGD specs, seed, data,
    model and the mechanism its updates are encoded with."""

    training: TrainingSpec
    dp_sgd: DPSGDSpec | None
    seed: int
    data: Any  # auditkit.fl.simulation.FederatedData
    model: torch.nn.Module
    mechanism: Any


class _ClientRuntime:
    """What every client of one config shares inside a Ray actor: data, model, the protocol's client half (None
    when a Flower counterpart runs the round: the client then replies with its trained model)."""

    def __init__(self, spec: dict[str, Any], num_cpus: float, client_setup: Callable[[dict[str, Any]], ClientSetup]) -> None:
        torch.set_num_threads(max(1, int(num_cpus)))
        setup = client_setup(spec)
        self.training, self.dp_sgd, self.seed = setup.training, setup.dp_sgd, setup.seed
        self.data, self.model = setup.data, setup.model
        mechanism = setup.mechanism
        self.protocol = (UplinkProtocol(mechanism, self.seed) if flower_counterpart(mechanism.protocol) is None
                         else None)


def _runtime(spec: dict[str, Any], num_cpus: float, client_setup: Callable[[dict[str, Any]], ClientSetup]) -> _ClientRuntime:
    key = json.dumps(spec, sort_keys=True)
    if key not in _RUNTIMES:
        _RUNTIMES[key] = _ClientRuntime(spec, num_cpus, client_setup)
    return _RUNTIMES[key]


def train_client(spec: dict[str, Any], num_cpus: float, client_setup: Callable[[dict[str, Any]], ClientSetup],
                 message: Any, context: Any) -> Any:
    """The ``ClientApp``'s train handler: local training from the received global model, then the encoded update,
    or, when a Flower counterpart runs the round, the trained model with FedAvg weight ``num-examples`` 1."""
    from flwr.app import Message, MetricRecord, RecordDict

    # records imports flwr, the optional flower extra: only where a Flower run needs it
    from auditkit.flower.records import (BUFFERS, PAYLOAD, TRUTH, buffers_record, flat_record, flatten_record,
                                         payload_record, read_buffers, truth_record)

    rt = _runtime(spec, num_cpus, client_setup)
    t, seed = rt.training, rt.seed
    config = message.content["config"]
    client, round_, lr = int(config["client"]), int(config["round"]), float(config["lr"])
    start = flatten_record(message.content["arrays"])
    optimizer = LocalOptimizer(t.optimizer, lr, t.momentum, t.weight_decay)
    kept = t.optimizer_state == OptimizerState.KEPT
    state = {slot: flatten_record(context.state[_STATE + slot]).reshape((1, -1) if slot != "step" else (1,))
             for slot in _slots(optimizer) if kept and _STATE + slot in context.state.array_records} or None
    batches, active, dp_sgd = local_batches(rt.data.client_indices, [client], round_, seed=seed, tau=t.tau,
                                            batch_size=t.batch_size, local_epochs=t.local_epochs, dp_sgd=rt.dp_sgd)
    own = dict(rt.model.named_buffers())
    received = message.content.config_records.get(BUFFERS)  # the server's averaged statistics
    kept_own = context.state.config_records.get(BUFFERS) if t.bn_stats == BNStats.LOCAL else None
    buffers = next((read_buffers(r, own) for r in (received, kept_own) if r is not None), None)
    train = train_clients_batched if t.batched else train_clients_sequential
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, "dropout", round_, client))
        local = train(rt.model, start, LocalSteps(rt.data.train.x, rt.data.train.y, batches, active),
                      LocalTraining(optimizer, t.client_mode, t.precision, recompute=t.recompute_activations), state=state, buffers=buffers,
                      dp_sgd=dp_sgd)
    if kept:
        for slot, value in local.state.items():
            context.state[_STATE + slot] = flat_record(value[0].reshape(-1))
    statistics = buffers_record({name: value[0] for name, value in local.buffers.items()}) if own else None
    if statistics is not None and t.bn_stats == BNStats.LOCAL:
        context.state[BUFFERS] = statistics
    update = local.params[0] - start
    weight = 1 if rt.protocol is None else len(rt.data.client_indices[client])
    content = RecordDict({
        "metrics": MetricRecord({"train-loss": float(local.loss[0]), "num-examples": weight}),
        TRUTH: truth_record(update),
    })
    if statistics is not None:  # to the harness: averaged by the server, or (FedBN) for the evaluation only
        content[BUFFERS] = statistics
    if rt.protocol is None:
        content["arrays"] = flat_record(local.params[0])
    elif torch.isfinite(update).all():
        content[PAYLOAD] = payload_record(rt.protocol.encode(update, client, round_), client, round_)
    return Message(content, reply_to=message)


def client_app(spec: dict[str, Any], num_cpus: float, mods: list[Callable[..., Any]],
               client_setup: Callable[[dict[str, Any]], ClientSetup]) -> Any:
    """A Flower ``ClientApp`` training as auditkit's clients do, for the config ``spec`` (plain data, so the app
    pickles small into every Ray actor), with Flower client ``mods`` on its train handler (a counterpart's, e.g.
    ``fixedclipping_mod``)."""
    from flwr.clientapp import ClientApp

    app = ClientApp()

    @app.train(mods=mods)
    def _train(message, context):
        return train_client(spec, num_cpus, client_setup, message, context)

    return app


# ------------------------------------------------------------------ server side


class FlowerSimulation(FederatedSimulation):
    """``FederatedSimulation`` whose clients are Flower ``ClientApp``s on the Simulation Engine.

    A protocol with a Flower counterpart (:func:`flower_counterpart`) is replaced by it: dp-fedavg's round then
    runs as Flower's DP wrapper (``auditkit.flower.central_dp.CentralNoiseOnFlower``).

    Args (beyond ``FederatedSimulation``'s):
        flower: the ``[flower]`` table (client resources, Ray address).
        spec: the run's config as plain data; each client process rebuilds its side from it.
        client_setup: how a client process rebuilds it (a module-level function, pickled by reference).
    """

    def __init__(self, *args: Any, flower: FlowerConfig, spec: dict[str, Any],
                 client_setup: Callable[[dict[str, Any]], ClientSetup], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        check_protocol(self.protocol)
        counterpart = flower_counterpart(self.protocol.name)
        self.on_counterpart = counterpart is not None
        if counterpart is not None:
            self.protocol = counterpart.for_run(self.protocol.mechanism, self.training, self.seed)
        self.flower = flower
        self.spec = spec
        self.client_setup = client_setup
        self.client_state = None  # the clients keep their own, in their nodes' context.state
        self._grid: Any = None
        self._nodes: list[int] = []  # client k is node self._nodes[k]
        self._clients: dict[int, int] = {}  # node id -> client

    def run(self, on_round: Callable[[RoundRecord], None] | None = None,
            on_checkpoint: Callable[[Observation], None] | None = None) -> SimulationResult:
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
            done["result"] = FederatedSimulation.run(self, on_round, on_checkpoint)

        resources = {"num_cpus": self.flower.num_cpus, "num_gpus": self.flower.num_gpus}
        # Ray is already up (connect_ray), so Flower reuses it; the address is passed on for the record
        init_args = {} if self.flower.ray_address is None else {"address": self.flower.ray_address}
        mods = self.protocol.client_mods if self.on_counterpart else []
        run_simulation(server, client_app(self.spec, self.flower.num_cpus, mods, self.client_setup), num_supernodes=self.training.clients,
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
        if self.on_counterpart:
            return self._exchange_on_counterpart(clients, lr, round_, before)
        from flwr.app import ConfigRecord, Message, RecordDict

        # records imports flwr, the optional flower extra: only where a Flower run needs it
        from auditkit.flower.records import PAYLOAD, TRUTH, flat_record, read_payload, read_truth

        model = flat_record(before)
        unique = sorted(set(clients))  # a client drawn twice (with replacement) trains once: the same data and seeds
        messages = [Message(RecordDict({"arrays": model,
                                        "config": ConfigRecord({"round": round_, "lr": float(lr), "client": k}),
                                        **self._buffers_out()}),
                            dst_node_id=self._nodes[k], message_type="train")
                    for k in unique]
        replies = {self._clients[r.metadata.src_node_id]: r.content for r in self._send(messages, round_)}
        self._buffers_in(clients, replies)
        truth = {k: read_truth(c[TRUTH]).to(self.device, before.dtype) for k, c in replies.items()}
        updates = torch.stack([truth[k] for k in clients])
        check_finite(updates, round_)
        payloads = [read_payload(replies[k][PAYLOAD])[0] for k in clients]
        losses = torch.tensor([float(replies[k]["metrics"]["train-loss"]) for k in clients])
        outcome = self.protocol.receive(payloads, clients, self.client_weights[clients], round_, like=updates)
        return updates, losses, outcome

    def _exchange_on_counterpart(self, clients: list[int], lr: float, round_: int,
                                 before: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, RoundOutcome]:
        """The round on a Flower counterpart (``central_dp.CentralNoiseOnFlower``): its wrapper's ``configure_train``
        writes the messages for the sampled clients' nodes (each then told which client it is), the clients reply
        with their models, and the wrapper's ``aggregate_train`` gets the replies in client order, without the
        ground truth (which goes to the harness)."""
        from flwr.app import ConfigRecord, Message, RecordDict

        # records imports flwr, the optional flower extra: only where a Flower run needs it
        from auditkit.flower.records import TRUTH, flat_record, read_truth

        config = ConfigRecord({"round": round_, "lr": float(lr)})
        configured = self.protocol.configure(round_, flat_record(before), config, [self._nodes[k] for k in clients])
        messages = []
        for message in configured:  # FedAvg's messages share one content: each gets its own, naming its client
            node = message.metadata.dst_node_id
            config = ConfigRecord({**message.content["config"], "client": self._clients[node]})
            messages.append(Message(RecordDict({"arrays": message.content["arrays"], "config": config,
                                                **self._buffers_out()}),
                                    dst_node_id=node, message_type=message.metadata.message_type))
        by_client = {self._clients[r.metadata.src_node_id]: r for r in self._send(messages, round_)}
        replies = [by_client[k] for k in clients]
        self._buffers_in(clients, {k: r.content for k, r in by_client.items()})
        updates = torch.stack([read_truth(r.content[TRUTH]).to(self.device, before.dtype) for r in replies])
        check_finite(updates, round_)
        losses = torch.tensor([float(r.content["metrics"]["train-loss"]) for r in replies])
        for reply in replies:
            del reply.content[TRUTH]
        return updates, losses, self.protocol.aggregate(round_, replies, before)

    def _buffers_out(self) -> dict[str, Any]:
        """The message's ``BUFFERS`` record: the server's averaged running statistics (none: no buffers, or FedBN)."""
        from auditkit.flower.records import BUFFERS, buffers_record  # flwr, the optional extra: as above

        if not self.buffers or self.training.bn_stats != BNStats.AVERAGED:
            return {}
        return {BUFFERS: buffers_record(self.buffers)}

    def _buffers_in(self, clients: list[int], replies: dict[int, Any]) -> None:
        """The clients' running statistics from their replies, kept as the built-in simulator keeps them
        (``_keep_buffers``) and stripped from the replies before a strategy reads them."""
        from auditkit.flower.records import BUFFERS, read_buffers  # flwr, the optional extra: as above

        if not self.buffers:
            return
        own = {name: b.cpu() for name, b in self.buffers.items()}
        read = {k: read_buffers(content[BUFFERS], own) for k, content in replies.items()}
        for content in replies.values():
            del content[BUFFERS]
        self._keep_buffers(clients, {name: torch.stack([read[k][name] for k in clients]) for name in own})

    def _send(self, messages: list[Any], round_: int) -> list[Any]:
        """The clients' replies to ``messages``; a client's error stops the run."""
        replies = list(self._grid.send_and_receive(messages))
        for reply in replies:
            if reply.has_error():
                raise RuntimeError(f"a Flower client failed in round {round_}: {reply.error.reason}")
        return replies
