"""CEPAM's adaptive test (paper 000): the normalisation variant reveals ||x||.

``cepam_normalisation`` (``cepam-gaussian``, ``cepam-laplace``). With ``compat=paper000`` (CEPAM 000
Algorithm 2) the client quantizes clip x / ||x|| and sends ||x|| (float32); the server outputs
y = x + (||x|| / clip) N with N the target noise. Pair x0 = (clip/4) e_1, x1 = clip e_1 in d = 16
coordinates: both in the clip ball, 3 clip / 4 apart (within the claimed 2 clip). In the ``decoded`` view
(the claim's threat model: observers without the seed) the noise is 4 times narrower for x0, so the
spread ||y||^2 (classifier features y^2) separates them; in the ``message`` view ||x|| is read in clear.
With ``compat=none`` the noise does not depend on x and the same test is a plain (passing) audit.
"""

from __future__ import annotations

import torch

from auditkit.attacks.adaptive_tests import AdaptiveTestResult, adaptive_test, message_side_channel, run_views
from auditkit.attacks.bulk_sampling import BatchedMechanism
from auditkit.mechanisms import Mechanism

__all__ = ["cepam_normalisation"]

CEPAM = ("cepam-gaussian", "cepam-laplace")
CEPAM_DIMENSION = 16
CEPAM_NORM_RATIO = 4.0  # ||x1|| / ||x0|| in the pair


@adaptive_test(*CEPAM)
def cepam_normalisation(m: Mechanism, *, trials: int, confidence: float, seed: int) -> AdaptiveTestResult:
    """CEPAM 000's normalisation (module docstring): x0 = (clip/4) e_1 vs x1 = clip e_1 (d = 16) in
    the ``decoded`` view (noise scaled by ||x|| / clip) and the ``message`` view (||x|| in clear when
    ``compat=paper000``), each with ``trials`` outputs; the verdict is against the per-round claim."""
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
    return run_views(
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
