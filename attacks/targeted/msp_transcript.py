"""MSP-FL's adaptive test (paper 004): the consensus transcript reconstructs what its first upload hides.

``msp_transcript`` (``msp``, ``msp-laplace``, ``mspdq``). MSP+Lap's Proposition 1 protects the first upload
alpha_0 = w + Laplace(2 clip / eps_dp); MSP-FL claims that hidden m_i keep w_i secret. Client 0's model is
-clip e_1 or +clip e_1 (d = 2) beside two fixed peers; the ``alpha0`` view is its first upload, the
``transcript`` view the server's least-squares reconstruction (``auditkit.attacks.reconstruct_msp``) from all
K_t + 1 uploads. alpha_0 stays within eps_dp; the transcript recovers the model to float32 precision and is
told apart perfectly (bound = the cap), so the verdict against eps_dp is "violated".
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from auditkit import mechanisms
from auditkit.attacks.adaptive_tests import AdaptiveTestResult, adaptive_test, run_views
from auditkit.attacks.bulk_sampling import BatchedMechanism
from auditkit.attacks.targeted.msp_reconstruction import reconstruct_msp
from auditkit.mechanisms import Mechanism

__all__ = ["msp_transcript"]

MSP_FAMILY = ("msp", "msp-laplace", "mspdq")
MSP_PEERS = torch.tensor([[0.3, -0.2], [0.1, 0.4]], dtype=torch.float64)  # the other clients' models


def _msp_views(m: Mechanism) -> dict[str, BatchedMechanism]:
    """The ``alpha0`` and ``transcript`` views of client 0 in a consensus round with the fixed ``MSP_PEERS``, as
    batched callables: row b of x (B, d) is client 0's model in trial b. Trials are tiled along the coordinates
    of ONE consensus run (faithful: the split, the noise, the rounding and the consensus act coordinate by
    coordinate, the clip is applied per trial before tiling, and with m_max = 1 every m_i is 1 in every trial);
    with m_max > 1 each trial runs its own consensus. The transcript view is the least-squares reconstruction
    of client 0's model from its trial's slice of the transcript (``auditkit.attacks.reconstruct_msp``)."""

    def run(x: torch.Tensor, seed: int) -> tuple[Any, int]:
        rows, d = x.shape
        clipped = torch.stack([m.clip_update(row) for row in x])
        peers = MSP_PEERS[:, :d].repeat(1, rows)
        return m.run_consensus(torch.cat([clipped.reshape(1, -1), peers]), seed), d

    def trials(x: torch.Tensor, seed: int) -> list[tuple[Any, int]]:
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


@adaptive_test(*MSP_FAMILY)
def msp_transcript(m: Mechanism, *, trials: int, confidence: float, seed: int) -> AdaptiveTestResult:
    """MSP-FL's transcript (module docstring): client 0's model -clip e_1 vs +clip e_1 (d = 2) among
    two fixed peers, observed through its first upload alpha_0 and through the whole consensus transcript
    (the server's least-squares reconstruction), each with ``trials`` outputs, Bonferroni over the two."""
    if m.params["consensus_rounds"] < 2:
        raise ValueError("msp_transcript needs consensus_rounds >= 2 (the reconstruction solves for m and gamma)")
    clip = m.params.get("clip", 1.0)
    x0 = torch.tensor([-clip, 0.0], dtype=torch.float64)
    views = _msp_views(m)
    return run_views(
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
