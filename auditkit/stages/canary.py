"""Canary clients inside FL, on the real FedAvg run of an ``AuditConfig``: canaries that join the run and their
scores per view (``canary_run``; Andrew et al., "One-shot empirical privacy estimation for federated learning",
ICLR 2024), and repeated training (``repeated_training_audit``; Jagielski, Ullman & Oprea 2020).

Canary clients (``CanaryClients``, a wrapper of the run's round protocol). Beside the K real clients, m canary
clients with ids K, ..., K+m-1 take part in the run. Canary i has an inclusion bit b_i ~ Bern(1/2) and a direction
c_i = C g_i / ||g_i||_2, g_i ~ N(0, I_P) (P: the model's parameter count; C: the mechanism's ``clip``, else 1),
fixed over the rounds and regenerated from canary i's own keyed stream, one canary at a time (nothing of size
m x P is ever held: a round holds the rows its canaries send). In each round canary i takes part with its own coin at the run's rate: q under Poisson participation,
1 under full, clients_per_round / K under uniform or replacement (an approximation: the real clients' count is
fixed there, the canaries' is Binomial with the same mean). A canary that takes part sends the update that the
neighbouring relation of the mechanism's claim (``guarantee().relation``) prescribes:

* ADD_OR_REMOVE_ONE (dp-fedavg): c_i when b_i = 1, no message when b_i = 0;
* REPLACE_ONE (local mechanisms, and mechanisms without a claim): +c_i when b_i = 1, -c_i when b_i = 0.

The message goes through the run's own protocol like a real client's (encoded with the shared seed keyed by its
id and the round, real bytes, decoded, aggregated), and training proceeds for real. The canary clients of a round
share the weight of one average real client (each mean(p_k) / n_t for the n_t canaries sent), so that many
canaries do not drown the real updates in FedAvg's weighted mean (a protocol that ignores weights, DP-FedAvg's
plain sum, adds each canary whole); in a round with no real client they share weight 1. A protocol that releases
empty rounds (``releases_empty_rounds``: DP-FedAvg's central noise) gets the canaries of such a round; otherwise
the training loop skips a round without real clients, canaries included.

Scores (float64), each a projection on the unit direction u_i = c_i / ||c_i||_2:

* ``aggregate``: sum over all T rounds of <A_t, u_i>, A_t the round's ``views["aggregate"]`` (DP-FedAvg's noisy
  sum) or else the aggregate the server applies;
* ``server``: sum, over the rounds canary i sent a message, of <its decoded message in ``views["server"]``, u_i>
  (only for protocols whose ``server`` view is one decoded row per message);
* ``public``: <w_T - w_0, u_i>, the final model's move from the initial one.

The aggregate and public scores sum over every round, never over the canary's own rounds: a claim amplified by
sampling covers an adversary who does not know who took part when, and a score that reads the participation
schedule uses what the claim hides (it falsely refutes a correct amplified DP-FedAvg claim). The server sees who
sent which message, so its score reads the schedule: it fits claims that are not amplified (local mechanisms).
Which views a claim covers is for the caller to decide. The bits, coins and directions come from streams keyed by
(seed, "canary-clients"), unrelated to the mechanism's and the training's (SHA-256 domain separation): the same
config and seed give the same scores.

Repeated training (``repeated_training_audit``). One canary client (a ``CanaryClients`` sibling sharing its
weight rule) takes part in round ``canary_round`` (default the last) with update x1 = +c (D') or x0 = -c / 0 (D);
each trial retrains from scratch on the fixed data and partition with fresh training and mechanism randomness
(the simulation seed ``derive_seed(seed, chunk, i)``), and the observed view -- the final model (``public``) or
the canary client's decoded update (``server``) -- is handed to ``auditkit.attacks.distinguish`` as the output of a
batched callable: its selection half picks the statistic and threshold (projection <y, c>, classifier), its
held-out half certifies the bound (Clopper-Pearson, ``epsilon_lower_bound``). Changing the canary's update changes
the input of one mechanism call, and every later message depends on it only through decoded outputs, so by
adaptive composition the views are as private as one call: the bound is compared with the mechanism's per-round,
client-level claim (``guarantee()``). Trials run one after another through the real ``FederatedSimulation``, so
the cost is trials x one short run -- meant for small models and few rounds.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from auditkit import mechanisms, results
from auditkit.accounting import composed_tradeoff
from auditkit.attacks.distinguish import EpsilonEstimate, distinguish
from auditkit.attacks.one_run import one_run_bound
from auditkit.attacks.verdicts import verdict
from auditkit.config import AuditConfig, ConfigError, from_dict, preset_dict
from auditkit.fl.aggregation import UplinkProtocol
from auditkit.fl.simulation import FederatedSimulation
from auditkit.fl.sampling import CANARY_STREAM, canary_coins, canary_rate
from auditkit.mechanisms.guarantee import NeighboringRelation, PrivacyGuarantee
from auditkit.mechanisms.protocol import RoundOutcome, RoundProtocol, selects_clients
from auditkit.mechanisms.randomness import derive_seed, generator
from auditkit.models import build_model, count_parameters
from auditkit.stages.setting import build_mechanism, prepare_data, resolve_device
from auditkit.stages.train import Experiment
from auditkit.validation import Choice, Integer, Number, Optional
from auditkit.mechanisms.views import View
from auditkit.mechanisms.tradeoff import EpsDeltaTradeOff
from auditkit.stages.account import account_rounds

__all__ = [
    "PAIRS",
    "RELATIONS",
    "VIEWS",
    "CanaryClients",
    "CanaryRun",
    "RepeatedTrainingAudit",
    "canary_direction",
    "canary_run",
    "canary_stage",
    "composed_claim_curve",
    "judged_views",
    "repeated_training_audit",
]

PAIRS = ("replace", "add")
VIEWS = (View.PUBLIC, View.SERVER)
RELATIONS = (NeighboringRelation.REPLACE_ONE, NeighboringRelation.ADD_OR_REMOVE_ONE)  # the pair shapes served


def canary_direction(seed: int, index: int, size: int, norm: float) -> torch.Tensor:
    """c_i = norm g / ||g||_2, g ~ N(0, I_size) from the stream keyed by (seed, "canary", index) (float32)."""
    g = torch.randn(size, generator=generator(derive_seed(seed, "canary", index), "direction"), dtype=torch.float64)
    return (norm * g / torch.linalg.vector_norm(g)).to(torch.float32)


class _AddedClients:
    """A round protocol wrapper that appends clients of its own to a round (the shared part of the canary wrappers).

    It forwards ``name``, ``releases_empty_rounds`` and ``received`` of ``inner`` (``received`` sees only the real
    clients' rows: the training loop calls it with the real updates). The added clients of a round share the
    weight of one average real client, or weight 1 in a round without real clients.
    """

    def __init__(self, inner: RoundProtocol, first: int) -> None:
        self.inner, self.first = inner, first
        self.name = inner.name
        self.releases_empty_rounds = bool(getattr(inner, "releases_empty_rounds", False))

    def received(self, updates: torch.Tensor, clients: list[int]) -> torch.Tensor:
        received = getattr(self.inner, "received", None)
        return updates if received is None else received(updates, clients)

    def _with(
        self, rows: torch.Tensor, ids: list[int], updates: torch.Tensor, clients: list[int], weights: torch.Tensor,
        round_: int, global_params: torch.Tensor | None,
    ) -> RoundOutcome:
        """``inner.communicate`` of the round with ``rows`` (n, P) sent by the clients ``ids`` after the real ones."""
        if ids:
            share = (weights.mean() if len(weights) else weights.new_ones(())) / len(ids)
            updates = torch.cat([updates, rows.to(updates.device, updates.dtype)])
            clients = clients + ids
            weights = torch.cat([weights, share.expand(len(ids))])
        return self.inner.communicate(updates, clients, weights, round_, global_params=global_params)


class CanaryClients(_AddedClients):
    """m canary clients (ids ``first``, ..., ``first`` + m - 1) taking part in the run's rounds (module docstring).

    inner:    the run's round protocol (not one that chooses the clients itself, ``select_clients``).
    first:    the first canary's id, the number K of real clients.
    canaries: m >= 1; size: the model's parameter count P; norm: ||c_i||_2.
    rate:     each canary's probability of taking part in a round (``canary_rate``).
    relation: the claim's neighbouring relation, REPLACE_ONE (+c_i / -c_i) or ADD_OR_REMOVE_ONE (c_i / nothing).
    seed:     the run's seed; the canaries' streams are keyed by ``derive_seed(seed, "canary-clients")``.

    After the run: ``inserted`` (m,) bool, ``rounds_sent`` (m,) int64, ``aggregate_sum`` (P,) float64 (the sum of
    every round's A_t), ``server_scores`` ((m,) float64, None when the protocol has no per-message server view),
    ``rounds`` (calls of ``communicate``); ``project`` gives the projections of any (P,) vector on every u_i.
    """

    def __init__(
        self, inner: RoundProtocol, *, first: int, canaries: int, size: int, norm: float, rate: float,
        relation: NeighboringRelation, seed: int,
    ) -> None:
        if relation not in RELATIONS:
            raise ValueError(f"relation must be one of {', '.join(r.name for r in RELATIONS)}, got {relation!r}")
        super().__init__(inner, first)
        self.canaries, self.size, self.norm, self.rate, self.relation = canaries, size, float(norm), rate, relation
        self.seed, self.key = seed, derive_seed(seed, CANARY_STREAM)
        self.inserted = torch.rand(canaries, generator=generator(self.key, "inclusion")) < 0.5
        self.rounds_sent = torch.zeros(canaries, dtype=torch.int64)
        self.aggregate_sum = torch.zeros(size, dtype=torch.float64)
        self._server: torch.Tensor | None = torch.zeros(canaries, dtype=torch.float64)
        self.rounds = 0

    @property
    def server_scores(self) -> torch.Tensor | None:
        """Sum over its rounds of <canary i's decoded message, u_i>; None when some round's ``views["server"]`` was
        not one decoded row per message."""
        return self._server

    def direction(self, index: int) -> torch.Tensor:
        """u_i = g / ||g||_2, g ~ N(0, I_P) from canary i's own keyed stream (P,) float64: one canary's direction
        drawn alone, so memory is one row whatever m and P (ResNet-18: 89 MB)."""
        g = torch.randn(self.size, generator=generator(self.key, f"direction/{int(index)}"), dtype=torch.float64)
        return g / torch.linalg.vector_norm(g)

    def directions(self, indices: torch.Tensor) -> torch.Tensor:
        """The unit directions u_i of the canaries ``indices`` (n, P) float64 (``direction``)."""
        return torch.stack([self.direction(i) for i in indices.tolist()]) if len(indices) else torch.zeros(
            0, self.size, dtype=torch.float64)

    def project(self, vectors: torch.Tensor) -> torch.Tensor:
        """<v, u_i> for every canary i: (m,) for a (P,) vector, (m, V) for (V, P) vectors (float64); the
        directions drawn one at a time."""
        v = vectors.detach().cpu().to(torch.float64)
        v = v if v.dim() == 1 else v.T
        return torch.stack([self.direction(i) @ v for i in range(self.canaries)])

    def sent(self, round_: int) -> torch.Tensor:
        """The canaries that send a message in round ``round_`` (sorted indices): those whose coin came up,
        included or not under REPLACE_ONE, the included ones under ADD_OR_REMOVE_ONE."""
        coins = canary_coins(self.seed, self.canaries, self.rate, round_)
        if self.relation is NeighboringRelation.ADD_OR_REMOVE_ONE:
            coins &= self.inserted
        return torch.nonzero(coins).flatten()

    def communicate(
        self, updates: torch.Tensor, clients: list[int], weights: torch.Tensor, round_: int,
        *, global_params: torch.Tensor | None = None,
    ) -> RoundOutcome:
        sent = self.sent(round_)
        sign = torch.where(self.inserted[sent], 1.0, -1.0).to(torch.float64)  # all +1 under ADD_OR_REMOVE_ONE
        rows = torch.zeros(len(sent), self.size, dtype=torch.float32)
        for j, i in enumerate(sent.tolist()):
            rows[j] = (self.norm * sign[j] * self.direction(i)).to(torch.float32)
        outcome = self._with(rows, [self.first + i for i in sent.tolist()], updates, clients, weights, round_,
                             global_params)
        self._score(outcome, len(clients), sent, rows, sign)
        return outcome

    def _score(self, outcome: RoundOutcome, real: int, sent: torch.Tensor, rows: torch.Tensor,
               sign: torch.Tensor) -> None:
        aggregate = outcome.views.get(View.AGGREGATE)
        aggregate = outcome.aggregate if not isinstance(aggregate, torch.Tensor) else aggregate
        self.aggregate_sum += aggregate.detach().cpu().to(torch.float64)
        self.rounds_sent[sent] += 1
        self.rounds += 1
        server = outcome.views.get(View.SERVER)
        if not (isinstance(server, torch.Tensor) and server.dim() == 2 and server.shape[0] == real + len(sent)):
            self._server = None  # e.g. MSP's transcript: no decoded row per message
        if self._server is not None and len(sent):
            # u_i = sign c_i / norm from the rows sent (u_i rounded to float32: 1e-7 relative, no second draw)
            decoded = server[real:].detach().cpu()
            for j, i in enumerate(sent.tolist()):  # row by row: no (n, P) float64 copies
                self._server[i] += decoded[j].to(torch.float64) @ rows[j].to(torch.float64) / (self.norm * sign[j])


@dataclass(frozen=True, eq=False)
class CanaryRun:
    """One FL run with m canary clients, and every canary's scores (module docstring).

    inserted:    (m,) bool, the inclusion bits b_i.
    scores:      view -> (m,) float64: "aggregate", "public", and "server" where the protocol has a per-message
                 server view (whether a view is covered by the claim is the caller's decision).
    rounds_sent: (m,) int, the rounds in which each canary sent a message (the schedule: not read by the scores of
                 "aggregate" and "public").
    relation:    the neighbouring relation the pairs follow (the claim's; "REPLACE_ONE" without a claim).
    canary_norm: ||c_i||_2; rate: each canary's probability of taking part in a round; rounds: T.
    test_accuracy: the final model's (trained with the canaries); seconds: wall time of ``canary_run``.
    """

    inserted: np.ndarray
    scores: dict[str, np.ndarray]
    rounds_sent: np.ndarray
    relation: str
    canary_norm: float
    rate: float
    rounds: int
    test_accuracy: float
    seconds: float

    @property
    def canaries(self) -> int:
        return len(self.inserted)


def _frozen(values: torch.Tensor, dtype: type) -> np.ndarray:
    out = values.numpy().astype(dtype)
    out.flags.writeable = False
    return out


_NORM = Optional(Number(low=0, low_open=True))  # canary_norm: None is the mechanism's clip


def _quickstart_setting() -> AuditConfig:
    """The quickstart preset's data and training with mechanism ``none``."""
    return from_dict(preset_dict("quickstart", mechanisms=False))


def _without_checkpoints(config: AuditConfig) -> AuditConfig:
    """The config with no checkpoint views (the canary runs keep their own)."""
    return dataclasses.replace(config, training=dataclasses.replace(config.training, checkpoints=()))


def _claim_and_delta(claim: PrivacyGuarantee, delta: float | None) -> float:
    """The delta of the bound: given, else the claim's (0 without a claim)."""
    if delta is not None:
        return delta
    return claim.delta if claim.epsilon is not None else 0.0


def _canary_norm(mechanism: Any, canary_norm: float | None) -> float:
    return canary_norm if canary_norm is not None else float(mechanism.params.get("clip", 1.0))


def canary_run(config: AuditConfig, canaries: int, *, canary_norm: float | None = None,
               on_round: Callable[[Any], None] | None = None) -> CanaryRun:
    """Train the config's FL run once with ``canaries`` canary clients and score every canary (module docstring).

    config:      the run (its mechanism, participation, rounds; checkpoint views are not recorded).
    canaries:    m >= 1.
    canary_norm: ||c_i||_2 (default the mechanism's ``clip``, else 1).
    on_round:    called with each round's record (progress).

    ValueError (one line) for what the canary clients cannot join: ``training.backend`` "flower", a round protocol
    that chooses the clients itself (``select_clients``: DP-SQ's device groups), a claim under another relation
    than REPLACE_ONE or ADD_OR_REMOVE_ONE.
    """
    Integer(low=1).check(canaries, "canaries")
    _NORM.check(canary_norm, "canary_norm")
    if config.training.backend != "builtin":
        raise ValueError(f"training.backend must be 'builtin' for canary clients, got {config.training.backend!r}")
    start = time.perf_counter()
    config = _without_checkpoints(config)
    experiment = Experiment(config)
    simulation, mechanism, t = experiment.simulation, experiment.mechanism, config.training
    if selects_clients(simulation.protocol):
        raise ValueError(f"mechanism must be one whose round protocol leaves the clients to training.participation "
                         f"for canary clients; {mechanism.name!r}'s protocol {simulation.protocol.name!r} chooses them")
    claimed = mechanism.guarantee().relation
    relation = NeighboringRelation.REPLACE_ONE if claimed is None else claimed  # no claim: the +c / -c pairs
    if relation not in RELATIONS:
        raise ValueError(f"mechanism's claim must be under {' or '.join(r.name for r in RELATIONS)} for canary "
                         f"clients; {mechanism.name!r} claims {relation.name}")
    norm = _canary_norm(mechanism, canary_norm)
    rate = canary_rate(t.participation, t.clients, t.sample_rate, t.clients_per_round)
    wrapper = CanaryClients(simulation.protocol, first=t.clients, canaries=canaries, size=simulation.layout.size,
                            norm=norm, rate=rate, relation=relation, seed=config.seed)
    simulation.protocol = wrapper
    initial = simulation.params.detach().cpu().to(torch.float64).clone()
    result = simulation.run(on_round)
    moved = result.final_params.to(torch.float64) - initial
    aggregate, public = wrapper.project(torch.stack([wrapper.aggregate_sum, moved])).unbind(1)
    scores = {View.AGGREGATE: aggregate, View.PUBLIC: public}
    if wrapper.server_scores is not None:
        scores[View.SERVER] = wrapper.server_scores
    return CanaryRun(
        inserted=_frozen(wrapper.inserted, bool),
        scores={view: _frozen(s, np.float64) for view, s in scores.items()},
        rounds_sent=_frozen(wrapper.rounds_sent, np.int64),
        relation=relation.name,
        canary_norm=norm,
        rate=rate,
        rounds=t.rounds,
        test_accuracy=result.rounds[-1].test_accuracy,
        seconds=time.perf_counter() - start,
    )


class _OneCanary(_AddedClients):
    """Repeated training's canary client (id ``first``): sends ``update`` (1, P) in ``round_`` only and keeps its
    decoded update (``decoded``)."""

    def __init__(self, inner: RoundProtocol, first: int, update: torch.Tensor, round_: int) -> None:
        super().__init__(inner, first)
        self.update, self.round, self.decoded = update, round_, None

    def communicate(
        self, updates: torch.Tensor, clients: list[int], weights: torch.Tensor, round_: int,
        *, global_params: torch.Tensor | None = None,
    ) -> RoundOutcome:
        here = round_ == self.round
        outcome = self._with(self.update if here else self.update[:0], [self.first] if here else [], updates,
                             clients, weights, round_, global_params)
        if here:
            self.decoded = outcome.views[View.SERVER][len(clients)].detach().cpu()
        return outcome


@dataclass(frozen=True)
class RepeatedTrainingAudit:
    """A repeated-training test: the held-out ``EpsilonEstimate`` and its verdict against the per-round claim."""

    mechanism: str
    params: dict[str, Any]
    view: str
    canary_round: int
    rounds: int
    estimate: EpsilonEstimate
    claim: PrivacyGuarantee
    claimed_epsilon: float | None
    verdict: str
    canary_norm: float
    pair: str

    @property
    def epsilon_lower_bound(self) -> float:
        return self.estimate.epsilon_lower_bound

    def to_dict(self) -> dict[str, Any]:
        estimate = self.estimate.to_dict()
        del estimate["pair"]  # the canary update: P numbers, rebuilt from the config's seed
        return {
            "mechanism": self.mechanism,
            "params": dict(self.params),
            "view": self.view,
            "canary_round": self.canary_round,
            "rounds": self.rounds,
            "epsilon_lower_bound": self.epsilon_lower_bound,
            "claim": self.claim.to_dict(),
            "claimed_epsilon": self.claimed_epsilon,
            "verdict": self.verdict,
            "canary_norm": self.canary_norm,
            "pair": self.pair,
            "estimate": estimate,
        }


def repeated_training_audit(
    config: AuditConfig | None = None,
    *,
    trials: int,
    view: str = View.PUBLIC,
    canary_round: int | None = None,
    confidence: float = 0.95,
    delta: float | None = None,
    canary_norm: float | None = None,
    pair: str = "replace",
    seed: int = 0,
) -> RepeatedTrainingAudit:
    """Retrain ``trials`` times, half with the canary update x0 and half with x1, and certify eps from the
    ``view`` (module docstring).

    config:       the run (default ``quickstart``; meant for small models and few rounds).
    trials:       runs in all (>= 20), split evenly between x0 and x1, half of each held out.
    view:         "public" (the final model) or "server" (the canary client's decoded update).
    canary_round: the round the canary client takes part in (default the last).
    seed:         keys the trials' training and mechanism randomness (the data stay the config's).
    """
    Choice(VIEWS).check(view, "view")
    Number(0, 1, low_open=True, high_open=True).check(confidence, "confidence")
    Optional(Number(0, 1, high_open=True)).check(delta, "delta")
    _NORM.check(canary_norm, "canary_norm")
    Choice(PAIRS).check(pair, "pair")
    config = _without_checkpoints(config if config is not None else _quickstart_setting())
    rounds = config.training.rounds
    canary_round = rounds if canary_round is None else canary_round
    Integer(1, rounds).check(canary_round, "canary_round")
    device = resolve_device(config.device)
    mechanism = build_mechanism(config)
    data, input_shape, num_classes, _ = prepare_data(config)
    claim = mechanism.guarantee()
    delta = _claim_and_delta(claim, delta)
    norm = _canary_norm(mechanism, canary_norm)
    size = count_parameters(build_model(config.training, input_shape, num_classes, dp_sgd=config.dp_sgd.enabled))
    c = canary_direction(derive_seed(config.seed, "repeated-training"), 0, size, norm).to(torch.float64)

    def train(x: torch.Tensor, chunk_seed: int) -> torch.Tensor:
        rows = []
        for i, row in enumerate(x):
            trial = derive_seed(chunk_seed, i)
            protocol = _OneCanary(UplinkProtocol(mechanism, trial), config.training.clients,
                                  row.to(torch.float32).view(1, -1), canary_round)
            model = build_model(config.training, input_shape, num_classes, dp_sgd=config.dp_sgd.enabled)
            result = FederatedSimulation(model, data, protocol, config.training, seed=trial, device=device).run()
            rows.append(result.final_params if view == View.PUBLIC else protocol.decoded)
        return torch.stack(rows).to(torch.float64)

    train.__name__ = f"FL training ({config.training.model}, {rounds} rounds), {view} view"
    estimate = distinguish(
        train, (-1.0 if pair == "replace" else 0.0) * c, c, trials=trials, confidence=confidence, delta=delta,
        claimed_eps=claim.epsilon, statistics=("projection", "classifier"),
        label=f"canary client in round {canary_round}: {'-c' if pair == 'replace' else '0'} vs +c", seed=seed,
    )  # fmt: skip
    return RepeatedTrainingAudit(
        mechanism=mechanism.name,
        params=dict(mechanism.params),
        view=view,
        canary_round=canary_round,
        rounds=rounds,
        estimate=estimate,
        claim=claim,
        claimed_epsilon=claim.epsilon,
        verdict=verdict(estimate, claim),
        canary_norm=norm,
        pair=pair,
    )


# ---------------------------------------------------------------- the audit's canary stage: the whole run's claim

STATISTICS = {
    View.AGGREGATE: "projection on the canary's direction, summed over every round",
    View.SERVER: "projection of its decoded messages, summed over the rounds it sent",
    View.PUBLIC: "projection of the final model's move",
}


def judged_views(mechanism: Any, config: AuditConfig) -> tuple[str, ...]:
    """The views the canary stage judges: ``[canary] view`` where set, else the view the claim covers
    (``mechanism.view``: "server" for a local mechanism, "aggregate" for noise the server adds) and the public one.
    ``ConfigError`` for a server view the claim does not cover (noise the server adds: the server sees the
    messages in clear) or a protocol without one decoded message per client."""
    covered = View.SERVER if mechanism.view == View.SERVER and mechanism.protocol is None else View.AGGREGATE
    if config.canary.view is None:
        return (covered, View.PUBLIC)
    if config.canary.view == View.SERVER and covered != View.SERVER:
        raise ConfigError(f"canary.view = 'server' is not covered by {mechanism.name}'s claim (its view is "
                          f"{mechanism.view!r}, protocol {mechanism.protocol or 'uplink'}); use 'aggregate' or 'public'")
    return (config.canary.view,)


def composed_claim_curve(mechanism: Any, config: AuditConfig) -> tuple[Any, dict[str, Any]]:
    """The whole run's claim: the mechanism's one-round event composed over the run's rounds, amplified by the
    run's client sampling where the claim covers it (``auditkit.stages.account.account_rounds``, the number the
    accounting section states), as a trade-off curve (``auditkit.accounting.composed_tradeoff``; else the (eps,
    delta) curve of the accountant's number); (None, ...) without a claim or a composition. Returns the curve and
    the ``claim`` dict of the results' canary section."""
    import dp_accounting

    rounds = config.training.rounds
    entry = account_rounds(mechanism, rounds, config.accounting, config.training)
    composed, sampling = entry["composed"], entry.get("sampling") or {}
    delta = config.accounting.composition_delta
    if composed is None:
        why = entry["refusal"] or "the mechanism claims no privacy"
        return None, {"epsilon": None, "delta": delta, "curve": None, "rounds": rounds,
                      "note": f"no composed claim over {rounds} rounds: {why}"}
    event = mechanisms.capability(mechanism, "dp_event")
    if sampling.get("amplified"):
        event = dp_accounting.PoissonSampledDpEvent(sampling["sample_rate"], event)
    curve = composed_tradeoff(event, rounds, mechanism.guarantee().relation)
    if curve is None:
        curve = EpsDeltaTradeOff(composed["epsilon"], composed["delta"])
    stated = curve.epsilon(delta)
    note = (f"the whole run's claim: {rounds} rounds composed by {composed['accountant']} (ε = "
            f"{composed['epsilon']:.4g} at δ = {delta:g}); {sampling.get('note', 'no client sampling')}; judged on "
            f"its trade-off curve ({curve.label}: ε = {stated:.4g} at δ = {delta:g})")
    return curve, {"epsilon": stated, "delta": delta, "curve": curve.label, "rounds": rounds, "note": note,
                   "accountant_epsilon": composed["epsilon"]}


def canary_stage(config: AuditConfig, *, per_test_confidence: float,
                 on_round: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """The audit's canary stage for one setting: a run of its own with ``[canary] canaries`` canary clients
    (``canary_run``), each judged view's one-run bound (``auditkit.attacks.one_run``) at ``per_test_confidence``
    (its Bonferroni share of the audit's family) against the whole run's composed claim
    (``composed_claim_curve``); the results' ``canary`` section (``auditkit.results.canary_entry``)."""
    start = time.perf_counter()
    c = config.canary
    mechanism = build_mechanism(config)
    views = judged_views(mechanism, config)
    curve, claim = composed_claim_curve(mechanism, config)
    run = canary_run(config, c.canaries, on_round=on_round)
    judged = []
    for view in views:
        scores = run.scores[view]
        bound = one_run_bound(scores, run.inserted, curve=curve, claimed_epsilon=claim["epsilon"], bound=c.bound,
                              guesses=c.guesses, confidence=per_test_confidence, delta=claim["delta"])
        judged.append(results.canary_view(view, STATISTICS[view], bound, scores, run.inserted, curve))
    details = {"participation": config.training.participation, "canary_rate": run.rate,
               "mean_rounds_sent": float(run.rounds_sent.mean()), "canary_norm": run.canary_norm,
               "pair": "c or nothing" if run.relation == "ADD_OR_REMOVE_ONE" else "+c or -c",
               "test_accuracy": run.test_accuracy}
    return results.canary_entry(kind="fl", canaries=c.canaries, bound=c.bound,
                                confidence=config.distinguish.confidence, claim=claim, views=judged,
                                seconds=time.perf_counter() - start, details=details)
