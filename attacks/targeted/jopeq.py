"""JoPEQ's adaptive tests (paper 002): the scale zeta sent in clear, and quantizer overload.

``jopeq_scale_side_channel``: JoPEQ (Lang et al., Sec. III-A) sends zeta = sqrt(M) / (3 ||h||) in clear; h = e_1
(M = 9, zeta = 1) and h' = 4 h have identical scaled updates, so the claim covers them, yet zeta' = zeta / 4:
the ``message`` view reads zeta (a perfect test, bound = cap), the ``decoded`` view h + (n + e) / zeta sees a
4 times wider noise (eps = infinity).

``jopeq_overload``: the ``edge`` pair (scaled block at -1 / +1, inside the claimed domain) is judged; an overload
clamps the index of Q(zeta h_i + n_i - V_i), post-processing of zeta h + n, so it adds no privacy loss beyond
the PPN's own and the test certifies the moment-matching excess. The ``spike`` pair (h = +-e_1, M = 144, so
zeta h_1 = +-4, outside the domain) is reported in ``findings``, not judged. Overload rates and the full argument:
docs/methodology/distinguishing.md (#jopeq-tests).
"""

from __future__ import annotations

import torch

from auditkit import mechanisms
from auditkit.attacks.adaptive_tests import AdaptiveTestResult, adaptive_test, message_side_channel, run_views
from auditkit.mechanisms import Mechanism

__all__ = ["jopeq_overload", "jopeq_scale_side_channel"]

JOPEQ = ("jopeq-laplace", "jopeq-t", "jopeq-exact")
JOPEQ_MOMENT_MATCHED = ("jopeq-laplace", "jopeq-t")  # a finite quantizer range that can overload
SCALE_RATIO = 4.0  # h' = r h in the side-channel pair
SPIKE_BLOCKS = 144  # a one-coordinate update in M = 144 blocks is scaled to sqrt(M)/3 = 4


def _blocks(mechanism: Mechanism) -> tuple[int, int]:
    """(M, L): the blocks and the block length of the mechanism's declared audit setting (M L = its dimension,
    M = 9 so that zeta = 1 for ||h|| = 1)."""
    setting = mechanism.audit_setting()
    return setting.dimension // setting.block, setting.block


@adaptive_test(*JOPEQ)
def jopeq_scale_side_channel(m: Mechanism, *, trials: int, confidence: float, seed: int) -> AdaptiveTestResult:
    """JoPEQ's zeta side channel (module docstring): h = e_1 vs 4 h (M = 9 blocks), in the
    ``message`` view (zeta parsed from the bytes) and the ``decoded`` view (noise scaled by 1/zeta), each with
    ``trials`` outputs, Bonferroni over the two; the verdict is against the claim per scaled block."""
    blocks, block = _blocks(m)
    x0 = torch.zeros(blocks * block, dtype=torch.float64)
    x0[0] = 1.0
    x1 = SCALE_RATIO * x0
    side = message_side_channel(m)
    zetas = side(torch.stack([x0, x1]), seed)[:, 0].tolist()
    return run_views(
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
    tiling, per-block randomness iid; ``auditkit.attacks.bulk_sampling``)."""
    return m.encode(x.repeat(copies), seed).overloads / copies


@adaptive_test(*JOPEQ_MOMENT_MATCHED)
def jopeq_overload(m: Mechanism, *, trials: int, confidence: float, seed: int) -> AdaptiveTestResult:
    """JoPEQ quantizer overload (module docstring): the ``edge`` pair inside the claimed domain
    (judged) and the ``spike`` pair whose scaled block leaves it (reported), each with ``trials`` outputs of
    the real mechanism; overloads per message measured on ``trials`` messages per input."""
    blocks, block = _blocks(m)
    edge0 = torch.zeros(blocks * block, dtype=torch.float64)
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
    result = run_views(
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
