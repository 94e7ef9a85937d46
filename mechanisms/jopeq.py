"""JoPEQ (Lang, Sofer, Shaked & Shlezinger, "Joint Privacy Enhancement and Quantization in Federated
Learning"), moment-matched as its reference code does: ``jopeq-laplace`` (L = 1) and ``jopeq-t`` (L = 2).

Encoder (Algorithm 1): cut h into M = ceil(d/L) blocks h_i of L contiguous coordinates (the last one
zero-padded), scale by zeta = (3 ||h|| / sqrt(M))^-1 (Sec. III-A; sent as float32), draw the dither from
the shared stream (seed, "dither") and the privacy-preserving noise (PPN) n_i from the private stream
(private_seed, seed, "noise"), and send the finite-range lattice indices of Q(zeta h_i + n_i - V_i)
(``auditkit.mechanisms.sdq``; JoPEQ writes Q(zeta h_i + n_i + d_i) with d_i = -V_i). Decoder (eq. (12)-(13)):
h~_i = (Q(.) + V_i) / zeta = h_i + (n_i + e_i) / zeta, with e_i ~ Unif(P0) independent of h when the
quantizer is not overloaded (Theorem II.5).

Theorems III.1/III.2 ask for a PPN whose characteristic function is the target's divided by the dither's.
That ratio is unbounded (the uniform's characteristic function has zeros), so no such PPN exists. The
reference code matches second moments instead, which is what is implemented here:

* ``jopeq-laplace``: n ~ Laplace(b') with 2 b'^2 = 2 b^2 - Delta^2/12, b = 2/eps, so Var(n + e) = 2 b^2.
* ``jopeq-t``: n ~ t_nu(0, S') with S' = ((nu - 2)/nu) (nu s2/(nu - 2) I - Cov(P0)), so Cov(n + e) is
  that of the target t_nu(0, s2 I).

n + e is then not the target law and its privacy is worse than claimed: ``true_epsilon`` computes the
epsilon of the realised n + e for the shift 2 of a scaled block in the unit ball (``sensitivity`` for L = 2).
The guarantee states the paper's claim ``eps`` and carries the flag "claim-exceeded" when the true epsilon is
larger. A target variance not above the dither's is refused: the code silently produces NaN there, and the
paper's Theorem III.3 (privacy from the dither alone, sqrt(24) <= gamma eps / 2^R) cannot hold, since a
bounded error gives no pure LDP at all.
"""

from __future__ import annotations

import abc
import functools
import math
import struct
from collections.abc import Callable
from typing import Self

import numpy as np
import torch
from scipy.optimize import minimize
from scipy.special import gammaln, roots_legendre

from auditkit.mechanisms.additive import _FLOAT_NOISE_CAVEAT, _PER_ROUND_CAVEAT, laplace_noise
from auditkit.mechanisms.base import Mechanism, as_update, choice, int_range, positive_float, zero_or_above
from auditkit.mechanisms.capabilities import AuditSetting, LogDensity, SideValues, Tiling
from auditkit.mechanisms.guarantee import CLAIM_EXCEEDED, REPLACE_ONE, PrivacyGuarantee
from auditkit.mechanisms.densities import OutputDensity
from auditkit.mechanisms.laplace_uniform import laplace_uniform_logpdf, pair_log_density_sums
from auditkit.mechanisms.lattice import HexagonalLattice, from_blocks, to_blocks
from auditkit.mechanisms.message import Message
from auditkit.mechanisms.randomness import private_generator
from auditkit.mechanisms.registry import register
from auditkit.mechanisms.sdq import SDQ, HexagonalSDQ, LatticeSDQMessage, _FiniteSDQ
from auditkit.mechanisms.tdist import T_NOISE_PARAMS, resolve_t_noise, sample_t, t_epsilon

__all__ = [
    "JoPEQLaplace",
    "JoPEQT",
    "JoPEQMessage",
    "JOPEQ_AUDIT_BLOCKS",
    "jopeq_audit_setting",
    "jopeq_scaling",
    "privacy_loss_sup",
    "t_hexagon_epsilon",
]

_F32 = np.finfo(np.float32)


