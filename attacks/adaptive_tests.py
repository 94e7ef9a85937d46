"""Adaptive, mechanism-specific tests: the published claims' blind spots, each a named distinguishing test.

Every test builds neighbouring pairs that the claim covers (or, where said, that the mechanism lets real
updates reach), observes what the named threat-model view sees, and certifies an epsilon lower bound with
``attacks.distinguish`` (held-out Clopper-Pearson, ``attacks.epsilon_bounds``). Its views/pairs share the
test's ``confidence`` by Bonferroni, and the verdict (``attacks.verdicts.verdict``) compares the worst bound
with the mechanism's ``guarantee()``.

1. ``jopeq_scale_side_channel`` (``jopeq-laplace``, ``jopeq-t``, ``jopeq-exact``). JoPEQ (Lang et al., Sec.
   III-A) scales h by zeta = sqrt(M) / (3 ||h||) and sends zeta in clear. Take h = e_1 (one coordinate in
   block 1, M = 9 blocks, so ||h|| = 1 and zeta = 1) and h' = r h (r = 4). They differ in block 1 only -- the
   claim's unit -- and their scaled updates zeta h = zeta' h' are *identical* (in the unit ball, as the claim
   assumes), so the claim promises eps-indistinguishability at least; but zeta' = zeta / r.
   * ``message`` view (server / eavesdropper): zeta parsed from the bytes of ``encode(x, seed)`` is a
     deterministic function of ||h||, so a perfect test exists and the bound is the sample-size cap.
   * ``decoded`` view (anyone who sees the decoded update, jopeq-exact's own threat model): h~ = h + (n + e)
     / zeta, so the noise of h' is r times wider. The output densities have unbounded ratio (a scale change),
     i.e. eps = infinity; the bound climbs to the cap as trials grow (llr / classifier statistics).
2. ``jopeq_overload`` (``jopeq-laplace``, ``jopeq-t``). The claim assumes the quantizer is not overloaded and
   every scaled block lies in the unit ball; neither is enforced.
   * ``edge`` pair (inside the claimed domain): the audit pair whose scaled block sits at -1 / +1 on the unit
     sphere (same ||h||, same zeta); the PPN pushes blocks past the support (counted from
     ``JoPEQMessage.overloads``: 0.20 overloaded blocks per 9-block message for jopeq-laplace, 0.61 for
     jopeq-t at their defaults; even a block at 0 overloads about 1% of the time). An overload clamps the index of Q(zeta h_i + n_i - V_i); the
     indices are therefore a function of (zeta h + n, V) with the shared dither V independent of h:
     post-processing of zeta h + n. Overload thus adds *no* privacy loss beyond the PPN's own, eps(n) for the
     shift (jopeq-laplace: 2/b' = ``true_epsilon``; jopeq-t: at most eps of t_nu(0, S') alone, which may
     exceed ``true_epsilon`` of n + e). The caveat "the claim does not hold for an overloaded block" is about
     the error's independence of h (utility), not privacy. What the distinguisher certifies on this pair is
     the moment-matching excess (see ``mechanisms.jopeq``), and the verdict is taken on this pair.
   * ``spike`` pair (outside the domain, reported beside it): a sparse update, h = +-e_1 in M = 144 blocks,
     has zeta h_1 = +-sqrt(M)/3 = +-4: the scaling leaves the unit ball and the support, every message
     overloads block 1 and clamps it to an end level, and the pair (one block apart, same zeta) is told apart
     almost surely. Its bound is reported (``findings``) but not judged: the claim excludes such inputs, and
     nothing in JoPEQ keeps real updates out of them.
3. ``cepam_normalisation`` (``cepam-gaussian``, ``cepam-laplace``). With ``compat=paper000`` (CEPAM 000
   Algorithm 2) the client quantizes clip x / ||x|| and sends ||x|| (float32); the server outputs
   y = x + (||x|| / clip) N with N the target noise. Pair x0 = (clip/4) e_1, x1 = clip e_1 in d = 16
   coordinates: both in the clip ball, 3 clip / 4 apart (within the claimed 2 clip). In the ``decoded`` view
   (the claim's threat model: observers without the seed) the noise is 4 times narrower for x0, so the
   spread ||y||^2 (classifier features y^2) separates them; in the ``message`` view ||x|| is read in clear.
   With ``compat=none`` the noise does not depend on x and the same test is a plain (passing) audit.

4. ``dpsq_cross_cell`` (``dpsq``, ``laplace-sq``). DP-SQ (seed 001) proves e^eps1 only for two inputs of one
   quantizer cell and then applies it to the whole range [-C, C]. One coordinate: the ``in-cell`` pair -Delta/4
   vs +Delta/4 (the claim's own unit, judged), Delta/2 -+ Delta/8 across the central cell's upper boundary,
   and the range ends -C vs C. Q_{b,eps1} answers with an end of the input's cell, so inputs of different
   cells have different output supports: a perfect test, bound = the cap, for b >= 2. LaplaceSQ with rho < 2C
   (e.g. rho = Delta) has a finite whole-range epsilon eps1 2C / rho, which the range-ends pair approaches.
   Verdict ``CELL_LOCAL_ONLY`` ("claim holds only cell-locally") when the in-cell pair is consistent and a
   cross-cell pair violates eps1.

5. ``msp_transcript`` (``msp``, ``msp-laplace``, ``mspdq``). MSP+Lap's Proposition 1 protects the first upload
   alpha_0 = w + Laplace(2 clip / eps_dp); MSP-FL claims that hidden m_i keep w_i secret. Client 0's model is
   -clip e_1 or +clip e_1 (d = 2) beside two fixed peers; the ``alpha0`` view is its first upload, the
   ``transcript`` view the server's least-squares reconstruction (``attacks.reconstruct_msp``) from all
   K_t + 1 uploads. alpha_0 stays within eps_dp; the transcript recovers the model to float32 precision and is
   told apart perfectly (bound = the cap), so the verdict against eps_dp is "violated".

``adaptive_tests_for(name)`` lists the tests the audit pipeline runs for a mechanism (``ADAPTIVE_TESTS``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

import mechanisms
from attacks.bulk_sampling import BatchedMechanism, resolve_mechanism
from attacks.distinguish import EpsilonEstimate, distinguish
from attacks.verdicts import CELL_LOCAL_ONLY, VIOLATED, bonferroni_confidence, verdict
from mechanisms.base import Mechanism
from mechanisms.cepam import CEPAMGaussian, CEPAMLaplace
from mechanisms.dpsq import DPSQ, LaplaceSQ
from mechanisms.jopeq import JoPEQLaplace, JoPEQMessage, JoPEQT
from mechanisms.jopeq_exact import JoPEQExact
from mechanisms.msp import MSP, MSPDQ, MSPLaplace, MSPTranscript
from mechanisms.rsuq_coding import RSUQMessage

__all__ = [
    "ADAPTIVE_TESTS",
    "AdaptiveTest",
    "AdaptiveTestResult",
    "adaptive_tests_for",
    "cepam_normalisation",
    "dpsq_cross_cell",
    "jopeq_overload",
    "jopeq_scale_side_channel",
    "message_side_channel",
    "msp_transcript",
]

DEFAULT_TRIALS = 10_000  # per view or pair: 2,500 held-out outputs per side, cap ~6.5 at 95%
SCALE_RATIO = 4.0  # h' = r h in the JoPEQ side-channel pair
JOPEQ_BLOCKS = 9  # M = 9 blocks with ||h|| = 1 give zeta = 1 (``attacks.audit_settings``)
SPIKE_BLOCKS = 144  # a one-coordinate update in M = 144 blocks is scaled to sqrt(M)/3 = 4
CEPAM_DIMENSION = 16
CEPAM_NORM_RATIO = 4.0  # ||x1|| / ||x0|| in the CEPAM pair
MSP_PEERS = torch.tensor([[0.3, -0.2], [0.1, 0.4]], dtype=torch.float64)  # the other clients' models (test 5)


@dataclass(frozen=True)
class AdaptiveTestResult:
    """One adaptive test: the claim it tests, what it observed, the bounds, the verdict.

    test:          the test's name; mechanism: the mechanism's name and params.
    claim:         the claim tested, in words; claimed_epsilon: its epsilon (None: no claim).
    estimates:     one ``EpsilonEstimate`` per view or pair (labels in ``estimate.pair.label``).
    judged:        for each estimate, whether the verdict rests on it (False: reported only, e.g. a pair
                   outside the claim's domain).
    worst:         the judged estimate with the largest bound; verdict: ``verdict(worst, guarantee)``.
    confidence:    family-wise over the estimates (each at ``per_test_confidence``, Bonferroni).
    findings:      measured side facts (overload rates, zeta values, a reported-only bound).
    note:          how to read the result.
    """

    test: str
    mechanism: str
    params: dict[str, Any]
    claim: str
    claimed_epsilon: float | None
    estimates: tuple[EpsilonEstimate, ...]
    judged: tuple[bool, ...]
    worst: EpsilonEstimate
    verdict: str
    confidence: float
    per_test_confidence: float
    findings: dict[str, float] = field(default_factory=dict)
    note: str = ""

    @property
    def epsilon_lower_bound(self) -> float:
        """The worst judged bound."""
        return self.worst.epsilon_lower_bound

    @property
    def statistic(self) -> str:
        """The statistic of the worst judged estimate."""
        return self.worst.statistic

    def to_dict(self) -> dict[str, Any]:
        return {
            "test": self.test,
            "mechanism": self.mechanism,
            "params": dict(self.params),
            "claim": self.claim,
            "claimed_epsilon": self.claimed_epsilon,
            "epsilon_lower_bound": self.epsilon_lower_bound,
            "max_certifiable": self.worst.max_certifiable,
            "statistic": self.statistic,
            "worst": self.worst.pair.label,
            "verdict": self.verdict,
            "confidence": self.confidence,
            "per_test_confidence": self.per_test_confidence,
            "findings": dict(self.findings),
            "note": self.note,
            "estimates": [{**e.to_dict(), "judged": j} for e, j in zip(self.estimates, self.judged, strict=True)],
        }


AdaptiveTest = Callable[..., AdaptiveTestResult]
"""test(mechanism, *, trials, confidence, seed) -> AdaptiveTestResult."""


def _resolve(mechanism: str | Mechanism, kinds: tuple[type[Mechanism], ...], test: str, seed: int) -> Mechanism:
    resolved = resolve_mechanism(mechanism, seed=seed)
    if type(resolved) not in kinds:
        names = ", ".join(k.name for k in kinds)
        raise ValueError(f"mechanism must be one of {names} for {test}, got {getattr(resolved, 'name', resolved)!r}")
    return resolved


def _check(trials: int, confidence: float) -> None:
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 20:
        raise ValueError(f"trials must be an integer >= 20, got {trials!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")


def _side_value(message: object) -> float:
    """The scale sent in clear: JoPEQ's zeta, jopeq-exact's zeta or CEPAM 000's ||x||."""
    if isinstance(message, JoPEQMessage):
        return message.zeta
    if isinstance(message, RSUQMessage) and message.side is not None:
        return message.side
    raise ValueError(f"the message of this mechanism carries no side value ({type(message).__name__})")


def message_side_channel(mechanism: Mechanism) -> BatchedMechanism:
    """The ``message`` view as a batched callable: for each row x_i, the side value parsed from the bytes of
    ``mechanism.encode(x_i, derive_seed(seed, i))`` (what the server and an eavesdropper read), shape (B, 1)."""

    def observe(x: torch.Tensor, seed: int) -> torch.Tensor:
        values = []
        for i, row in enumerate(x):
            message = mechanism.encode(row, mechanisms.derive_seed(seed, i))
            values.append(_side_value(type(message).from_bytes(message.to_bytes())))
        return torch.tensor(values, dtype=torch.float64).view(-1, 1)

    observe.__name__ = f"{mechanism.name} side value"
    return observe


def _run(
    test: str,
    mechanism: Mechanism,
    claim: str,
    runs: list[tuple[str, Mechanism | BatchedMechanism, torch.Tensor, torch.Tensor, bool]],
    *,
    trials: int,
    confidence: float,
    seed: int,
    findings: dict[str, float],
    note: str,
) -> AdaptiveTestResult:
    """Distinguish every (label, observed mechanism or view, x0, x1, judged) at the Bonferroni confidence."""
    guarantee = mechanism.guarantee()
    per_test = bonferroni_confidence(confidence, len(runs))
    delta = guarantee.delta if guarantee.epsilon is not None else 0.0
    estimates = tuple(
        distinguish(
            observed, x0, x1, trials=trials, confidence=per_test, delta=delta,
            claimed_eps=guarantee.epsilon, label=label, seed=mechanisms.derive_seed(seed, test, label),
        )
        for label, observed, x0, x1, _ in runs
    )  # fmt: skip
    judged = tuple(run[4] for run in runs)
    worst = max((e for e, j in zip(estimates, judged, strict=True) if j), key=lambda e: e.epsilon_lower_bound)
    return AdaptiveTestResult(
        test=test,
        mechanism=mechanism.name,
        params=dict(mechanism.params),
        claim=f"{claim}; stated claim: {guarantee.summary()}",
        claimed_epsilon=guarantee.epsilon,
        estimates=estimates,
        judged=judged,
        worst=worst,
        verdict=verdict(worst, guarantee),
        confidence=confidence,
        per_test_confidence=per_test,
        findings=findings,
        note=note,
    )


def _block_length(mechanism: Mechanism) -> int:
    return mechanism.target.n if isinstance(mechanism, JoPEQExact) else mechanism.dimension


def jopeq_scale_side_channel(
    mechanism: str | Mechanism,
    *,
    trials: int = DEFAULT_TRIALS,
    confidence: float = 0.95,
    seed: int = 0,
) -> AdaptiveTestResult:
    """JoPEQ's zeta side channel (module docstring, test 1): h = e_1 vs 4 h (M = 9 blocks), in the
    ``message`` view (zeta parsed from the bytes) and the ``decoded`` view (noise scaled by 1/zeta), each with
    ``trials`` outputs, Bonferroni over the two; the verdict is against the claim per scaled block."""
    _check(trials, confidence)
    m = _resolve(mechanism, (JoPEQLaplace, JoPEQT, JoPEQExact), "jopeq_scale_side_channel", seed)
    x0 = torch.zeros(JOPEQ_BLOCKS * _block_length(m), dtype=torch.float64)
    x0[0] = 1.0
    x1 = SCALE_RATIO * x0
    side = message_side_channel(m)
    zetas = side(torch.stack([x0, x1]), seed)[:, 0].tolist()
    return _run(
        "jopeq-scale-side-channel",
        m,
        f"neighbours h, {SCALE_RATIO:g} h differ in one block and have the same scaled update zeta h",
        [
            ("message view: zeta, h vs 4h", side, x0, x1, True),
            ("decoded view: h~ = h + noise / zeta, h vs 4h", m, x0, x1, True),
        ],
        trials=trials,
        confidence=confidence,
        seed=seed,
        findings={"zeta_x0": zetas[0], "zeta_x1": zetas[1]},
        note=(
            "zeta = sqrt(M) / (3 ||h||) is sent in clear: the two inputs have identical scaled updates, so the "
            "claim covers them, yet zeta alone tells them apart (message view) and the decoded noise is 4 times "
            "wider for 4h (decoded view). A bound at max_certifiable means a perfect test: more trials raise it."
        ),
    )


def _overload_rate(m: Mechanism, x: torch.Tensor, copies: int, seed: int) -> float:
    """Mean ``JoPEQMessage.overloads`` per message: one encode of ``copies`` tiled copies (zeta unchanged by
    tiling, per-block randomness iid; ``attacks.bulk_sampling``)."""
    return m.encode(x.repeat(copies), seed).overloads / copies


def jopeq_overload(
    mechanism: str | Mechanism,
    *,
    trials: int = DEFAULT_TRIALS,
    confidence: float = 0.95,
    seed: int = 0,
) -> AdaptiveTestResult:
    """JoPEQ quantizer overload (module docstring, test 2): the ``edge`` pair inside the claimed domain
    (judged) and the ``spike`` pair whose scaled block leaves it (reported), each with ``trials`` outputs of
    the real mechanism; overloads per message measured on ``trials`` messages per input."""
    _check(trials, confidence)
    m = _resolve(mechanism, (JoPEQLaplace, JoPEQT), "jopeq_overload", seed)
    block = _block_length(m)
    edge0 = torch.zeros(JOPEQ_BLOCKS * block, dtype=torch.float64)
    edge0[0] = -1.0  # ||h|| = 1, zeta = 1: scaled block 1 at -e_1 on the unit sphere
    edge1 = -edge0
    spike0 = torch.zeros(SPIKE_BLOCKS * block, dtype=torch.float64)
    spike0[0] = -1.0  # zeta = sqrt(144) / 3 = 4: scaled block 1 at -4 e_1
    spike1 = -spike0
    stream = mechanisms.derive_seed(seed, "overload-rate")
    findings = {
        "edge_overloads_per_message": _overload_rate(m, edge1, trials, stream),
        "spike_overloads_per_message": _overload_rate(m, spike1, trials, stream),
        "support": m.quantizer.params["support"],
        "true_epsilon": m.true_epsilon(),
    }
    result = _run(
        "jopeq-overload",
        m,
        "eps per scaled block with overloads allowed (the claim assumes none): a block at the unit sphere's edge",
        [
            ("edge: scaled block -e1 vs +e1 (in the claimed domain, overloads by noise)", m, edge0, edge1, True),
            (f"spike: scaled block -4e1 vs +4e1 (M = {SPIKE_BLOCKS}, outside the domain)", m, spike0, spike1, False),
        ],
        trials=trials,
        confidence=confidence,
        seed=seed,
        findings=findings,
        note=(
            "Overloads are post-processing of zeta h + n (the dither is independent of h), so inside the domain "
            "they add no privacy loss: the edge bound can exceed the claim only by the moment-matched PPN's excess "
            "(true_epsilon). The spike pair shows that JoPEQ's scaling lets a sparse update's block reach "
            "sqrt(M)/3, beyond the unit ball and the support: it overloads in every message and is told apart "
            "almost surely; it is outside the claim's assumption, so it is reported, not judged."
        ),
    )
    spike = result.estimates[1]  # ``findings`` is the result's dict: add the reported-only bound to it
    findings.update(spike_epsilon_lower_bound=spike.epsilon_lower_bound, spike_max_certifiable=spike.max_certifiable)
    return result


def cepam_normalisation(
    mechanism: str | Mechanism,
    *,
    trials: int = DEFAULT_TRIALS,
    confidence: float = 0.95,
    seed: int = 0,
) -> AdaptiveTestResult:
    """CEPAM 000's normalisation (module docstring, test 3): x0 = (clip/4) e_1 vs x1 = clip e_1 (d = 16) in
    the ``decoded`` view (noise scaled by ||x|| / clip) and the ``message`` view (||x|| in clear when
    ``compat=paper000``), each with ``trials`` outputs; the verdict is against the per-round claim."""
    _check(trials, confidence)
    m = _resolve(mechanism, (CEPAMGaussian, CEPAMLaplace), "cepam_normalisation", seed)
    clip = m.params["clip"]
    x1 = torch.zeros(CEPAM_DIMENSION, dtype=torch.float64)
    x1[0] = clip
    x0 = x1 / CEPAM_NORM_RATIO
    paper000 = m.params["compat"] == "paper000"
    decoded = "y = x + (||x||/clip) noise" if paper000 else "y = clip(x) + noise"
    runs: list[tuple[str, Mechanism | BatchedMechanism, torch.Tensor, torch.Tensor, bool]] = [
        (f"decoded view: {decoded}, ||x|| = clip/4 vs clip", m, x0, x1, True)
    ]
    if paper000:
        runs.append(("message view: ||x|| sent in clear", message_side_channel(m), x0, x1, True))
    return _run(
        "cepam-normalisation",
        m,
        "two updates in the clip ball, 3 clip / 4 apart (the claim covers 2 clip)",
        runs,
        trials=trials,
        confidence=confidence,
        seed=seed,
        findings={"norm_x0": float(x0.norm()), "norm_x1": float(x1.norm())},
        note=(
            "compat=paper000 normalises x to clip x / ||x|| and rescales the decoded update by ||x|| / clip: the "
            "noise is 4 times narrower for the small update, so its spread reveals ||x||, and ||x|| itself is "
            "sent in clear."
            if paper000
            else "compat=none clips instead of normalising: the noise does not depend on x and the test is a plain "
            "audit of the clip-ball claim on this pair."
        ),
    )


def _dpsq_pairs(m: Mechanism) -> list[tuple[str, torch.Tensor, torch.Tensor, bool]]:
    """The in-cell pair (the claim's own unit) and two cross-cell pairs, one coordinate each (module docstring,
    test 4): x = -Delta/4 vs +Delta/4 in the central cell; Delta/2 -+ Delta/8 across its upper boundary; -C vs C."""
    clip, step = m.params["clip"], m.cell_step
    one = lambda v: torch.tensor([v], dtype=torch.float64)  # noqa: E731
    if m.params["bits"] == 1:  # one cell: the whole range is the claim's domain
        return [("one cell: -C vs C (b = 1)", one(-clip), one(clip), True)]
    return [
        ("in-cell: -Delta/4 vs +Delta/4 (the claim's unit)", one(-step / 4), one(step / 4), True),
        ("cross-cell: Delta/2 -+ Delta/8, across one boundary", one(step / 2 - step / 8), one(step / 2 + step / 8), True),
        ("cross-cell: range ends -C vs C", one(-clip), one(clip), True),
    ]


def dpsq_cross_cell(
    mechanism: str | Mechanism,
    *,
    trials: int = DEFAULT_TRIALS,
    confidence: float = 0.95,
    seed: int = 0,
) -> AdaptiveTestResult:
    """DP-SQ's cell-local claim (module docstring, test 4): the in-cell pair and two cross-cell pairs of one
    coordinate, each with ``trials`` outputs of the real mechanism, Bonferroni over the three. The verdict is
    "claim holds only cell-locally" when the in-cell pair is consistent with eps1 and a cross-cell pair is not."""
    _check(trials, confidence)
    m = _resolve(mechanism, (DPSQ, LaplaceSQ), "dpsq_cross_cell", seed)
    pairs = _dpsq_pairs(m)
    result = _run(
        "dpsq-cross-cell",
        m,
        "eps1 per coordinate for two values of one quantizer cell; the paper applies it to the whole range",
        [(label, m, x0, x1, judged) for label, x0, x1, judged in pairs],
        trials=trials,
        confidence=confidence,
        seed=seed,
        findings={"cell_step": m.cell_step, "range_end": m.params["clip"]},
        note=(
            "Q_{b,eps1} answers with one of the two ends of the input's cell: inputs of different cells have "
            "different output supports, so one output can tell them apart and the whole-range epsilon is "
            "infinite for b >= 2 (LaplaceSQ with rho < 2C: eps1 2C / rho). The bound of a perfect test is the "
            "sample-size cap; more trials raise it."
        ),
    )
    if len(result.estimates) > 1 and "cell-local" in m.guarantee().flags:
        in_cell = result.estimates[0]
        if verdict(in_cell, m.guarantee()) != VIOLATED and result.verdict == VIOLATED:
            result = dataclasses.replace(result, verdict=CELL_LOCAL_ONLY)
    return result


def _msp_views(m: Mechanism) -> dict[str, BatchedMechanism]:
    """The ``alpha0`` and ``transcript`` views of client 0 in a consensus round with the fixed ``MSP_PEERS``, as
    batched callables: row b of x (B, d) is client 0's model in trial b. Trials are tiled along the coordinates
    of ONE consensus run (faithful: the split, the noise, the rounding and the consensus act coordinate by
    coordinate, the clip is applied per trial before tiling, and with m_max = 1 every m_i is 1 in every trial);
    with m_max > 1 each trial runs its own consensus. The transcript view is the least-squares reconstruction
    of client 0's model from its trial's slice of the transcript (``attacks.reconstruct_msp``)."""
    from attacks.msp_reconstruction import reconstruct_msp

    def run(x: torch.Tensor, seed: int) -> tuple[MSPTranscript, int]:
        rows, d = x.shape
        clipped = torch.stack([m.clip_update(row) for row in x])
        peers = MSP_PEERS[:, :d].repeat(1, rows)
        return m.run_consensus(torch.cat([clipped.reshape(1, -1), peers]), seed), d

    def trials(x: torch.Tensor, seed: int) -> list[tuple[MSPTranscript, int]]:
        if m.params["m_max"] == 1:
            return [run(x, seed)]
        return [run(row[None], mechanisms.derive_seed(seed, i)) for i, row in enumerate(x)]

    def alpha0(x: torch.Tensor, seed: int) -> torch.Tensor:
        return torch.cat([t.alpha[0, 0].view(-1, d) for t, d in trials(x, seed)])

    def transcript(x: torch.Tensor, seed: int) -> torch.Tensor:
        out = []
        for t, d in trials(x, seed):
            for b in range(t.alpha.shape[2] // d):
                block = slice(b * d, (b + 1) * d)
                part = dataclasses.replace(t, alpha=t.alpha[:, :, block], broadcast=t.broadcast[:, block],
                                           aggregate=t.aggregate[block], hidden=None)
                out.append(reconstruct_msp(part).w_hat[0])
        return torch.stack(out)

    return {"alpha0": alpha0, "transcript": transcript}


def msp_transcript(
    mechanism: str | Mechanism,
    *,
    trials: int = DEFAULT_TRIALS,
    confidence: float = 0.95,
    seed: int = 0,
) -> AdaptiveTestResult:
    """MSP-FL's transcript (module docstring, test 5): client 0's model -clip e_1 vs +clip e_1 (d = 2) among
    two fixed peers, observed through its first upload alpha_0 and through the whole consensus transcript
    (the server's least-squares reconstruction), each with ``trials`` outputs, Bonferroni over the two."""
    _check(trials, confidence)
    m = _resolve(mechanism, (MSP, MSPLaplace, MSPDQ), "msp_transcript", seed)
    if m.params["consensus_rounds"] < 2:
        raise ValueError("msp_transcript needs consensus_rounds >= 2 (the reconstruction solves for m and gamma)")
    clip = m.params.get("clip", 1.0)
    x0 = torch.tensor([-clip, 0.0], dtype=torch.float64)
    views = _msp_views(m)
    return _run(
        "msp-transcript",
        m,
        "client 0's model, l1 distance 2 clip apart, as the server sees it: alpha_0 alone, then every upload",
        [
            ("alpha_0 view: the first upload", views["alpha0"], x0, -x0, True),
            ("transcript view: least-squares reconstruction from all K_t + 1 uploads", views["transcript"], x0, -x0,
             True),
        ],
        trials=trials,
        confidence=confidence,
        seed=seed,
        findings={"consensus_rounds": float(m.params["consensus_rounds"])},
        note=(
            "Each consensus residual r[k] = alpha[k+1] - alpha[k] - eps_c (w[k] - alpha[k]) is linear in the "
            "hidden (S_0, m, 1/gamma), so least squares over K_t > m rounds recovers the model exactly: the noise "
            "(MSP+Lap: Laplace; MSP-FL: the split) protecting alpha_0 is cancelled by what later uploads reveal. "
            "A transcript bound at max_certifiable means a perfect test; alpha_0 alone stays within eps_dp."
        ),
    )


ADAPTIVE_TESTS: dict[str, tuple[AdaptiveTest, ...]] = {
    "jopeq-laplace": (jopeq_scale_side_channel, jopeq_overload),
    "jopeq-t": (jopeq_scale_side_channel, jopeq_overload),
    "jopeq-exact": (jopeq_scale_side_channel,),
    "cepam-gaussian": (cepam_normalisation,),
    "cepam-laplace": (cepam_normalisation,),
    "dpsq": (dpsq_cross_cell,),
    "laplace-sq": (dpsq_cross_cell,),
    "msp": (msp_transcript,),
    "msp-laplace": (msp_transcript,),
    "mspdq": (msp_transcript,),
}
"""Registered mechanism name -> the adaptive tests the audit runs for it (the one place to add tests)."""


def adaptive_tests_for(mechanism_name: str) -> list[AdaptiveTest]:
    """The adaptive tests of ``ADAPTIVE_TESTS`` for a registered mechanism (empty when it has none)."""
    if mechanism_name not in mechanisms.names():
        raise ValueError(
            f"mechanism_name must be a registered mechanism ({', '.join(mechanisms.names())}), got {mechanism_name!r}"
        )
    return list(ADAPTIVE_TESTS.get(mechanism_name, ()))
