"""Model splitting (paper 004: Wang, Cao, Jin & Chow): MSP-FL (``msp``), MSP+Lap (``msp-laplace``) and
MSPDQ-FL (``mspdq``). eps_c is the consensus gain of (3a), eps_s the split factor of Sec. III-A, eps eps_DP.

Client i splits w_i into alpha_i[0] + sum_n beta_{i,n}[0] = (1 + m_i) w_i (m_i hidden), uploads alpha_i[0], then
runs K_t consensus rounds, q_i[k] the server's decoding of upload k, a[k] = gamma / (k + 1) (Alg. 1, Remark 10):

    w[k]            = mean_i q_i[k]                                                   (eq. 4 / 22)
    alpha_i[k+1]    = alpha_i[k] + eps_c (w[k] - q_i[k]) + sum_n a[k] (beta_{i,n}[k] - alpha_i[k])   (3a / 21a)
    beta_{i,n}[k+1] = beta_{i,n}[k] + a[k] (alpha_i[k] - beta_{i,n}[k])                               (3b / 21b)

with w[K_t] the new model (eq. 6). Using q_i (not alpha_i) in (3a) keeps sum_i (alpha_i[k] + S_i[k]) constant
(eq. 5), S_i = sum_n beta_{i,n}, so ``consensus_step`` iterates S_i[k+1] = S_i[k] + a[k] (m_i alpha_i[k] - S_i[k])
and the limit is v = sum_i (1 + m_i) w_i / sum_i (1 + m_i) (``consensus_limit``). Stability (Sec. V-B, eq. 47)
needs eps_c in (0, 1). MSP+Lap: alpha[0] ~ Laplace(w, 2 clip / eps_DP) (Prop. 1, eq. 16). MSPDQ-FL: stochastic
rounding onto 2^B knots of R[0] = [-support, support], then R[k+1] = q[k] +- pi a_max[k] / 2 (eq. 20).
Randomness is client-private (``randomness.private_generator``), float64 on the CPU. The split rules, the
``start`` readings of Algorithm 1 and the bias: docs/guide/mechanism-internals.md (#msp).
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Sequence
from typing import Any, Self

import dp_accounting
import numpy as np
import torch

from auditkit.mechanisms.additive import clip_l1, laplace_noise
from auditkit.mechanisms.base import (
    Mechanism,
    as_update,
    choice,
    int_range,
    open_unit_interval,
    positive_float,
    zero_or_above,
)
from auditkit.mechanisms.bitstream import pack_fixed, unpack_fixed
from auditkit.mechanisms.capabilities import AuditSetting, BatchSampling, LogDensity, Tiling
from auditkit.mechanisms.densities import ClippedLaplace
from auditkit.mechanisms.guarantee import REPLACE_ONE, PrivacyGuarantee
from auditkit.mechanisms.message import MAX_LENGTH, FloatMessage, Message
from auditkit.mechanisms.randomness import derive_seed, private_generator
from auditkit.mechanisms.registry import register

__all__ = [
    "MSP",
    "MSPLaplace",
    "MSPDQ",
    "MSPDQMessage",
    "MSPHidden",
    "MSPTranscript",
    "TRANSCRIPT_FLAG",
    "weight_bound",
    "uniform_split",
    "consensus_step",
    "consensus_limit",
    "stochastic_round",
    "dequantize",
]

TRANSCRIPT_FLAG = "transcript-reconstructable"  # guarantee flag: the consensus uploads reveal w_i

_THEOREM1 = (
    "Theorem 1 claims that, with m_i hidden and one peer trusted via a trusted authority, no adversary can infer "
    "w_i 'with any guaranteed accuracy' (Definition 1: an infinite diameter of the feasible set); this is not a DP "
    "claim, and its proof changes the weights a[0] and alpha_i[0] into vectors (coordinate-wise ratios of the "
    "feasible parts), which Algorithm 1's scalar a[k] = gamma/(k+1) never produces"
)
_RECONSTRUCTION = (
    "the server sees every upload alpha_i[k] and broadcast w[k]: r_i[k] = alpha_i[k+1] - alpha_i[k] - "
    "eps_c (w[k] - alpha_i[k]) = a[k] (S_i[k] - m_i alpha_i[k]) makes (S_i[0], m_i, 1/gamma) the solution of a linear "
    "least-squares problem, so w_i = (alpha_i[0] + S_i[0])/(1 + m_i) is recovered exactly once K_t >= 2 "
    "(auditkit.attacks.reconstruct_msp), and K_t = 1 already reveals the direction of w_i - alpha_i[0]"
)
_BIAS = (
    "heterogeneous hidden m_i make the consensus limit the (1 + m_i)-weighted mean of the w_i, not FedAvg's mean, "
    "and at finite K_t the aggregate still carries a split error decaying like K_t^-((1+m) gamma)"
)
_COST = "K_t + 1 uploads per client and learning round: the per-update rate is one upload (the first) only"


def weight_bound(eps_c: float) -> float:
    """lambda_min(U) / (1 + lambda_min(U)) = (1 - eps_c)/(2 - eps_c): the bound on sum_n a_{i,n}[k] (Theorem 2,
    Sec. V-B) for U = (1 - eps_c) I + (eps_c/M) 1 1^T of eq. (47), whose smallest eigenvalue is 1 - eps_c."""
    return (1.0 - eps_c) / (2.0 - eps_c)


def uniform_split(w: torch.Tensor, low: float, high: float, generator: torch.Generator) -> torch.Tensor:
    """Elementwise uniform draw between low * w and high * w (either order for negative w), in float64."""
    u = torch.rand(w.shape, generator=generator, dtype=torch.float64)
    return w * (low + (high - low) * u)


def consensus_step(
    alpha: torch.Tensor, invisible: torch.Tensor, sent: torch.Tensor, m: torch.Tensor, broadcast: torch.Tensor,
    a: float, eps_c: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One consensus round for all clients at once, eqs. (3a) and (3b) summed over n (as (21a)/(21b)):

        alpha[k+1] = alpha[k] + eps_c (w[k] - q[k]) + a[k] (S[k] - m alpha[k])
        S[k+1]     = S[k] + a[k] (m alpha[k] - S[k])

    alpha, invisible (S) and sent (q, what the server decoded) are (M, P); m is (M,); broadcast w[k] is (P,).
    """
    m_col = m.to(alpha.dtype)[:, None]
    pull = a * (invisible - m_col * alpha)
    return alpha + eps_c * (broadcast - sent) + pull, invisible - pull