class JoPEQMessage(Message):
    """The scale zeta and the lattice indices of one update.

    Layout (little-endian): tag (uint8 = 21) | zeta (float32, finite, > 0) | a complete ``LatticeSDQMessage``
    (tag 20 and its own header: length, dimension L, levels, overloads, entropy-coded block symbols).
    """

    TAG = 21
    _HEADER = struct.Struct("<Bf")

    def __init__(self, zeta: float, quantized: LatticeSDQMessage) -> None:
        if not (math.isfinite(zeta) and zeta > 0 and float(np.float32(zeta)) == zeta):
            raise ValueError(f"JoPEQMessage: zeta must be a finite float32 > 0, got {zeta!r}")
        self.zeta = zeta
        self.quantized = quantized

    @property
    def indices(self) -> np.ndarray:
        return self.quantized.indices

    @property
    def overloads(self) -> int:
        return self.quantized.overloads

    @property
    def side_value(self) -> float:
        """zeta, sent in clear."""
        return self.zeta

    def __len__(self) -> int:
        return len(self.quantized)

    def _serialize(self) -> bytes:
        return self._HEADER.pack(self.TAG, self.zeta) + self.quantized.to_bytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> Self:
        _, zeta = cls._check_tag(data, cls._HEADER)
        message = cls(zeta, LatticeSDQMessage.from_bytes(data[cls._HEADER.size :]))
        message._wire = bytes(data)
        return message


JOPEQ_AUDIT_BLOCKS = 9  # M = 9 blocks with ||h|| = 1 give zeta = sqrt(9) / 3 = 1


def jopeq_audit_setting(block: int, sensitivity: float) -> AuditSetting:
    """The claim is per scaled block zeta h_i in the unit ball, zeta = sqrt(M) / (3 ||h||). With M = 9 blocks and
    ||h|| = 1, zeta = 1 exactly and a block of norm 1 is on the unit sphere, so the pair -v, +v (||v|| = s/2, the
    rest of the norm filled into block 2) differs by the claimed shift s in one scaled block at the same zeta.
    Pairs with different norms are told apart through zeta alone (the adaptive side-channel test). A shift above 2
    cannot occur in the unit ball, so the pairs stop at 2."""
    return AuditSetting(
        JOPEQ_AUDIT_BLOCKS * block, min(sensitivity, 2.0), "l2", 1.0, block, same_norm=True,
        note=f"{JOPEQ_AUDIT_BLOCKS} blocks of {block} with ||h|| = 1: zeta = 1, one scaled block moves by "
             f"{min(sensitivity, 2.0):g}",
    )  # fmt: skip


def jopeq_scaling(h: torch.Tensor, blocks: int) -> float:
    """zeta = sqrt(M) / (3 ||h||) (JoPEQ Sec. III-A) rounded to float32, clamped to the finite positive
    float32 range (an all-zero update gets the largest float32). Scaled blocks have rms norm 1/3."""
    norm = torch.linalg.vector_norm(h).item()
    raw = math.sqrt(blocks) / (3 * norm) if norm > 0 else math.inf
    return float(np.float32(min(max(raw, float(_F32.tiny)), float(_F32.max))))


