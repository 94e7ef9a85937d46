"""The adaptive server attack on model splitting (paper 004, MSP-FL / MSP+Lap / MSPDQ-FL; spec msp.md).

The server sees every upload alpha_i[k], k = 0..K, and its own broadcasts w[k] (the consensus transcript,
``auditkit.mechanisms.msp.MSPTranscript``; read here by its fields ``alpha``, ``broadcast``, ``eps_c`` and ``rounds``).
It knows the public consensus gain eps_c, so it computes the client's private pull

    r_i[k] = alpha_i[k+1] - alpha_i[k] - eps_c (w[k] - alpha_i[k]) = a[k] (S_i[k] - m_i alpha_i[k])      (3a)

with S[k] = sum_n beta_n[k]. Summing (3b) over n gives S[k+1] = S[k] - r[k], so S[k] = S_0 - sum_{k'<k} r[k'],
and with Algorithm 1's a[k] = gamma / (k + 1):

    S_0 - m alpha[k] - (k + 1) (1/gamma) r[k] = sum_{k'<k} r[k'],      k = 0..K-1,

K vector equations, linear in the unknowns (S_0 (P-vector), m, 1/gamma). For fixed (m, 1/gamma) the least-squares
S_0 is the mean over k of the rest, so eliminating it (demeaning every term over k) leaves a 2-unknown least
squares over the K P demeaned coordinates; then S_0 follows, m is rounded when within ``round_tol`` of an integer
>= 1 (1/gamma refitted for it) and w_i = (alpha_i[0] + S_0)/(1 + m_i). Exact up to the uploads' rounding
(float32: ~1e-7 relative) as soon as K >= 2, whatever m_i (one equation per k, K - 1 >= 1 after demeaning, P >> 2
coordinates); K = 1 only gives r[0] = gamma (1 + m) (w - alpha[0]), the direction of w - alpha[0]
(``first_residual_direction``), whose scale the public split law pins down (``reconstruct_from_split_support``).
Under MSPDQ-FL the uploads are stochastic knots and the same solve is a noisy least squares.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from auditkit.attacks.observations import update_estimator

__all__ = [
    "ConsensusTranscript",
    "MSPReconstruction",
    "msp_update_estimates",
    "reconstruct_msp",
    "pull_residuals",
    "first_residual_direction",
    "reconstruct_from_split_support",
]


class ConsensusTranscript(Protocol):
    """What the server records of one consensus round: uploads ``alpha`` (K + 1, M, P), its broadcasts
    ``broadcast`` (K, P), the public gain ``eps_c`` and the number of consensus rounds ``rounds`` = K."""

    alpha: torch.Tensor
    broadcast: torch.Tensor
    eps_c: float
    rounds: int


@dataclass(frozen=True)
class MSPReconstruction:
    """The server's estimates for each client of a transcript (rows in the transcript's client order).

    w_hat:     (M, P) float64, (alpha_i[0] + S_0_hat)/(1 + m_hat).
    S0_hat:    (M, P) float64, the estimated sum of the invisible parts at k = 0.
    m_hat:     (M,) float64, m_raw rounded to the nearest integer >= 1 where ``rounded``, else max(m_raw, 1).
    m_raw:     (M,) float64, the unconstrained least-squares estimate of m_i.
    rounded:   (M,) bool, m_raw was within the rounding tolerance of an integer >= 1.
    gamma_hat: (M,) float64, 1 / (the least-squares 1/gamma given m_hat).
    residual:  (M,) float64, the l2 norm of the demeaned equations' residual (0 up to rounding when exact).
    """

    w_hat: torch.Tensor
    S0_hat: torch.Tensor
    m_hat: torch.Tensor
    m_raw: torch.Tensor
    rounded: torch.Tensor
    gamma_hat: torch.Tensor
    residual: torch.Tensor


def pull_residuals(transcript: ConsensusTranscript) -> torch.Tensor:
    """r_i[k] = alpha_i[k+1] - alpha_i[k] - eps_c (w[k] - alpha_i[k]) for k = 0..K-1: (K, M, P) float64."""
    alpha = transcript.alpha.to(torch.float64)
    broadcast = transcript.broadcast.to(torch.float64)[:, None, :]
    return alpha[1:] - alpha[:-1] - transcript.eps_c * (broadcast - alpha[:-1])


def first_residual_direction(transcript: ConsensusTranscript) -> torch.Tensor:
    """Unit vectors (M, P) along r_i[0] = gamma (S_0 - m alpha[0]) = gamma (1 + m_i) (w_i - alpha_i[0]).

    The direction of w_i - alpha_i[0] for every m_i (exactly for msp, up to the rounding noise for mspdq):
    what even K_t = 1 reveals. A zero residual gives a zero row.
    """
    r0 = pull_residuals(transcript)[0]
    return r0 / r0.norm(dim=1, keepdim=True).clamp_min(torch.finfo(torch.float64).tiny)


def _solve_client(alpha: torch.Tensor, r: torch.Tensor, round_tol: float) -> tuple[torch.Tensor, ...]:
    """The least squares of one client: alpha (K+1, P) and r (K, P) -> S0, m_hat, m_raw, rounded, gamma, residual."""
    k1 = torch.arange(1, r.shape[0] + 1, dtype=torch.float64)[:, None]
    x_m = -alpha[:-1]  # coefficient m
    x_g = -k1 * r  # coefficient 1/gamma
    y = torch.cumsum(r, 0) - r  # sum_{k' < k} r[k']
    xm_c, xg_c, y_c = (v - v.mean(0) for v in (x_m, x_g, y))  # S_0 eliminated: its LS value is the k-mean
    gram = torch.tensor([[(xm_c * xm_c).sum(), (xm_c * xg_c).sum()], [(xm_c * xg_c).sum(), (xg_c * xg_c).sum()]])
    rhs = torch.tensor([(xm_c * y_c).sum(), (xg_c * y_c).sum()])
    # the minimum-norm solution: with a common start (004 footnote 5) and K = 2, r[1] is parallel to r[0] and only
    # gamma (1 + m) is identified -- w_hat is the same along the unidentified direction, m_hat is not
    m_raw = (torch.linalg.pinv(gram, rtol=1e-9) @ rhs)[0]
    nearest = torch.round(m_raw)
    rounded = bool(nearest >= 1 and (m_raw - nearest).abs() <= round_tol)
    m_hat = nearest if rounded else m_raw.clamp_min(1.0)
    inv_gamma = (xg_c * (y_c - m_hat * xm_c)).sum() / (xg_c * xg_c).sum()  # refitted for the chosen m
    residual = (y_c - m_hat * xm_c - inv_gamma * xg_c).norm()
    s0 = (y - m_hat * x_m - inv_gamma * x_g).mean(0)
    return s0, m_hat, m_raw, rounded, 1.0 / inv_gamma, residual


def reconstruct_msp(transcript: ConsensusTranscript, *, round_tol: float = 0.1) -> MSPReconstruction:
    """Recover every client's model from the transcript by the least squares of the module docstring.

    round_tol: m_raw within this distance of an integer >= 1 is rounded to it (the exact solve is off by ~1e-7
    with float32 uploads; a noisy MSPDQ solve far from an integer keeps its raw value, floored at 1).
    Needs K_t >= 2 consensus rounds (``ValueError`` otherwise).
    """
    if transcript.rounds < 2:
        raise ValueError(
            f"reconstruct_msp needs K_t >= 2 consensus rounds, got {transcript.rounds}; with K_t = 1 use "
            "first_residual_direction or reconstruct_from_split_support"
        )
    alpha = transcript.alpha.to(torch.float64)
    residuals = pull_residuals(transcript)
    rows = [_solve_client(alpha[:, i], residuals[:, i], round_tol) for i in range(alpha.shape[1])]
    s0 = torch.stack([row[0] for row in rows])
    m_hat = torch.stack([row[1] for row in rows])
    return MSPReconstruction(
        w_hat=(alpha[0] + s0) / (1.0 + m_hat)[:, None],
        S0_hat=s0,
        m_hat=m_hat,
        m_raw=torch.stack([row[2] for row in rows]),
        rounded=torch.tensor([row[3] for row in rows]),
        gamma_hat=torch.stack([row[4] for row in rows]),
        residual=torch.stack([row[5] for row in rows]),
    )


def reconstruct_from_split_support(transcript: ConsensusTranscript, low: float, high: float) -> torch.Tensor:
    """K_t = 1 reconstruction from the public split law: the client's split s = u w, u ~ U[low, high] elementwise
    (low < 1 < high).

    r[0] = gamma (1 + m) (w - c) gives w = c + t r[0] for one unknown t > 0 (``first_residual_direction``), c =
    alpha[0] where the consensus started: the client's own split, or (``splits`` recorded, 004 footnote 5) the
    broadcast one. Every coordinate must keep u = s / w in [low, high], i.e. w between s / high and s / low (w has
    the sign of s), which bounds t to an interval per coordinate, and the true t lies in their intersection
    [t_low, t_high]. From the client's own split (c = s) every coordinate bounds t from above only (u -> 1 as t ->
    0) and the true t attains the smallest cap within O(1/P) (the coordinate whose u is nearest an end of [low,
    high]): t_high is taken. From a broadcast start (c != s) the coordinates bound t from both sides and both
    ends close in on it: the midpoint is taken. For msp's unbiased split low = eps_s, high = 2 - eps_s; for
    Algorithm 1's split high = 1 + m - eps_s. Returns w_hat (M, P) float64.
    """
    if not 0 < low < 1 < high:
        raise ValueError(f"low and high must satisfy 0 < low < 1 < high, got low={low!r}, high={high!r}")
    start = transcript.alpha[0].to(torch.float64)
    own = getattr(transcript, "splits", None)
    split = start if own is None else own.to(torch.float64)
    r0 = pull_residuals(transcript)[0]
    usable = (split != 0) & (r0 != 0)
    near, far = split / high, split / low  # w lies between these: |w| in [|s| / high, |s| / low]
    ends = (torch.minimum(near, far) - start, torch.maximum(near, far) - start)
    safe = torch.where(usable, r0, 1.0)
    one, other = ends[0] / safe, ends[1] / safe
    lower = torch.where(usable, torch.minimum(one, other), -torch.inf).max(dim=1).values.clamp_min(0.0)
    upper = torch.where(usable, torch.maximum(one, other), torch.inf).min(dim=1).values
    started_own = (split == start).all(dim=1)  # the consensus started from this client's own split: caps only
    t = torch.where(started_own, upper, (lower + upper) / 2)
    return start + t[:, None] * r0


@update_estimator("consensus")
def msp_update_estimates(transcript: ConsensusTranscript, global_before: torch.Tensor) -> dict[str, tuple[torch.Tensor, str]]:
    """The server's estimates of each client's update w_i - g from an MSP-FL consensus transcript, strongest
    first, each with what it observes (``../shared/spec/msp.md``, "Adaptive server attack"):

    * ``reconstructed``: the least-squares reconstruction w_hat_i (``reconstruct_msp``) minus g;
    * ``first-residual``: only alpha_i[0] and the direction d_i of the first consensus residual r_i[0], which
      points along w_i - alpha_i[0]: w_i = alpha_i[0] + c d_i with c unknown; the server takes the c that makes
      the update smallest, c = -<alpha_i[0] - g, d_i> (updates are small next to the split's noise, so this c
      is close to ||w_i - alpha_i[0]||);
    * ``alpha0``: the client's visible split alpha_i[0] alone (unbiased for w_i), minus g: its own first upload
      (``splits``) where the consensus started from a broadcast one (004 footnote 5).

    With K_t = 1 there is no least-squares reconstruction (it needs K_t >= 2): the last two are returned.
    """
    g = global_before.to(torch.float64)
    alpha0 = transcript.alpha[0].to(torch.float64)
    own = getattr(transcript, "splits", None)
    split = alpha0 if own is None else own.to(torch.float64)
    direction = first_residual_direction(transcript).to(torch.float64)
    scale = -((alpha0 - g) * direction).sum(dim=1, keepdim=True)
    estimates = {
        "first-residual": (alpha0 + scale * direction - g,
                           "alpha_0 moved along the first consensus residual r[0] to the smallest update"),
        "alpha0": (split - g, "the visible split alpha_0 alone"),
    }
    if transcript.rounds >= 2:
        reconstructed = reconstruct_msp(transcript).w_hat.to(torch.float64) - g
        estimates = {"reconstructed": (reconstructed, "the least-squares reconstruction from every upload"),
                     **estimates}
    return estimates