def consensus_limit(models: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """The K -> infinity limit sum_i (1 + m_i) w_i / sum_i (1 + m_i) of the consensus on models (M, P).

    Every part converges to one value v and eq. (5) keeps sum_i (alpha_i + S_i) = sum_i (1 + m_i) w_i, hence v.
    With every m_i = 1 it is FedAvg's plain mean.
    """
    weights = 1.0 + m.to(torch.float64)
    return weights @ models.to(torch.float64) / weights.sum()


def stochastic_round(
    values: torch.Tensor, low: torch.Tensor | float, step: float, levels: int, uniform: torch.Tensor
) -> tuple[torch.Tensor, int]:
    """Unbiased stochastic rounding onto the knots low + j step, j = 0..levels-1 (eq. 18, Lemma 11).

    A value t = (v - low)/step steps in knots is rounded up with probability t - floor(t), so E[knot] = v inside
    the interval. Values outside are clamped to the end knots; the count of clamped values is returned.
    ``uniform`` holds one U[0, 1) draw per value.
    """
    t = (values - low) / step
    outside = (t < 0) | (t > levels - 1)
    t = t.clamp(0, levels - 1)
    base = torch.floor(t)
    indices = (base + (uniform < t - base).to(t.dtype)).clamp(max=levels - 1)
    return indices.to(torch.int64), int(outside.sum())


def dequantize(indices: torch.Tensor, low: torch.Tensor | float, step: float) -> torch.Tensor:
    """The knots low + j step (float64) the server reconstructs from the indices j."""
    return low + indices.to(torch.float64) * step


class MSPDQMessage(Message):
    """Knot indices of one MSPDQ-FL upload (the interval is known to the server: R[0] or q[k] +- width/2).

    Layout (little-endian): tag (uint8 = 31) | length n (uint32) | bits B (uint8, 1..32) | overloads (uint32) |
    the n indices in [0, 2^B) at fixed width B bits each, MSB first, zero-padded to a whole byte (the paper's
    rate: B bits per coordinate, eq. 19). 10 + ceil(n B / 8) bytes.
    """

    TAG = 31
    _HEADER = struct.Struct("<BIBI")

    def __init__(self, indices: np.ndarray, bits: int, overloads: int) -> None:
        indices = np.asarray(indices, dtype=np.int64)
        if indices.ndim != 1 or indices.size > MAX_LENGTH:
            raise ValueError(f"MSPDQMessage needs a 1-D array of at most {MAX_LENGTH} indices")
        if not 1 <= bits <= 32:
            raise ValueError(f"MSPDQMessage: bits must be in 1..32, got {bits}")
        if indices.size and (indices.min() < 0 or indices.max() >= 2**bits):
            raise ValueError(f"MSPDQMessage: indices must lie in [0, {2**bits})")
        if not 0 <= overloads <= indices.size:
            raise ValueError(f"MSPDQMessage: overloads must be in 0..{indices.size}, got {overloads}")
        self.indices = indices
        self.bits = bits
        self.overloads = overloads

    def __len__(self) -> int:
        return self.indices.size

    def _serialize(self) -> bytes:
        header = self._HEADER.pack(self.TAG, self.indices.size, self.bits, self.overloads)
        return header + pack_fixed(self.indices, self.bits)

    @classmethod
    def from_bytes(cls, data: bytes) -> Self:
        _, n, bits, overloads = cls._check_tag(data, cls._HEADER)
        if not 1 <= bits <= 32:
            raise ValueError(f"MSPDQMessage: bits must be in 1..32, got {bits}")
        indices = unpack_fixed(data[cls._HEADER.size :], n, bits)  # checks the payload length
        message = cls(indices, bits, overloads)
        message._wire = bytes(data)
        return message


@dataclasses.dataclass(frozen=True)
class MSPHidden:
    """What stays on the clients (ground truth for tests and audits, never part of a view).

    m:     (M,) the hidden numbers of invisible parts m_i.
    gamma: the common weight constant, a[k] = gamma / (k + 1).
    S0:    (M, P) float64, S_i[0] = sum_n beta_{i,n}[0] = (1 + m_i) w_i - alpha_i[0].
    """

    m: torch.Tensor
    gamma: float
    S0: torch.Tensor


@dataclasses.dataclass(frozen=True)
class MSPTranscript:
    """One learning round of the consensus protocol as the server sees it, plus (``hidden``) what it does not.

    alpha:     (K+1, M, P) float64, the uploads q_i[k] as the server decoded them from the real messages
               (float32 values for msp / msp-laplace, de-quantized knots for mspdq); alpha[0] is where the
               consensus started (with ``start="common"``: the broadcast upload, the same for every client).
    broadcast: (K, P) float64, w[k] = mean_i q_i[k] for k = 0..K-1 (eq. 4 / 22).
    aggregate: (P,) float64, the new global model w[K] = mean_i q_i[K] (eq. 6).
    clients:   the client ids, in row order.
    eps_c:     the public consensus gain.
    rounds:    K = K_t, the number of consensus rounds (uploads = K + 1 per client).
    bits:      per client, the real size of its K + 1 messages together.
    overloads: mspdq: values clamped to their interval over all uploads (0 otherwise).
    quantizer_bits: mspdq: B (l = 2^B knots per interval); None otherwise.
    widths:    mspdq: (K+1,) public interval widths, 2 support for R[0] then pi gamma / (k + 1) for R[k+1]
               (the server needs them to decode, so under mspdq gamma = widths[1] / pi is public); None otherwise.
    splits:    with ``start="common"``: (M, P) float64, every client's own first upload (its split), which the
               server received before it broadcast one of them; None otherwise (alpha[0] is that upload).
    hidden:    the clients' secrets (``MSPHidden``); None in a view (see ``public``).
    """

    alpha: torch.Tensor
    broadcast: torch.Tensor
    aggregate: torch.Tensor
    clients: list[int]
    eps_c: float
    rounds: int
    bits: list[int]
    overloads: int = 0
    quantizer_bits: int | None = None
    widths: torch.Tensor | None = None
    splits: torch.Tensor | None = None
    hidden: MSPHidden | None = dataclasses.field(default=None, repr=False)

    @property
    def uploads(self) -> int:
        """K + 1 uploads per client."""
        return self.rounds + 1

    def public(self) -> MSPTranscript:
        """The server's view: this transcript without the hidden part."""
        return dataclasses.replace(self, hidden=None)


def _client_keys(seed: int | Sequence[int], count: int) -> list[int]:
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        return [derive_seed(int(seed), "client", i) for i in range(count)]
    keys = [int(s) for s in seed]
    if len(keys) != count:
        raise ValueError(f"seed must be one int or one key per client ({count}), got {len(keys)} keys")
    return keys


_GAMMA = zero_or_above("gamma", 0, "a[k] = gamma/(k+1); 0: 0.9 (1 - eps_c)/((2 - eps_c) m_max), 0.3 by default")
_COMMON = (
    open_unit_interval("eps_c", 0.5, "consensus gain eps_c of (3a); lambda_min(U) = 1 - eps_c"),
    _GAMMA,
    int_range("consensus_rounds", 1, 1000, 10, "K_t: consensus rounds per learning round (K_t + 1 uploads)"),
    int_range("m_max", 1, 64, 1, "hidden m_i ~ uniform on 1..m_max per client and round (1: FedAvg's mean)"),
)
STARTS = ("common", "split")  # where the consensus starts; mspdq adds "knot" (docs/guide/mechanism-internals.md#msp)
_START = choice("start", STARTS, "common",
                "common: the server broadcasts one client's uploaded split as every alpha[0] (004 footnote 5); "
                "split: each client starts from its own split")
_SPLIT = (
    open_unit_interval("eps_s", 0.5, "split factor eps_s: alpha[0] ~ U[eps_s w, (2 - eps_s) w]"),
    choice("compat", ("none", "paper004"), "none",
           "none: U[eps_s w, (2 - eps_s) w] (unbiased); paper004: Algorithm 1's U[eps_s w, (1 + m - eps_s) w]"),
)


class _ModelSplitting(Mechanism):
    """The protocol shared by the three mechanisms; subclasses choose the split and the uplink coding.

    Per-update use (``encode``/``decode``, the ``auditkit mechanisms`` table and the per-update distinguisher)
    is the client's FIRST upload alpha[0] of the vector x only; ``protocol = "consensus"`` tells the harness to
    run the whole protocol (``auditkit.mechanisms.msp_consensus.ConsensusProtocol``) instead of per-update uploads.
    """

    protocol = "consensus"

    def tiling(self) -> Tiling | None:
        """The unbiased split draws alpha_0 = w (eps_s + (2 - 2 eps_s) u) with u iid per coordinate, whatever m
        (mspdq then rounds each coordinate with its own uniform); paper004's upper end 1 + m - eps_s shares the
        client's m across coordinates, so it tiles only with m_max = 1 (or mspdq's public knot start)."""
        if self.params["compat"] != "none" and self.params["m_max"] > 1 and self.params.get("start") != "knot":
            return None
        return Tiling(block=1, why="alpha_0 drawn (and rounded) with iid uniforms per coordinate, independent of m")

    def batch_sampling(self) -> BatchSampling:
        """Where the split shares the client's m across coordinates (no tiling): ``first_uploads``, which draws
        one m per row and everything else per coordinate, the same code as one call's first upload."""
        return BatchSampling(
            self.first_uploads,
            why="each row draws its own hidden m, then alpha_0 (and its rounding) with iid uniforms per coordinate",
        )

    def audit_setting(self) -> AuditSetting:
        return AuditSetting(
            2, 2.0, "l2", 1.0, 2,
            note="no claim: the split alpha_0 in the l2 unit ball (the transcript is the adaptive test msp-transcript)",
        )  # fmt: skip

    def __init__(self, *, private_seed: int | None = None, **params: Any) -> None:
        super().__init__(private_seed=private_seed, **params)
        p = self.params
        bound = weight_bound(p["eps_c"])
        self.gamma = p["gamma"] or 0.9 * bound / p["m_max"]
        if p["m_max"] * self.gamma >= bound:
            raise ValueError(
                f"gamma must satisfy m_max * gamma < (1 - eps_c)/(2 - eps_c) = {bound:.6g} (sum_n a_(i,n) < "
                f"lambda_min/(1 + lambda_min)), got gamma={p['gamma']!r} with m_max={p['m_max']}"
            )

    # --- the split -------------------------------------------------------------------------------------------
    def clip_update(self, update: torch.Tensor) -> torch.Tensor:
        """The update as the client uses it (float64); msp-laplace clips it to bound Delta_f."""
        return update

    def local_models(self, updates: torch.Tensor, global_params: torch.Tensor) -> torch.Tensor:
        """The models w_i = global + clip_update(update_i) (M, P) float64 that the clients split."""
        updates = updates.detach().cpu().to(torch.float64)
        return global_params.detach().cpu().to(torch.float64) + torch.stack([self.clip_update(u) for u in updates])

    def _draw_part(self, w: torch.Tensor, m: int | torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """One part drawn by the split rule: the visible alpha[0], and the invisible beta_1..beta_{m-1} (w of any
        shape; m an int, or a tensor broadcasting against w: one m per row of a batch)."""
        high = 2.0 - self.params["eps_s"] if self.params["compat"] == "none" else 1.0 + m - self.params["eps_s"]
        return uniform_split(w, self.params["eps_s"], high, generator)

    def _visible(self, w: torch.Tensor, m: int | torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return self._draw_part(w, m, generator)

    def split(self, w: torch.Tensor, m: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Split the model w (P,) into alpha[0] (P,) and betas (m, P) with alpha[0] + sum_n beta_n = (1 + m) w."""
        w = w.to(torch.float64)
        alpha0 = self._visible(w, m, generator)
        invisible = (1.0 + m) * w - alpha0
        drawn = [self._draw_part(w, m, generator) for _ in range(m - 1)]
        last = invisible - sum(drawn) if drawn else invisible
        return alpha0, torch.stack([*drawn, last])

    def draw_m(self, key: int) -> int:
        """The hidden m_i of the client keyed ``key``: uniform on 1..m_max, client-private."""
        generator = private_generator(self.private_seed, key, "m")
        return int(torch.randint(1, self.params["m_max"] + 1, (1,), generator=generator))

    # --- the uplink --------------------------------------------------------------------------------------------
    def _send(
        self, values: torch.Tensor, previous: torch.Tensor | None, k: int, keys: list[int]
    ) -> tuple[torch.Tensor, list[int], int]:
        """Upload k of every client: the values the server decodes from the real bytes, their bits, overloads."""
        received, bits = [], []
        for row in values:
            message = FloatMessage(row.numpy().astype(np.float32))
            bits.append(message.num_bits)
            received.append(FloatMessage.from_bytes(message.to_bytes()).to_tensor())
        return torch.stack(received).to(torch.float64), bits, 0

    def _widths(self, rounds: int) -> torch.Tensor | None:
        return None

    # --- the protocol ------------------------------------------------------------------------------------------
    def run_consensus(
        self, models: torch.Tensor, seed: int | Sequence[int], *, clients: Sequence[int] | None = None,
        m: Sequence[int] | torch.Tensor | None = None,
    ) -> MSPTranscript:
        """Split the models (M, P), run K_t consensus rounds, return the transcript (with its hidden part).

        seed: one int (client i's key is derive_seed(seed, "client", i)) or one key per client (the ``seed``
        its ``encode`` would get). clients: ids recorded in the transcript (default 0..M-1). m: override the
        hidden m_i (default: each client draws its own, see ``draw_m``).
        """
        models = models.detach().cpu().to(torch.float64)
        if models.ndim != 2 or models.shape[0] < 1:
            raise ValueError(f"models must be a (clients, parameters) tensor, got shape {tuple(models.shape)}")
        count = models.shape[0]
        keys = _client_keys(seed, count)
        hidden_m = torch.tensor([self.draw_m(key) for key in keys] if m is None else [int(v) for v in m])
        if hidden_m.shape != (count,) or hidden_m.min() < 1:
            raise ValueError(f"m must hold one integer >= 1 per client ({count}), got {hidden_m.tolist()}")
        alpha = torch.empty_like(models)
        for i, key in enumerate(keys):
            alpha[i] = self.split(models[i], int(hidden_m[i]), private_generator(self.private_seed, key, "split"))[0]
        sent, bits, overloads = self._send(alpha, None, 0, keys)
        splits = None
        if self.params["start"] == "common":  # footnote 5: every client adopts the first client's upload
            splits = sent
            alpha = sent[0].expand_as(sent).clone()
            sent = alpha.clone()
        invisible = (1.0 + hidden_m.to(torch.float64))[:, None] * models - alpha
        hidden = MSPHidden(m=hidden_m, gamma=self.gamma, S0=invisible.clone())

        eps_c, rounds = self.params["eps_c"], self.params["consensus_rounds"]
        uploads, broadcasts = [sent], []
        for k in range(rounds):
            broadcast = sent.mean(0)
            alpha, invisible = consensus_step(alpha, invisible, sent, hidden_m, broadcast, self.gamma / (k + 1), eps_c)
            sent, more_bits, more_overloads = self._send(alpha, sent, k + 1, keys)
            bits = [b + extra for b, extra in zip(bits, more_bits)]
            overloads += more_overloads
            uploads.append(sent)
            broadcasts.append(broadcast)
        return MSPTranscript(
            alpha=torch.stack(uploads),
            broadcast=torch.stack(broadcasts),
            aggregate=sent.mean(0),
            clients=list(range(count)) if clients is None else [int(c) for c in clients],
            eps_c=eps_c,
            rounds=rounds,
            bits=bits,
            overloads=overloads,
            quantizer_bits=self.params.get("bits"),
            widths=self._widths(rounds),
            splits=splits,
            hidden=hidden,
        )

    # --- per-update use: the first upload ----------------------------------------------------------------------
    def first_upload(self, x: torch.Tensor, seed: int) -> torch.Tensor:
        """alpha[0] (float64) of the vector x (taken as the model, after ``clip_update``) for the client keyed
        ``seed``: the same draws as that client's first upload in ``run_consensus``."""
        w = self.clip_update(as_update(x))
        return self.split(w, self.draw_m(seed), private_generator(self.private_seed, seed, "split"))[0]

    def first_uploads(self, x: torch.Tensor, count: int, seed: int) -> torch.Tensor:
        """What the server decodes (float64, (count, d)) from the first uploads of ``count`` clients that all hold
        the vector x, each with its own hidden m (``BatchSampling``): m is drawn per row from the "m" stream and
        the split per coordinate from the "split" stream keyed ``seed``, so count = 1 is exactly ``self(x, seed)``
        (``first_upload``, then the uplink coding ``_received_first``)."""
        w = self.clip_update(as_update(x)).expand(count, -1)
        m = torch.randint(1, self.params["m_max"] + 1, (count, 1), generator=private_generator(self.private_seed, seed, "m"))
        alpha = self._visible(w, m.to(torch.float64), private_generator(self.private_seed, seed, "split"))
        return self._received_first(alpha, seed)

    def _received_first(self, alpha: torch.Tensor, seed: int) -> torch.Tensor:
        """The first uploads (rows of alpha) as the server decodes them: float32 values (FloatMessage)."""
        return alpha.to(torch.float32).to(torch.float64)

    def encode(self, x: torch.Tensor, seed: int) -> Message:
        return FloatMessage(self.first_upload(x, seed).numpy().astype(np.float32))

    def decode(self, enc: Message, seed: int) -> torch.Tensor:
        self._check_message(enc)
        return enc.to_tensor()


@register
class MSP(_ModelSplitting):
    """MSP-FL (Sec. III-A): uniform model splitting with a hidden m_i, then K_t consensus rounds in float32.

    No DP claim: Theorem 1's "no guaranteed accuracy" statement is recorded as a caveat, and the transcript
    reconstructs w_i (flag ``transcript-reconstructable``).
    """

    name = "msp"
    summary = "MSP-FL model splitting: hidden m_i, alpha[0] ~ U[eps_s w, (2-eps_s) w], K_t consensus uploads"
    params_spec = (*_COMMON, *_SPLIT, _START)
    message_type = FloatMessage

    def guarantee(self) -> PrivacyGuarantee:
        return PrivacyGuarantee(
            epsilon=None, delta=1.0, relation=None,
            caveats=(_THEOREM1, _RECONSTRUCTION, _BIAS, _COST),
            flags={"no-privacy", TRANSCRIPT_FLAG},
        )


@register
class MSPLaplace(_ModelSplitting):
    """MSP+Lap (Proposition 1): the update clipped to l1 norm ``clip``, alpha[0] ~ Laplace(w, 2 clip / eps).

    Replacing one client's data moves the clipped update by at most Delta_f = 2 clip in l1, so alpha[0] alone
    is eps-DP (Laplace mechanism, eq. 13-16). The invisible parts carry (1 + m) w - alpha[0], so the consensus
    removes the noise -- and the later uploads reveal w exactly (flag ``transcript-reconstructable``).
    """

    name = "msp-laplace"
    summary = "MSP+Lap: l1 clip, alpha[0] ~ Laplace(w, 2 clip/eps) (eps-DP for alpha[0] only), K_t consensus uploads"
    params_spec = (
        *_COMMON,
        positive_float("eps", 10.0, "eps_DP of alpha[0] (Proposition 1); Laplace scale 2 clip / eps"),
        positive_float("clip", 1.0, "l1 clipping norm of the update (Delta_f = 2 clip, replace-one)"),
        _START,
    )
    message_type = FloatMessage

    clip_norm = "l1"
    reference_params = {"eps": 1.0}  # the default eps_dp = 10 lowered to 1, within reach of an audit

    @property
    def scale(self) -> float:
        """Laplace scale b = Delta_f / eps_DP = 2 clip / eps."""
        return 2.0 * self.params["clip"] / self.params["eps"]

    def tiling(self) -> Tiling:
        """alpha_0 = clip(w) + iid Laplace(2 clip / eps) per coordinate: B copies are clipped like one call with
        clip' = B clip, and eps' = B eps keeps the Laplace scale 2 clip' / eps' = 2 clip / eps."""
        return Tiling(
            block=1, for_copies=lambda copies: self.with_params(clip=self.params["clip"] * copies,
                                                                eps=self.params["eps"] * copies),
            why="alpha_0 = clip(w) + iid Laplace per coordinate; B copies: clip and eps times B (same scale)",
        )  # fmt: skip

    def audit_setting(self) -> AuditSetting:
        """Proposition 1 covers alpha_0 = clip_l1(w) + Laplace: the Laplace setting."""
        return AuditSetting.clipped(self.params["clip"], "l1")

    def output_log_density(self) -> LogDensity:
        """alpha_0 - clip(w) iid Laplace(2 clip / eps)."""
        return ClippedLaplace(self.scale, self.params["clip"], "l1")

    def dp_event(self) -> dp_accounting.DpEvent:
        """alpha_0's Laplace(2 clip / eps) as LaplaceDpEvent(scale / clip) under REPLACE_ONE (shift 2 clip)."""
        return dp_accounting.LaplaceDpEvent(self.scale / self.params["clip"])

    def clip_update(self, update: torch.Tensor) -> torch.Tensor:
        """clip_l1(update, clip): bounds Delta_f (the global model the update is added to is public)."""
        return clip_l1(update, self.params["clip"])

    def _draw_part(self, w: torch.Tensor, m: int | torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return w + laplace_noise(w.numel(), self.scale, generator).view_as(w)

    def guarantee(self) -> PrivacyGuarantee:
        clip, eps = self.params["clip"], self.params["eps"]
        return PrivacyGuarantee(
            epsilon=eps,
            delta=0.0,
            relation=REPLACE_ONE,
            scope="the first upload alpha_0 only",
            sensitivity=f"l1 clip {clip}",
            assumptions=(
                f"the update is clipped to l1 norm {clip:g}, so replacing it moves alpha_0's mean by <= {2 * clip:g} "
                f"(Delta_f); Laplace scale {self.scale:g} = Delta_f / eps (Proposition 1)",
                "the server does not know private_seed (None: OS entropy), so it cannot regenerate the noise",
            ),
            caveats=(
                "later consensus uploads reveal w_i: the invisible parts carry (1 + m_i) w_i - alpha_i[0], and "
                + _RECONSTRUCTION + "; the Laplace noise is cancelled, so the round's transcript has no DP bound",
                "one learning round only: composition over rounds and sampling amplification are not included",
                _BIAS,
                _COST,
            ),
            flags={TRANSCRIPT_FLAG},
        )


@register
class MSPDQ(_ModelSplitting):
    """MSPDQ-FL (Sec. IV): MSP-FL whose uploads are B-bit stochastic roundings on shrinking intervals.

    Upload 0 lies on R[0] = [-support, support] (the quantized split; by default the server broadcasts the first
    client's as every alpha[0], 004 footnote 5: ``start``); upload k + 1 on R[k+1] = q[k] +- pi gamma / (2 (k + 1))
    (eq. 20), l = 2^B knots each, B bits per coordinate (fixed width).

    pi (pi_t) is a public constant. The paper's value 8 (eps_c + e~ + e~ W~)/(1 - lambda_2(U)) of Lemma 10
    bounds l2 norms over all clients and coordinates (W~ = max ||W^alpha - W^beta||_F grows like sqrt(M P)), which
    per coordinate is needlessly wide. Per coordinate, |alpha[k+1] - q[k]| stayed below
    2 (1 + m_max) max|w| a[k] in simulations (unquantized, split or knot start), i.e. within R[k+1] when
    pi >= 4 (1 + m_max) support; the default pi = 0 means 8 (1 + m_max) support, a factor 2 of margin for the
    rounding error. Overloads are clamped and counted.
    """

    name = "mspdq"
    summary = "MSPDQ-FL: MSP-FL with B-bit stochastic rounding on intervals shrinking like pi gamma/(k+1)"
    params_spec = (
        *_COMMON,
        *_SPLIT,
        int_range("bits", 1, 32, 8, "B: l = 2^B knots per interval, B bits per coordinate and upload"),
        zero_or_above("pi", 0, "interval width constant pi_t of eq. (20); 0: 8 (1 + m_max) support"),
        positive_float("support", 1.0, "R[0] = [-support, support]: the public range of upload 0 (004's w_max)"),
        choice("start", (*STARTS, "knot"), "common",
               f"{_START.help}; knot: every alpha[0] is the public knot of R[0] next to 0 (an earlier reading, "
               "not the paper's: it pulls the model towards 0)"),
    )
    message_type = MSPDQMessage

    def __init__(self, *, private_seed: int | None = None, **params: Any) -> None:
        super().__init__(private_seed=private_seed, **params)
        p = self.params
        self.levels = 2 ** p["bits"]
        self.pi = p["pi"] or 8.0 * (1 + p["m_max"]) * p["support"]
        self.first_step = 2.0 * p["support"] / (self.levels - 1)
        # The knot of R[0] just below 0 (c = -support for B = 1): public and the same for every client.
        self.common_knot = -p["support"] + ((self.levels - 1) // 2) * self.first_step

    def _visible(self, w: torch.Tensor, m: int | torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        if self.params["start"] == "knot":
            return torch.full_like(w, self.common_knot)
        return self._draw_part(w, m, generator)

    def width(self, upload: int) -> float:
        """Width of the interval of upload ``upload``: 2 support for R[0], pi a_max[k] = pi gamma/(k+1) for R[k+1]."""
        return 2.0 * self.params["support"] if upload == 0 else self.pi * self.gamma / upload

    def _widths(self, rounds: int) -> torch.Tensor:
        return torch.tensor([self.width(k) for k in range(rounds + 1)], dtype=torch.float64)

    def _round(
        self, values: torch.Tensor, low: torch.Tensor | float, step: float, key: int, upload: int
    ) -> tuple[torch.Tensor, int]:
        """Knot indices of upload ``upload`` (any shape), with the client's private uniforms, and the overloads."""
        uniform = torch.rand(values.shape, generator=private_generator(self.private_seed, key, f"round-{upload}"),
                             dtype=torch.float64)
        return stochastic_round(values, low, step, self.levels, uniform)

    def _quantize(
        self, values: torch.Tensor, low: torch.Tensor | float, step: float, key: int, upload: int
    ) -> MSPDQMessage:
        indices, overloads = self._round(values, low, step, key, upload)
        return MSPDQMessage(indices.numpy(), self.params["bits"], overloads)

    def _received_first(self, alpha: torch.Tensor, seed: int) -> torch.Tensor:
        """The first uploads rounded onto R[0]'s knots as ``encode`` does, dequantized as ``decode`` does."""
        indices, _ = self._round(alpha, -self.params["support"], self.first_step, seed, 0)
        return dequantize(indices, -self.params["support"], self.first_step).to(torch.float32).to(torch.float64)

    def _send(
        self, values: torch.Tensor, previous: torch.Tensor | None, k: int, keys: list[int]
    ) -> tuple[torch.Tensor, list[int], int]:
        width = self.width(k)
        step = width / (self.levels - 1)
        # R[0] is fixed; R[k] is centred on the previous knot, which client and server both hold.
        lows = torch.full_like(values, -self.params["support"]) if previous is None else previous - width / 2
        received, bits, overloads = [], [], 0
        for row, low, key in zip(values, lows, keys):
            message = self._quantize(row, low, step, key, k)
            bits.append(message.num_bits)
            overloads += message.overloads
            indices = torch.from_numpy(MSPDQMessage.from_bytes(message.to_bytes()).indices)
            received.append(dequantize(indices, low, step))
        return torch.stack(received), bits, overloads

    def encode(self, x: torch.Tensor, seed: int) -> MSPDQMessage:
        return self._quantize(self.first_upload(x, seed), -self.params["support"], self.first_step, seed, 0)

    def decode(self, enc: MSPDQMessage, seed: int) -> torch.Tensor:
        self._check_message(enc)
        if enc.bits != self.params["bits"]:
            raise ValueError(f"mspdq decodes {self.params['bits']}-bit messages, got {enc.bits} bits")
        return dequantize(torch.from_numpy(enc.indices), -self.params["support"], self.first_step).to(torch.float32)

    def proposition4_delta(self, c4: float, k: int) -> float:
        """Proposition 4's per-element delta for inputs within C4 (l1) at consensus round k (upload k + 1):

            delta = min(C4 (l - 1) / (pi a_max[k]), (l - 1)/(2^B - 1)),   a_max[k] = gamma / (k + 1).

        With l = 2^B the second term is exactly 1.
        """
        levels = self.levels
        return min(c4 * (levels - 1) / (self.pi * self.gamma / (k + 1)), (levels - 1) / (2 ** self.params["bits"] - 1))

    def guarantee(self) -> PrivacyGuarantee:
        rounds, bits = self.params["consensus_rounds"], self.params["bits"]
        first, last = (self.pi * self.gamma / (k + 1) / (self.levels - 1) for k in (0, rounds - 1))
        proposition4 = (
            "Proposition 4 claims per-element (0, delta)-DP of the quantizer with delta = min(C4 (l - 1)/(pi_t "
            f"a_max[k]), (l - 1)/(2^B - 1)); with l = 2^B the second term is 1, so delta < 1 only for neighbours "
            f"closer than one knot spacing C4 < pi_t a_max[k]/(l - 1) = {first:.3g} (k = 0) .. {last:.3g} "
            f"(k = {rounds - 1}) at pi_t = {self.pi:g}, gamma = {self.gamma:g}, B = {bits} (delta = C4 / spacing, "
            "capped at 1); and (0, delta)-DP with delta near 1 protects nothing: reported, not claimed"
        )
        dimension_note = (
            "Assumption 3 (eq. 23 as printed: B <= log2(sqrt(M d) pi_t + 1); its use in Lemma 10 needs "
            "2^B - 1 >= sqrt(M d) pi_t) asks B ~ 18+ bits for CNN sizes: the paper's B = 4..8 lie outside it"
        )
        return PrivacyGuarantee(
            epsilon=None, delta=1.0, relation=None,
            caveats=(_THEOREM1, _RECONSTRUCTION + " (under mspdq a noisy least squares)", proposition4,
                     dimension_note, _BIAS, _COST),
            flags={"no-privacy", TRANSCRIPT_FLAG},
        )
