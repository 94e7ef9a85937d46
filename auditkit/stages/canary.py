"""End-to-end canary audits inside FL: one training run (Steinke, Nasr & Jagielski 2023) and repeated training
(Jagielski, Ullman & Oprea 2020), on the real FedAvg run of an ``AuditConfig``.

Canary clients (the design both audits share, ``CanaryProtocol``). Next to the K real clients, canary clients
K, K+1, ... take part in a round. A canary client's update, before the mechanism, is a white-box canary
(Nasr et al. 2023; Andrew et al. 2024): a direction c_i = canary_norm g_i / ||g_i||_2 with g_i ~ N(0, I_P)
(P = the model's parameter count; ``canary_norm`` defaults to the mechanism's ``clip``, else 1). With
``pair="replace"`` it sends +c_i when canary i is in and -c_i when out: two updates of the clip ball 2 clip
apart, the replace-one neighbours the registered claims are stated for. With ``pair="add"`` it sends c_i or
the zero update (the add/remove shape, clip apart). Its message goes through the run's own protocol (encode
with the shared seed keyed by (client, round), real bytes, decode), and the server aggregates it with
FedAvg like any other message; the canary clients of a round share the weight of one average real client
(each mean(p_k) / C), so that many canaries per round do not drown the real updates. Training proceeds for
real; each canary touches exactly one client message of one round. Canary clients take part in every round
whatever the participation rule (they are the auditor's probes); a round in which the simulation selects
no real client (Poisson participation) is skipped, and its canaries are abstained on.

One run (``one_run_canary_audit``). m canaries, C = ceil(m / T) per round over T rounds (canary i in round
1 + i // C). Canary i is in with probability 1/2, independently (keyed bits, ``derive_seed``). Its score is
read from the ``server`` view after the mechanism, s_i = <y_i, c_i> / ||c_i||^2 with y_i the decoded update
of the canary client that carried it (about +1 when in, -1 or 0 when out). The auditor guesses on the k
most confident canaries -- the scores farthest from the midpoint tau of the two expected scores (0 for
"replace", 1/2 for "add"), "in" above tau and "out" below -- abstains on the rest, and counts the correct
guesses V (with k/2 guesses of each kind, Steinke et al.'s top/bottom rule, k = m would force wrong guesses
whenever the number of inserted canaries is not m/2); ``auditkit.attacks.epsilon_bounds.one_run_epsilon_lower_bound(V, k, m)`` gives the bound: under
(eps, delta)-DP with respect to each inclusion bit, V is dominated by Binomial(k, e^eps / (1 + e^eps)) plus a
delta term (their Theorem and its delta extension). k is taken on the grid m, m/2, m/4, ... (down to 20),
each at the Bonferroni confidence 1 - (1 - confidence) / |grid|, and the largest bound is reported: valid at
``confidence`` whichever k wins. ``guesses=k`` fixes k a priori (no correction).

Which claim the bound is compared with. Changing inclusion bit i changes the input of exactly one mechanism
call (canary i's client in its round); every other message's input depends on bit i only through earlier
decoded outputs (the global model), and scoring uses only decoded outputs. By adaptive composition the whole
server view is then (eps, delta)-DP with respect to bit i whenever one call is (eps, delta)-DP: the
theorem's premise holds with the mechanism's *per-round, client-level* claim (``guarantee()``), not the
claim composed over rounds (which is about a client present in every round) and not one amplified by
averaging (the server sees each message). The scores use the decoded update only, never the shared seed,
so the claims stated for observers without the seed (CEPAM, jopeq-exact) are tested in their own threat
model. The mechanism's noise and the inclusion bits come from unrelated keyed streams of the config's seed
(SHA-256 domain separation), treated as independent randomness.

Repeated training (``repeated_training_audit``). One canary client takes part in round ``canary_round``
(default the last) with update x1 = +c (D') or x0 = -c / 0 (D); each trial retrains from scratch on the fixed
data and partition with fresh training and mechanism randomness (the simulation seed
``derive_seed(seed, chunk, i)``), and the observed view -- the final model (``public``) or the canary
client's decoded update (``server``) -- is handed to ``auditkit.attacks.distinguish`` as the output of a batched
callable: its selection half picks the statistic and threshold (projection <y, c>, classifier), its held-out
half certifies the bound (Clopper-Pearson, ``epsilon_lower_bound``). The same per-round claim applies. Trials
run one after another through the real ``FederatedSimulation`` (the code path being audited); they are
independent, so the cost is trials x one short run -- meant for small models and few rounds.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from auditkit.attacks.distinguish import EpsilonEstimate, distinguish
from auditkit.attacks.epsilon_bounds import one_run_epsilon_lower_bound
from auditkit.attacks.verdicts import bonferroni_confidence, verdict
from auditkit.config import AuditConfig, from_dict, preset_dict
from auditkit.fl.aggregation import UplinkProtocol
from auditkit.mechanisms.protocol import RoundOutcome, RoundProtocol
from auditkit.fl.simulation import FederatedSimulation
from auditkit.models import create_model
from auditkit.stages.train import Experiment, build_mechanism, prepare_data, resolve_device
from auditkit.mechanisms.guarantee import PrivacyGuarantee
from auditkit.mechanisms.randomness import derive_seed, generator

__all__ = [
    "PAIRS",
    "VIEWS",
    "CanaryAudit",
    "CanaryProtocol",
    "RepeatedTrainingAudit",
    "canary_direction",
    "guess_grid",
    "one_run_canary_audit",
    "repeated_training_audit",
]

PAIRS = ("replace", "add")
VIEWS = ("public", "server")
MIN_GRID_GUESSES = 20  # the guess grid halves m down to this


def canary_direction(seed: int, index: int, size: int, norm: float) -> torch.Tensor:
    """c_i = norm g / ||g||_2, g ~ N(0, I_size) from the stream keyed by (seed, "canary", index) (float32)."""
    g = torch.randn(size, generator=generator(derive_seed(seed, "canary", index), "direction"), dtype=torch.float64)
    return (norm * g / torch.linalg.vector_norm(g)).to(torch.float32)


def guess_grid(canaries: int) -> list[int]:
    """k = m, m // 2, m // 4, ... while at least ``MIN_GRID_GUESSES`` (just [m] for smaller m)."""
    grid = [canaries]
    while grid[-1] // 2 >= MIN_GRID_GUESSES:
        grid.append(grid[-1] // 2)
    return grid


class CanaryProtocol:
    """A round protocol that appends canary clients to the real ones (module docstring).

    inner:   the run's protocol (``views["server"]`` must hold the decoded updates, one row per client, in order).
    first:   the id of the first canary client (the number of real clients).
    updates: round -> the canary clients' updates of that round (C_t, P); zero rows mean no canary client.
    observe: called with (round, the canary clients' decoded updates (C_t, P)) after the round.
    """

    def __init__(
        self,
        inner: RoundProtocol,
        first: int,
        updates: Callable[[int], torch.Tensor],
        observe: Callable[[int, torch.Tensor], None],
    ) -> None:
        self.inner, self.first, self.updates, self.observe = inner, first, updates, observe

    def communicate(
        self, updates: torch.Tensor, clients: list[int], weights: torch.Tensor, round_: int,
        *, global_params: torch.Tensor | None = None,
    ) -> RoundOutcome:
        canary = self.updates(round_).to(updates.device, updates.dtype)
        if len(canary) == 0:
            return self.inner.communicate(updates, clients, weights, round_, global_params=global_params)
        share = weights.mean() / len(canary)  # the canary clients of a round weigh as one average client
        outcome = self.inner.communicate(
            torch.cat([updates, canary]),
            clients + [self.first + j for j in range(len(canary))],
            torch.cat([weights, share.expand(len(canary))]),
            round_,
        )
        self.observe(round_, outcome.views["server"][len(clients) :].detach().cpu())
        return outcome


@dataclass(frozen=True)
class CanaryAudit:
    """A one-run canary audit: the counts, the certified bound and the verdict against the per-round claim.

    canaries (m), guesses (k), correct (V): the winning k of the grid and its correct guesses.
    epsilon_lower_bound: certified at ``confidence`` (family-wise over ``grid``) for ``delta``.
    max_certifiable: the bound if every guess of the grid's best k were right (the cap for this m).
    claim, claimed_epsilon: the mechanism's per-round client-level claim; verdict: ``auditkit.attacks.verdicts.verdict``.
    bounds, correct_by_guesses: the bound and V for every k of the grid.
    test_accuracy: the final model's (trained for real, canaries included); seconds: wall time of the audit.
    scores, inserted: every canary's score s_i and inclusion bit (not in ``to_dict``).
    """

    mechanism: str
    params: dict[str, Any]
    canaries: int
    guesses: int
    correct: int
    epsilon_lower_bound: float
    max_certifiable: float
    confidence: float
    per_guess_confidence: float
    delta: float
    claim: PrivacyGuarantee
    claimed_epsilon: float | None
    verdict: str
    grid: tuple[int, ...]
    bounds: dict[int, float]
    correct_by_guesses: dict[int, int]
    rounds: int
    canaries_per_round: int
    canary_norm: float
    pair: str
    test_accuracy: float
    seconds: float
    scores: tuple[float, ...] = dataclasses.field(repr=False)
    inserted: tuple[bool, ...] = dataclasses.field(repr=False)
    view: str = "server"

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict of everything but the per-canary scores."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("scores", "inserted")}
        out["claim"] = self.claim.to_dict()
        out["grid"] = list(self.grid)
        out["bounds"] = {str(k): v for k, v in self.bounds.items()}
        out["correct_by_guesses"] = {str(k): v for k, v in self.correct_by_guesses.items()}
        return out


class _Bound(NamedTuple):
    """The fields ``auditkit.attacks.verdicts.verdict`` reads."""

    epsilon_lower_bound: float
    max_certifiable: float
    delta: float
    claimed_epsilon: float | None


def _integer(name: str, value: Any, low: int, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        allowed = f"in {low}..{high}" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be an integer {allowed}, got {value!r}")


def _check_common(confidence: float, delta: float | None, canary_norm: float | None, pair: str) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if delta is not None and not 0 <= delta < 1:
        raise ValueError(f"delta must be None or in [0, 1), got {delta!r}")
    if canary_norm is not None and not (math.isfinite(canary_norm) and canary_norm > 0):
        raise ValueError(f"canary_norm must be None or a finite number > 0, got {canary_norm!r}")
    if pair not in PAIRS:
        raise ValueError(f"pair must be one of {', '.join(PAIRS)}, got {pair!r}")


def _quickstart_setting() -> AuditConfig:
    """The quickstart preset's data and training with mechanism ``none``."""
    return from_dict(preset_dict("quickstart", mechanisms=False))


def _with_rounds(config: AuditConfig, rounds: int | None) -> AuditConfig:
    """The config with ``rounds`` (if given) and no checkpoint views (the canary audits keep their own)."""
    training = dataclasses.replace(config.training, checkpoints=())
    if rounds is not None:
        training = dataclasses.replace(training, rounds=rounds)
    return dataclasses.replace(config, training=training)


def _claim_and_delta(claim: PrivacyGuarantee, delta: float | None) -> float:
    """The delta of the bound: given, else the claim's (0 without a claim)."""
    if delta is not None:
        return delta
    return claim.delta if claim.epsilon is not None else 0.0


def _out_sign(pair: str) -> float:
    return -1.0 if pair == "replace" else 0.0


def one_run_canary_audit(
    config: AuditConfig | None = None,
    *,
    canaries: int = 1000,
    rounds: int | None = None,
    guesses: int | None = None,
    confidence: float = 0.95,
    delta: float | None = None,
    canary_norm: float | None = None,
    pair: str = "replace",
) -> CanaryAudit:
    """Train the config's FL run once with ``canaries`` canary updates and certify eps (module docstring).

    config:      the run (default: the ``quickstart`` preset's setting with mechanism ``none``); its mechanism is audited.
    canaries:    m >= 1, spread over the rounds, ceil(m / rounds) canary clients per round.
    rounds:      T (default the config's).
    guesses:     k in 1..m fixed a priori, or None for the grid m, m/2, ... with Bonferroni.
    confidence:  in (0, 1); delta: of the bound, in [0, 1) (default: the claim's, 0 without one).
    canary_norm: ||c_i||_2 (default the mechanism's ``clip``, else 1); pair: "replace" (+c/-c) or "add" (c/0).
    """
    _integer("canaries", canaries, 1)
    if guesses is not None:
        _integer("guesses", guesses, 1, canaries)
    if rounds is not None:
        _integer("rounds", rounds, 1)
    _check_common(confidence, delta, canary_norm, pair)
    start = time.perf_counter()
    config = _with_rounds(config if config is not None else _quickstart_setting(), rounds)
    experiment = Experiment(config)
    simulation, mechanism = experiment.simulation, experiment.mechanism
    claim = mechanism.guarantee()
    delta = _claim_and_delta(claim, delta)
    norm = canary_norm if canary_norm is not None else float(mechanism.params.get("clip", 1.0))
    per_round = -(-canaries // config.training.rounds)
    size = simulation.layout.size
    key = derive_seed(config.seed, "canary-audit")
    inserted = torch.randint(0, 2, (canaries,), generator=generator(key, "inclusion")).bool()
    scores = torch.full((canaries,), math.nan, dtype=torch.float64)
    directions: dict[int, torch.Tensor] = {}

    def round_canaries(round_: int) -> range:
        return range((round_ - 1) * per_round, min(round_ * per_round, canaries))

    def updates(round_: int) -> torch.Tensor:
        directions.clear()
        rows = []
        for i in round_canaries(round_):
            directions[i] = canary_direction(key, i, size, norm)
            rows.append(directions[i] * (1.0 if inserted[i] else _out_sign(pair)))
        return torch.stack(rows) if rows else torch.zeros(0, size)

    def observe(round_: int, decoded: torch.Tensor) -> None:
        for row, i in zip(decoded, round_canaries(round_), strict=True):
            c = directions[i].to(torch.float64)
            scores[i] = float(row.to(torch.float64) @ c) / float(c @ c)

    simulation.protocol = CanaryProtocol(simulation.protocol, config.training.clients, updates, observe)
    records = simulation.run().rounds

    midpoint = (1.0 + _out_sign(pair)) / 2  # between the expected scores of "in" (1) and "out" (-1 or 0)
    scored = torch.nonzero(torch.isfinite(scores)).flatten()  # a round without real clients is skipped
    order = scored[torch.argsort((scores[scored] - midpoint).abs(), descending=True, stable=True)]
    guess_in = scores > midpoint
    grid = [k for k in ([guesses] if guesses is not None else guess_grid(canaries)) if k <= len(order)] or [len(order)]
    per_guess = bonferroni_confidence(confidence, len(grid))
    bounds, correct_by = {}, {}
    for k in grid:
        chosen = order[:k]  # the k most confident; the rest (and unscored canaries) are abstained on
        correct_by[k] = int((guess_in[chosen] == inserted[chosen]).sum())
        bounds[k] = one_run_epsilon_lower_bound(correct_by[k], k, canaries, confidence=per_guess, delta=delta)
    best = max(grid, key=lambda k: bounds[k])  # the largest k wins a tie
    cap = max(one_run_epsilon_lower_bound(k, k, canaries, confidence=per_guess, delta=delta) for k in grid)
    return CanaryAudit(
        mechanism=mechanism.name,
        params=dict(mechanism.params),
        canaries=canaries,
        guesses=best,
        correct=correct_by[best],
        epsilon_lower_bound=bounds[best],
        max_certifiable=cap,
        confidence=confidence,
        per_guess_confidence=per_guess,
        delta=delta,
        claim=claim,
        claimed_epsilon=claim.epsilon,
        verdict=verdict(_Bound(bounds[best], cap, delta, claim.epsilon), claim),
        grid=tuple(grid),
        bounds=bounds,
        correct_by_guesses=correct_by,
        rounds=config.training.rounds,
        canaries_per_round=per_round,
        canary_norm=norm,
        pair=pair,
        test_accuracy=records[-1].test_accuracy,
        seconds=time.perf_counter() - start,
        scores=tuple(scores.tolist()),
        inserted=tuple(inserted.tolist()),
    )


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
    view: str = "public",
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
    if view not in VIEWS:
        raise ValueError(f"view must be one of {', '.join(VIEWS)}, got {view!r}")
    _check_common(confidence, delta, canary_norm, pair)
    config = _with_rounds(config if config is not None else _quickstart_setting(), None)
    rounds = config.training.rounds
    canary_round = rounds if canary_round is None else canary_round
    _integer("canary_round", canary_round, 1, rounds)
    device = resolve_device(config.device)
    mechanism = build_mechanism(config)
    data, input_shape, num_classes, _ = prepare_data(config)
    claim = mechanism.guarantee()
    delta = _claim_and_delta(claim, delta)
    norm = canary_norm if canary_norm is not None else float(mechanism.params.get("clip", 1.0))
    size = sum(
        p.numel()
        for p in create_model(config.training.model, input_shape=input_shape, num_classes=num_classes).parameters()
    )
    c = canary_direction(derive_seed(config.seed, "repeated-training"), 0, size, norm).to(torch.float64)

    def train(x: torch.Tensor, chunk_seed: int) -> torch.Tensor:
        rows = []
        for i, row in enumerate(x):
            trial = derive_seed(chunk_seed, i)
            seen: list[torch.Tensor] = []
            canary = row.to(torch.float32).view(1, -1)
            protocol = CanaryProtocol(
                UplinkProtocol(mechanism, trial),
                config.training.clients,
                lambda t, canary=canary: canary if t == canary_round else canary[:0],
                lambda t, decoded, seen=seen: seen.append(decoded[0]),
            )
            model = create_model(config.training.model, input_shape=input_shape, num_classes=num_classes)
            result = FederatedSimulation(model, data, protocol, config.training, seed=trial, device=device).run()
            rows.append(result.final_params if view == "public" else seen[0])
        return torch.stack(rows).to(torch.float64)

    train.__name__ = f"FL training ({config.training.model}, {rounds} rounds), {view} view"
    estimate = distinguish(
        train, _out_sign(pair) * c, c, trials=trials, confidence=confidence, delta=delta,
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