def scale_side_values(block: int) -> SideValues:
    """JoPEQ's side value for a batch: zeta = ``jopeq_scaling`` of each row with M = ceil(d / block) blocks."""

    def sample(x: torch.Tensor, seed: int) -> torch.Tensor:
        blocks = -(-x.shape[1] // block)
        return torch.tensor([jopeq_scaling(as_update(row), blocks) for row in x], dtype=torch.float64)

    return SideValues(sample, why="zeta = sqrt(M) / (3 ||h||) per row, as encode computes it (the seed plays no part)")


SUPPORT_RULES = ("jopeq-code", "paper002")  # whose rule: the reference code's or the paper's
FORMS = ("joint", "separate")


def laplace_support(eps: float, bits: int, rule: str) -> float:
    """The scaled-domain range radius gamma of JoPEQ-Laplace when none is given: "jopeq-code", the reference
    code's 1.5 sqrt(1 + 2 (2/eps)^2) (1.5 times the rms of 1 + the target noise); "paper002", gamma = 2R + 1/eps
    (002 Sec. IV-A, MNIST)."""
    if rule == "paper002":
        return 2 * bits + 1 / eps
    return 1.5 * math.sqrt(1 + 2 * (2 / eps) ** 2)


def privacy_loss_sup(logpdf: Callable[[np.ndarray], np.ndarray], points: np.ndarray, shift: np.ndarray) -> float:
    """max over the rows z of ``points`` of ln f(z) - ln f(z - shift): the privacy loss of additive noise of
    density f between two inputs ``shift`` apart, maximised over a grid (a lower bound on its supremum)."""
    return float(np.max(logpdf(points) - logpdf(points - shift)))


def _hexagon_quadrature(step: float, order: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights (summing to 1) of the uniform distribution on the Voronoi hexagon of step * A2.

    The hexagon is cut into six triangles (0, v_k, v_k+1); each is the image of the unit square under the
    collapsed (Duffy) map (u, t) -> u (v_k + t (v_k+1 - v_k)), Jacobian u |det(v_k, v_k+1)|, with an
    ``order`` x ``order`` Gauss-Legendre rule on the square.
    """
    x, w = roots_legendre(order)
    x, w = (x + 1) / 2, w / 2
    u, t = np.meshgrid(x, x, indexing="ij")
    wu, wt = np.meshgrid(w, w, indexing="ij")
    vertices = step * HexagonalLattice().voronoi_vertices().numpy()
    nodes, weights = [], []
    for a, b in zip(vertices, np.roll(vertices, -1, axis=0), strict=True):
        nodes.append((u[..., None] * (a + t[..., None] * (b - a))).reshape(-1, 2))
        weights.append((wu * wt * u).ravel() * abs(a[0] * b[1] - a[1] * b[0]))
    weights = np.concatenate(weights)
    return np.concatenate(nodes), weights / weights.sum()


@functools.lru_cache(maxsize=64)
def t_hexagon_epsilon(nu: float, s2: float, step: float, sensitivity: float) -> float:
    """Largest privacy loss found for n + e, n ~ t_nu(0, s2 I_2), e ~ Unif(step * hexagon): a LOWER BOUND
    on the true epsilon of that noise for shifts of norm ``sensitivity`` (a numerical search, no certificate).

    The density f(z) = E_e[p_t(z - e)] is computed by the 8 x 8-per-triangle quadrature of
    ``_hexagon_quadrature`` (the integrand is smooth; a 16 x 16 rule changes the result by < 1e-8).
    f has the symmetry group of the hexagon (12 elements), so shifts at angles 0..30 degrees from a vertex
    cover every direction. For shifts delta at 0, 7.5, 15, 22.5 and 30 degrees the loss
    ln f(z) - ln f(z - delta) is maximised over a grid of z = a u + b u_perp (u = delta/|delta|), then
    refined by Nelder-Mead over (a, b, angle) from the best grid point.
    """
    nodes, weights = _hexagon_quadrature(step, 8)
    log_norm = gammaln((nu + 2) / 2) - gammaln(nu / 2) - math.log(nu * math.pi * s2)

    def logpdf(z: np.ndarray) -> np.ndarray:
        r2 = ((z[:, None, :] - nodes[None]) ** 2).sum(-1)
        log_p = log_norm - (nu + 2) / 2 * np.log1p(r2 / (nu * s2))
        top = log_p.max(axis=1, keepdims=True)
        return top[:, 0] + np.log(np.exp(log_p - top) @ weights)

    def frame(angle: float) -> tuple[np.ndarray, np.ndarray]:
        return np.array([math.cos(angle), math.sin(angle)]), np.array([-math.sin(angle), math.cos(angle)])

    reach = sensitivity + 2 * (math.sqrt(nu * s2) + step)
    a, b = np.meshgrid(np.linspace(-reach, reach, 121), np.linspace(-step, step, 11), indexing="ij")
    best, start = -math.inf, (0.0, 0.0, 0.0)
    for angle in np.radians([0.0, 7.5, 15.0, 22.5, 30.0]):
        u, v = frame(angle)
        z = a.reshape(-1, 1) * u + b.reshape(-1, 1) * v
        loss = logpdf(z) - logpdf(z - sensitivity * u)
        i = int(np.argmax(loss))
        if loss[i] > best:
            best, start = float(loss[i]), (a.flat[i], b.flat[i], angle)

    def negative_loss(p: np.ndarray) -> float:
        u, v = frame(p[2])
        z = (p[0] * u + p[1] * v)[None]
        return -float(logpdf(z)[0] - logpdf(z - sensitivity * u)[0])

    refined = minimize(negative_loss, np.array(start), method="Nelder-Mead", options={"xatol": 1e-7, "fatol": 1e-12})
    return max(best, -float(refined.fun))


class ScaledLaplaceUniform(OutputDensity):
    """JoPEQ-Laplace's output density: y = x + (n + e) / zeta with zeta = ``jopeq_scaling(x)`` (one block per
    coordinate), n ~ Laplace(b') and e ~ Unif(+-Delta/2) per coordinate, so

        ln p(y | x) = sum_i ln f(zeta (y_i - x_i)) + d ln zeta,        f the density of Laplace(b') + Unif(+-Delta/2),

    per output (float32 terms summed in float64, fast on the distinguishing tests' millions of short outputs)
    and over many (output, candidate) pairs in float64 (``auditkit.mechanisms.laplace_uniform.pair_log_density_sums``)."""

    def __init__(self, scale: float, width: float) -> None:
        self.scale, self.width = scale, width

    @staticmethod
    def _zeta(x: np.ndarray) -> float:
        return jopeq_scaling(torch.from_numpy(np.asarray(x, dtype=np.float64)), x.size)

    def __call__(self, y: np.ndarray, x: np.ndarray) -> np.ndarray:
        zeta = self._zeta(x)
        z = (zeta * (y - x)).astype(np.float32)
        return laplace_uniform_logpdf(z, self.scale, self.width).sum(axis=1, dtype=np.float64) + x.size * math.log(zeta)

    def pairs(self, ys: np.ndarray, xs: np.ndarray, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
        zetas = np.array([self._zeta(x) for x in xs])
        sums = pair_log_density_sums(ys, xs, rows, columns, zetas, self.scale, self.width)
        return sums + xs.shape[1] * np.log(zetas[columns])


_JOPEQ_CAVEATS = (
    "zeta = sqrt(M) / (3 ||h||) is sent in clear: the server learns ||h|| exactly",
    "the claim assumes every scaled block zeta h_i lies in the unit ball; zeta only makes their rms norm 1/3 "
    "and nothing enforces the bound",
    "an overloaded block (counted in the message) is clamped into the range: its error depends on h and the "
    "claim does not hold for it",
    "the claim covers one block of the scaled update; the M blocks of an update have independent noise, so "
    "the privacy loss of the whole update can reach M times the block's",
    _PER_ROUND_CAVEAT,
    _FLOAT_NOISE_CAVEAT,
)
_PRIVATE_PPN = "the server does not know private_seed (None: OS entropy), so it cannot regenerate the PPN"


class _JoPEQ(Mechanism):
    """Scaling, shared dither, private PPN and finite-range SDQ of blocks of ``quantizer.lattice``'s dimension."""

    message_type = JoPEQMessage
    quantizer: _FiniteSDQ

    @abc.abstractmethod
    def _ppn(self, blocks: int, gen: torch.Generator) -> torch.Tensor:
        """The PPN of ``blocks`` blocks (blocks x L, float64) drawn from the private generator."""

    @abc.abstractmethod
    def true_epsilon(self) -> float:
        """The epsilon of the realised noise n + e of one block (per round, scaled domain)."""

    @property
    def dimension(self) -> int:
        return self.quantizer.lattice.dimension

    def tiling(self) -> Tiling:
        """zeta = sqrt(M) / (3 ||h||) is unchanged by tiling: sqrt(B M) / (3 sqrt(B) ||h||) = zeta (up to the last
        bit of a float64 before zeta is rounded to float32); dither and PPN are iid per block."""
        return Tiling(block=self.dimension, why="zeta unchanged by tiling; dither and PPN iid per block")

    def audit_setting(self) -> AuditSetting:
        return jopeq_audit_setting(self.dimension, self.params.get("sensitivity", 2.0))

    def side_values(self) -> SideValues:
        """zeta of each row, by ``jopeq_scaling`` as ``encode`` computes it (rounded to float32 there, so the
        message's float32 header holds it exactly); it depends on the input alone, not on the seed."""
        return scale_side_values(self.dimension)

    @property
    def levels(self) -> int:
        return self.quantizer.levels

    @property
    def step(self) -> float:
        return self.quantizer.step

    def encode(self, x: torch.Tensor, seed: int) -> JoPEQMessage:
        h = as_update(x)
        blocks = to_blocks(h, self.dimension)
        zeta = jopeq_scaling(h, blocks.shape[0])
        noise = self._ppn(blocks.shape[0], private_generator(self.private_seed, seed, "noise"))
        indices, overloads = self.quantizer.quantize(zeta * blocks + noise, seed)
        return JoPEQMessage(zeta, LatticeSDQMessage(indices.numpy(), h.numel(), self.levels, overloads))

    def decode(self, enc: JoPEQMessage, seed: int) -> torch.Tensor:
        self._check_message(enc)
        if (enc.quantized.dimension, enc.quantized.levels) != (self.dimension, self.levels):
            raise ValueError(
                f"message has {enc.quantized.levels} levels in dimension {enc.quantized.dimension}, "
                f"this {self.name} configuration uses {self.levels} in dimension {self.dimension}"
            )
        blocks = self.quantizer.reconstruct(torch.from_numpy(enc.indices), seed)
        return from_blocks(blocks / enc.zeta, len(enc)).to(torch.float32)

    def _claim(self, unit: str, sensitivity: str, caveats: tuple[str, ...]) -> PrivacyGuarantee:
        eps, actual = self.params["eps"], self.true_epsilon()
        return PrivacyGuarantee(
            epsilon=eps,
            delta=0.0,
            relation=REPLACE_ONE,
            unit=unit,
            sensitivity=sensitivity,
            assumptions=("the quantizer is not overloaded", _PRIVATE_PPN),
            caveats=(*caveats, *_JOPEQ_CAVEATS),
            flags={CLAIM_EXCEEDED} if actual > eps * (1 + 1e-9) else set(),
        )


@register
class JoPEQLaplace(_JoPEQ):
    """JoPEQ with the Laplace mechanism and scalar quantization (L = 1), moment-matched (reference code).

    Target: n + e ~ Laplace(b), b = 2/eps (Theorem III.2: eps-LDP for scaled coordinates in [-1, 1], shift
    <= 2). Quantizer: ``sdq`` with K = 2^bits levels (2^bits + 1 with compat="jopeq-code") on
    [-support, support], step Delta = 2 support / K; support = 0 derives it by ``support_rule``: "jopeq-code",
    the reference code's 1.5 sqrt(1 + 2 (2/eps)^2), or "paper002", gamma = 2R + 1/eps (Sec. IV-A, MNIST:
    "numerically assures non-overloaded quantizers with high probability"). PPN: Laplace(b') with 2 b'^2 = 2 b^2 - Delta^2/12 (refused unless > 0).

    n + e has the variance 2 b^2 of the target but the tails of Laplace(b'): its density is
    ``laplace_uniform_logpdf`` and its epsilon 2/b' > eps (``true_epsilon``; e.g. eps = 4, R = 1,
    jopeq-code: Delta = 1.2247, b' = 0.4330, 4.619).
    """

    name = "jopeq-laplace"
    summary = "JoPEQ, scalar SDQ + moment-matched Laplace PPN (L = 1, as the reference code)"
    params_spec = (
        positive_float("eps", 4.0, "claimed epsilon of the Laplace mechanism per scaled coordinate (b = 2/eps)"),
        int_range("bits", 1, 16, 1, "bit rate R: 2^R levels (2^R + 1 with compat=jopeq-code)"),
        zero_or_above("support", 0, "range radius gamma (scaled domain); 0: derived by support_rule"),
        SDQ.params_spec[2],
        choice("support_rule", SUPPORT_RULES, "jopeq-code",
               "how support = 0 is derived: jopeq-code (the reference code): 1.5 sqrt(1 + 2 (2/eps)^2); paper002: "
               "2R + 1/eps (Sec. IV-A)"),
        choice("form", FORMS, "joint",
               "joint: JoPEQ (PPN moment-matched to the dither); separate: the paper's disjoint FL+Lap+SDQ, the "
               "full Laplace(2/eps), then the same quantizer"),
    )

    def __init__(self, **params: object) -> None:
        super().__init__(**params)
        p = self.params
        self.target_scale: float = 2 / p["eps"]
        support = p["support"] or laplace_support(p["eps"], p["bits"], p["support_rule"])
        self.quantizer = SDQ(bits=p["bits"], support=support, compat=p["compat"])
        target, dither = 2 * self.target_scale**2, self.step**2 / 12
        if p["form"] == "separate":  # the baseline: privacy noise, then quantization adding its own error
            self.ppn_scale: float = self.target_scale
            return
        if target <= dither:
            raise ValueError(
                f"jopeq-laplace: the target noise variance 2b^2 = {target:.6g} (b = 2/eps) is not above the dither "
                f"variance Delta^2/12 = {dither:.6g} (Delta = 2 support / {self.levels} = {self.step:.6g}): no "
                "privacy noise can make up the difference; lower eps, raise bits or lower support"
            )
        self.ppn_scale: float = math.sqrt((target - dither) / 2)

    def _ppn(self, blocks: int, gen: torch.Generator) -> torch.Tensor:
        return laplace_noise(blocks, self.ppn_scale, gen).view(-1, 1)

    def output_log_density(self) -> LogDensity:
        """In the scaled domain z = zeta (y - x) (zeta = ``jopeq_scaling(x)``) per coordinate Laplace(b') +
        Unif(+-Delta/2) without overload, plus the Jacobian d ln zeta (``ScaledLaplaceUniform``)."""
        return ScaledLaplaceUniform(self.ppn_scale, self.step)

    def true_epsilon(self) -> float:
        """sup_z ln f(z)/f(z - 2) for the density f of Laplace(b') + Unif(+-Delta/2), on a grid of 4001 points
        through both tails (f is symmetric, so the shift -2 gives the same). Equals 2/b' (see
        ``laplace_uniform_logpdf``)."""
        reach = self.step / 2 + 2 + 10 * self.ppn_scale
        z = np.linspace(-reach, reach, 4001)
        return privacy_loss_sup(lambda v: laplace_uniform_logpdf(v, self.ppn_scale, self.step), z, np.array(2.0))

    def guarantee(self) -> PrivacyGuarantee:
        if self.params["form"] == "separate":
            return self._claim(
                "one coordinate of the scaled update (L = 1 block)", "scaled coordinate in [-1, 1]: shift <= 2",
                (f"separate (FL+Lap+SDQ): n + e = Laplace(b = {self.ppn_scale:.4g}) + Unif(+-{self.step / 2:.4g}), "
                 f"error variance 2 b^2 + Delta^2/12 = {2 * self.ppn_scale**2 + self.step**2 / 12:.4g}; the "
                 "quantizer adds distortion and no privacy",),
            )
        return self._claim(
            "one coordinate of the scaled update (L = 1 block)",
            "scaled coordinate in [-1, 1]: shift <= 2",
            (
                f"moment-matched PPN (reference code): n + e = Laplace(b' = {self.ppn_scale:.4g}) + "
                f"Unif(+-{self.step / 2:.4g}) has the target's variance 2 b^2 = {2 * self.target_scale**2:.4g} but "
                f"epsilon 2/b' = {self.true_epsilon():.4g}, not {self.params['eps']:g} (the paper's exact PPN of "
                "Theorem III.2 does not exist)",
            ),
        )


@register
class JoPEQT(_JoPEQ):
    """JoPEQ with the multivariate t mechanism and the hexagonal lattice (L = 2), moment-matched.

    Target: n + e ~ t_nu(0, s2 I_2) (Theorem III.1), eps-LDP per scaled pair by eq. (11) with
    Delta = sensitivity / sqrt(s2); ``nu``/``s2`` as in ``auditkit.mechanisms.tdist`` (0: minimum variance for eps).
    sensitivity = 2 is rigorous for pairs in the unit disc (the paper's appendix says sqrt 2; the code's
    parameter table implies 1).

    Quantizer: ``sdq-hex``. The paper ties R to the lattice only through "the number of lattice points";
    here, as in the reference code, each basis coordinate has K = 2^bits levels (2^bits + 1 with
    compat="jopeq-code") at step Delta = 2 support / K, i.e. K^2 points per pair (R bits per coordinate
    at fixed width) whose range contains the disc of radius support - Delta/2. support = 0 means the code's
    1.5 sqrt(1 + nu s2/(nu - 2)) (the paper prints 1.5 (1 + nu s2/(nu - 2))).
    PPN: t_nu(0, S'), S' = ((nu - 2)/nu) (nu s2/(nu - 2) - (5/54) Delta^2) I, the hexagon's Cov(P0) being
    (5/54) Delta^2 I (refused unless S' > 0).
    """

    name = "jopeq-t"
    summary = "JoPEQ, hexagonal-lattice SDQ + moment-matched bivariate t PPN (L = 2, as the reference code)"
    params_spec = (
        *T_NOISE_PARAMS,
        positive_float("sensitivity", 2.0, "l2 shift of a scaled pair that eps covers (2: the unit disc)"),
        int_range("bits", 1, 12, 1, "bit rate R per coordinate: 2^R levels per basis coordinate (2^R + 1 with compat)"),
        zero_or_above("support", 0, "range radius gamma (scaled domain); 0: the code's 1.5 sqrt(1 + nu s2/(nu - 2))"),
        HexagonalSDQ.params_spec[2],
    )

    def __init__(self, **params: object) -> None:
        super().__init__(**params)
        p = self.params
        self.nu, self.s2 = resolve_t_noise(p["eps"], p["nu"], p["s2"], p["sensitivity"])
        target = self.nu * self.s2 / (self.nu - 2)
        support = p["support"] or 1.5 * math.sqrt(1 + target)
        self.quantizer = HexagonalSDQ(bits=p["bits"], support=support, compat=p["compat"])
        dither = self.quantizer.error_covariance[0, 0].item()
        if target <= dither:
            raise ValueError(
                f"jopeq-t: the target noise variance nu s2/(nu - 2) = {target:.6g} per coordinate is not above the "
                f"dither variance (5/54) Delta^2 = {dither:.6g} of the hexagonal cell (Delta = 2 support / "
                f"{self.levels} = {self.step:.6g}): no privacy noise can make up the difference; lower eps, "
                "raise bits or lower support"
            )
        self.ppn_s2: float = (self.nu - 2) / self.nu * (target - dither)

    def _ppn(self, blocks: int, gen: torch.Generator) -> torch.Tensor:
        return sample_t(blocks, 2, self.nu, self.ppn_s2, gen)

    def target_epsilon(self) -> float:
        """Eq. (11) for the target t_nu(0, s2 I): equal to ``eps`` unless both nu and s2 were given."""
        return t_epsilon(self.nu, self.s2, self.params["sensitivity"])

    def true_epsilon(self) -> float:
        """A numerical lower bound on the epsilon of t_nu(0, S') + Unif(hexagon): ``t_hexagon_epsilon``."""
        return t_hexagon_epsilon(self.nu, self.ppn_s2, self.step, self.params["sensitivity"])

    def guarantee(self) -> PrivacyGuarantee:
        return self._claim(
            "one pair of the scaled update (L = 2 block)",
            f"scaled pair in the unit disc: shift <= {self.params['sensitivity']:g}",
            (
                f"target t(nu = {self.nu:.4g}, s2 = {self.s2:.4g}) has eq. (11) epsilon "
                f"{self.target_epsilon():.4g}; the moment-matched PPN t(nu, s2' = {self.ppn_s2:.4g}) plus the "
                f"hexagonal dither error has epsilon >= {self.true_epsilon():.4g} (numerical lower bound)",
            ),
        )
