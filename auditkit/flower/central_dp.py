"""dp-fedavg on Flower: Flower's own central-DP strategy wrappers run the round, not a re-implementation.

auditkit's ``central-noise`` protocol (``auditkit.mechanisms.dp_fedavg``) on ``training.backend = "flower"`` runs
``DifferentialPrivacy{Server,Client}SideFixedClipping(FedAvg(), z, C, m)`` (Flower 1.41, ``flwr.serverapp.strategy``;
``clipping = "client"`` adds ``fixedclipping_mod``, :func:`client_mods`), so a Flower user audits what they deploy.
Flower releases the mean over the n_t clients that replied, where McMahan et al. 2018 (Alg. 1, f_f) divide by m:

    (1 / n_t) sum_{k in S_t} clip(Delta_k) + N(0, (z C / m)^2 I) = (sum clip(Delta_k) + N(0, (z n_t C / m)^2 I)) / n_t,

so the noise std on the aggregate is z C / m on both (``noise_std_aggregate``) and the multiplier on the sum is
z n_t / m (``effective_noise_multiplier``); the ``aggregate`` view is n_t times the release. m is Flower's int
``num_sampled_clients`` (:func:`sampled_clients`). NumPy's global generator is seeded per round with
``derive_seed(seed, "flower-dp", round) % 2**32`` and restored, for reproducible runs. A round that samples nobody
is released by auditkit itself, N(0, (z C / m)^2 I) with Flower's own functions
(:meth:`CentralNoiseOnFlower.communicate`), since an unchanged model would reveal n_t = 0. See docs/guide/flower.md.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from auditkit.flower.install import require_flower

require_flower()

from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord  # noqa: E402
from flwr.clientapp.mod import fixedclipping_mod  # noqa: E402
from flwr.serverapp.strategy import (DifferentialPrivacyClientSideFixedClipping,  # noqa: E402
                                     DifferentialPrivacyServerSideFixedClipping, FedAvg, Strategy)
from flwr.supercore.differential_privacy import add_gaussian_noise_inplace, compute_stdv  # noqa: E402

from auditkit.fl.spec import TrainingSpec  # noqa: E402
from auditkit.flower.records import flatten_record  # noqa: E402
from auditkit.mechanisms.base import Mechanism  # noqa: E402
from auditkit.mechanisms.protocol import RoundOutcome, informed_aggregate  # noqa: E402
from auditkit.mechanisms.randomness import derive_seed  # noqa: E402
from auditkit.mechanisms.views import View

__all__ = ["DP_WRAPPERS", "CentralNoiseOnFlower", "DPWrapper", "SampledNodes", "client_mods", "mechanism_params",
           "release", "round_stats", "sampled_clients", "seeded_numpy", "server_wrapper"]

DP_WRAPPERS = (DifferentialPrivacyServerSideFixedClipping, DifferentialPrivacyClientSideFixedClipping)
DPWrapper = DifferentialPrivacyServerSideFixedClipping | DifferentialPrivacyClientSideFixedClipping


def sampled_clients(training: TrainingSpec) -> int:
    """Flower's ``num_sampled_clients`` for a run: m = q K (``participation = "poisson"``) or K (``"full"``).

    Flower's noise std is z C / num_sampled_clients with an int count, so a fractional q K has no Flower
    counterpart: ``ValueError`` (one line, naming the keys).
    """
    rate = training.sample_rate if training.participation == "poisson" else 1.0
    expected = rate * training.clients
    count = round(expected)
    if count < 1 or not math.isclose(expected, count, rel_tol=0.0, abs_tol=1e-9):
        raise ValueError(
            f"training.sample_rate x training.clients = {rate:g} x {training.clients} = {expected:g} is not a "
            "whole number of clients: on training.backend = 'flower' it is the num_sampled_clients of Flower's DP "
            "wrappers, an int (their noise std is z C / num_sampled_clients); choose q with q K an integer")
    return count


def server_wrapper(mechanism: Mechanism, sampled: int) -> DPWrapper:
    """Flower's wrapper of dp-fedavg ``mechanism`` (its ``noise_multiplier`` z, ``clip`` C, ``clipping``) around
    FedAvg, with ``num_sampled_clients = sampled`` (m).

    FedAvg here samples every node of the grid it is given (``fraction_train`` 1, no minimum): auditkit samples the
    round's clients itself (``training.participation``) and hands it a :class:`SampledNodes` grid of them.
    """
    wrapper = (DifferentialPrivacyClientSideFixedClipping if mechanism.params["clipping"] == "client"
               else DifferentialPrivacyServerSideFixedClipping)
    return wrapper(FedAvg(fraction_train=1.0, min_train_nodes=0, min_available_nodes=0),
                   noise_multiplier=mechanism.params["noise_multiplier"], clipping_norm=mechanism.params["clip"],
                   num_sampled_clients=sampled)


def client_mods(mechanism: Mechanism) -> list[Callable[..., Message]]:
    """The ``ClientApp`` mods dp-fedavg ``mechanism`` needs: Flower's ``fixedclipping_mod`` for client-side
    clipping (it clips the trained model's difference to the ``clipping_norm`` the wrapper sends), none for
    server-side clipping."""
    return [fixedclipping_mod] if mechanism.params["clipping"] == "client" else []


def mechanism_params(wrapper: Strategy, given: Mapping[str, Any]) -> dict[str, Any]:
    """dp-fedavg's parameters as Flower's fixed-clipping ``wrapper`` runs them (``noise_multiplier``, ``clip``,
    ``clipping``), with the ``given`` ones it has not (``delta``); ``ValueError`` (one line) for another strategy or a
    given parameter the wrapper contradicts."""
    if not isinstance(wrapper, DP_WRAPPERS):
        raise ValueError(f"dp-fedavg runs as Flower's {' or '.join(w.__name__ for w in DP_WRAPPERS)}; got "
                         f"{type(wrapper).__name__}")
    clipping = "client" if isinstance(wrapper, DifferentialPrivacyClientSideFixedClipping) else "server"
    runs = {"noise_multiplier": float(wrapper.noise_multiplier), "clip": float(wrapper.clipping_norm),
            "clipping": clipping}
    for name, value in given.items():
        if name in runs and value != runs[name]:
            raise ValueError(f"dp-fedavg {name} = {value!r}, but the {type(wrapper).__name__} runs {runs[name]!r} "
                             f"(leave {name} out: it is read from the wrapper)")
    return {**given, **runs}


def round_stats(wrapper: DPWrapper, replied: int) -> dict[str, float]:
    """A round's statistics under Flower's fixed-clipping ``wrapper`` with ``replied`` = n_t replies: ``sampled``
    n_t, ``noise_std_aggregate`` z C / m (``compute_stdv``) and ``effective_noise_multiplier`` z n_t / m, the
    multiplier on the sum that Flower's mean over n_t replies implies (z in a round nobody was sampled in, whose
    release N(0, (z C / m)^2 I) is McMahan's)."""
    z, m = wrapper.noise_multiplier, wrapper.num_sampled_clients
    return {"sampled": float(replied), "noise_std_aggregate": compute_stdv(z, wrapper.clipping_norm, m),
            "effective_noise_multiplier": z * replied / m if replied else z}


def release(wrapper: DPWrapper, round_: int, replies: list[Message],
            before: torch.Tensor) -> tuple[ArrayRecord | None, MetricRecord | None, RoundOutcome]:
    """Flower's fixed-clipping ``wrapper`` aggregates the round's ``replies`` (its ``aggregate_train``; each reply
    a model, ``"arrays"``, with ``"metrics"``), ``before`` being the global model it configured the round with.

    Returns the wrapper's release (arrays and metrics, as Flower's loop takes them) and the round as auditkit
    records it. Views: ``server`` the replies' model differences as received (clipped by the clients, or raw for
    server-side clipping), ``eavesdropper`` the replies' serialised arrays, ``aggregate`` n_t times the released
    difference (the noisy sum), ``aggregate-informed`` the informed adversary's view of each client
    (``auditkit.mechanisms.protocol.informed_aggregate``); stats :func:`round_stats`.
    """
    base = before.detach().cpu().float()
    received = [reply.content["arrays"] for reply in replies]
    server = torch.stack([flatten_record(r) for r in received]) - base
    payloads = [b"".join(array.data for array in r.values()) for r in received]
    arrays, metrics = wrapper.aggregate_train(round_, replies)
    # after aggregate_train the replies hold what FedAvg averaged (the server-side wrapper clips them in place)
    clipped = (torch.stack([flatten_record(reply.content["arrays"]) for reply in replies]) - base).double()
    update = flatten_record(arrays) - base
    noisy_sum = len(replies) * update.double()
    like = dict(device=before.device, dtype=before.dtype)
    outcome = RoundOutcome(
        aggregate=update.to(**like),
        bits=[8 * len(p) for p in payloads],
        views={View.SERVER: server.to(**like), View.EAVESDROPPER: payloads, View.AGGREGATE: noisy_sum.to(**like),
               "aggregate-informed": informed_aggregate(noisy_sum, clipped).to(**like)},
        stats=round_stats(wrapper, len(replies)),
    )
    return arrays, metrics, outcome


@contextmanager
def seeded_numpy(seed: int) -> Iterator[None]:
    """NumPy's global generator (Flower's noise source) seeded with ``seed``, its state restored afterwards."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


class SampledNodes:
    """The grid as FedAvg's ``configure_train`` sees it: only the nodes auditkit sampled this round
    (``get_node_ids``, the one grid method FedAvg's sampling calls)."""

    def __init__(self, nodes: list[int]) -> None:
        self.nodes = list(nodes)

    def get_node_ids(self) -> list[int]:
        return list(self.nodes)


class CentralNoiseOnFlower:
    """dp-fedavg's round on Flower's DP wrapper (module docstring): the protocol ``FlowerSimulation`` runs in
    place of the builtin ``central-noise`` protocol.

    Args:
        mechanism: the dp-fedavg mechanism (z, C, clipping).
        sampled: m, Flower's ``num_sampled_clients`` (:func:`sampled_clients`).
        seed: the run's seed; round t's noise is drawn with NumPy seeded by ``derive_seed(seed, "flower-dp", t)``.
    """

    name = "central-noise"
    releases_empty_rounds = True
    # what AuditStrategy takes of the counterpart to record a user's app running the wrapper (auditkit.flower.strategy)
    mechanism_params = staticmethod(mechanism_params)
    release = staticmethod(release)

    def __init__(self, mechanism: Mechanism, sampled: int, seed: int) -> None:
        self.mechanism = mechanism
        self.sampled = sampled
        self.seed = seed
        self.strategy = server_wrapper(mechanism, sampled)
        self.client_mods = client_mods(mechanism)

    @classmethod
    def check_training(cls, training: TrainingSpec) -> None:
        """The run's ``[training]`` has a Flower counterpart: m = q K is an int (:func:`sampled_clients`)."""
        sampled_clients(training)

    @classmethod
    def for_run(cls, mechanism: Mechanism, training: TrainingSpec, seed: int) -> "CentralNoiseOnFlower":
        """The counterpart of a run of ``mechanism`` with ``training`` and ``seed``."""
        return cls(mechanism, sampled_clients(training), seed)

    def noise_seed(self, round_: int) -> int:
        """The seed of NumPy's global generator while Flower draws round ``round_``'s noise."""
        return derive_seed(self.seed, "flower-dp", round_) % 2**32

    def configure(self, round_: int, model: ArrayRecord, config: ConfigRecord, nodes: list[int]) -> list[Message]:
        """The wrapper's ``configure_train`` for the sampled ``nodes``: one train message each, carrying ``model``
        and ``config`` (to which the client-side wrapper adds ``clipping_norm``); the server-side wrapper keeps
        ``model`` to clip the replies against."""
        return list(self.strategy.configure_train(round_, model, config, SampledNodes(nodes)))

    def aggregate(self, round_: int, replies: list[Message], before: torch.Tensor) -> RoundOutcome:
        """The wrapper's ``aggregate_train`` of the round's ``replies`` (:func:`release`), its noise drawn from
        NumPy seeded for round ``round_``."""
        with seeded_numpy(self.noise_seed(round_)):
            return release(self.strategy, round_, replies, before)[2]

    def communicate(self, updates: torch.Tensor, clients: list[int], weights: torch.Tensor, round_: int,
                    *, global_params: torch.Tensor | None = None) -> RoundOutcome:
        """The release of a round that sampled nobody (``releases_empty_rounds``; rounds with clients go through
        :meth:`configure` and :meth:`aggregate`): N(0, (z C / m)^2 I) with Flower's ``compute_stdv`` and
        ``add_gaussian_noise_inplace``, from NumPy seeded as in every round."""
        if clients:
            raise ValueError("CentralNoiseOnFlower.communicate releases the rounds nobody was sampled in; a round "
                             "with clients runs Flower's wrapper (configure, then aggregate)")
        noise = np.zeros(updates.shape[1], dtype=np.float32)
        with seeded_numpy(self.noise_seed(round_)):
            add_gaussian_noise_inplace([noise], round_stats(self.strategy, 0)["noise_std_aggregate"])
        return RoundOutcome(aggregate=torch.from_numpy(noise).to(updates.device, updates.dtype), bits=[],
                            stats=round_stats(self.strategy, 0))
