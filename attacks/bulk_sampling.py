"""Draw many independent outputs of a mechanism for one input, from the real implementation, in bulk.

A black-box audit must sample the mechanism as implemented, not a model of it. ``bulk_sampler`` picks the
fastest path that is faithful, i.e. whose B outputs have exactly the joint law of B separate calls
``m(x, seed_i)`` with independent seeds:

* ``batched callable``: a callable ``f(x, seed)`` that maps a batch x (B, d) to B independent outputs
  (B, d_out) by contract; called on chunks of rows.
* ``tiled``: one call of the real mechanism on B copies of x laid end to end (each copy zero-padded to a
  multiple of the mechanism's block length L). Faithful when the mechanism acts block by block with
  randomness that is iid across blocks and no per-call quantity couples the copies: ``none``, ``sdq``,
  ``sdq-hex`` (shared dither iid per block, overloads per block) and the JoPEQ family, whose per-call scale
  zeta = sqrt(M) / (3 ||h||) is unchanged by tiling, sqrt(B M) / (3 sqrt(B) ||h||) = zeta (up to the last
  bit of a float64 before zeta is rounded to float32); ``jopeq-exact``'s coding range sqrt(M) / 3 grows with
  B, which changes how M is coded, not the decoded value.
* ``tiled, clip rescaled``: mechanisms that clip the whole update in an lp norm couple the copies through
  that norm, ||tile_B(x)||_p = B^(1/p) ||x||_p. The call is made on a copy of the mechanism with
  clip' = B^(1/p) clip, so max(1, ||tile_B(x)||_p / clip') = max(1, ||x||_p / clip) and every copy is scaled
  exactly as a single call would scale it (to rounding in the last bit). Used where the clip enters nothing
  else of the output law: ``gaussian``, ``laplace``, ``gaussian+sdq``, ``laplace+sdq``, ``cepam-gaussian``
  and ``cepam-laplace`` (the clip is also their coding range, which changes how M is coded, not the
  decoded value; B is capped so the range stays far inside the coder's 32-bit limit), and ``t-dist``,
  ``t-dist+sdq`` with the derived parameters that depend on clip (nu, s2, the quantizer support) pinned
  to the original's values. CEPAM with ``compat=paper000`` normalises in l2 instead: the same rescaling
  keeps the normalised copies and the side value ||x|| / clip.
* DP-SQ (``dpsq``, ``laplace-sq``) tiles (block 1, private coins iid per coordinate) only with
  ``clip_norm="none"`` and the literal range: their clip is also the quantizer's range, so it cannot be
  rescaled, and the adaptive range is a per-call quantity. Otherwise they take the per-call path.
* ``per call``: any other mechanism (including subclasses of the above, whose overrides may couple
  coordinates): one call per output, each with its own seed. Always faithful, about 1e3-1e5 outputs/s.

Seeds: chunk c of stream s gets the shared seed ``derive_seed(seed, s, c)`` (output i of the per-call path
``derive_seed(seed, s, i)``), so every call has fresh shared and private randomness. A mechanism given by name
is created with ``private_seed = derive_seed("distinguish-private", seed)``, so runs are reproducible; a given
instance keeps its ``private_seed`` (None: OS entropy on every call, not reproducible).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

import mechanisms
from mechanisms.additive import Gaussian, Laplace
from mechanisms.base import Mechanism
from mechanisms.cepam import CEPAMGaussian, CEPAMLaplace
from mechanisms.dpsq import DPSQ, LaplaceSQ
from mechanisms.identity import Identity
from mechanisms.jopeq import JoPEQLaplace, JoPEQT
from mechanisms.jopeq_exact import JoPEQExact
from mechanisms.noisy_sdq import GaussianSDQ, LaplaceSDQ, TDistSDQ
from mechanisms.sdq import SDQ, HexagonalSDQ
from mechanisms.tdist import TDist

__all__ = ["BatchedMechanism", "BulkSampler", "bulk_sampler", "resolve_mechanism"]

BatchedMechanism = Callable[[torch.Tensor, int], torch.Tensor]
"""f(x, seed): x of shape (B, d) float64 -> B independent outputs of shape (B, d_out)."""

_MAX_COORDINATES = 2**20  # coordinates per call of a tiled or batched path (memory, not correctness)
_CODED_RANGE_COPIES = 2**12  # copies per call where the clip is also a coding range (CEPAM, jopeq-exact)
# CEPAM codes indices up to clip / radius in 32 bits; the radius is the noise scale times a latent U with
# P(U < u) ~ u^2 / 2 near 0. Keeping the tiled clip below this many noise scales keeps u >= 1.4e-5: a coder
# overflow below 1e-10 per sub-vector, even for weak noise on a large clip (scale 0.007 on an l1 clip of 50).
_CODED_RANGE_NOISE_SCALES = 6e4


@dataclass(frozen=True)
class _TileRule:
    """How to tile one mechanism class: block length L, the clip norm p (None: no clip to rescale), the
    largest number of copies per call, and the derived parameters to pin when rebuilding with clip'."""

    block: Callable[[Any], int]
    clip_norm: Callable[[Any], int | None] = lambda m: None
    max_copies: Callable[[Any], int] | None = None
    pinned: Callable[[Any], dict[str, Any]] = lambda m: {}


def _cepam_norm(m: Any, norm: int) -> int:
    return 2 if m.params["compat"] == "paper000" else norm


def _cepam_copies(m: Any, norm: int) -> int:
    """Copies per call that keep the rescaled clip B^(1/p) clip within the coder's range for CEPAM's noise."""
    noise = m.params["sigma"] if "sigma" in m.params else m.params["scale"]
    within = int((_CODED_RANGE_NOISE_SCALES * noise / m.params["clip"]) ** _cepam_norm(m, norm))
    return max(1, min(_CODED_RANGE_COPIES, within))


_TILE_RULES: dict[type[Mechanism], _TileRule] = {
    Identity: _TileRule(block=lambda m: 1),
    SDQ: _TileRule(block=lambda m: 1),
    HexagonalSDQ: _TileRule(block=lambda m: 2),
    JoPEQLaplace: _TileRule(block=lambda m: 1),
    JoPEQT: _TileRule(block=lambda m: 2),
    JoPEQExact: _TileRule(block=lambda m: m.params["n"], max_copies=lambda m: _CODED_RANGE_COPIES),
    Gaussian: _TileRule(block=lambda m: 1, clip_norm=lambda m: 2),
    Laplace: _TileRule(block=lambda m: 1, clip_norm=lambda m: 1),
    GaussianSDQ: _TileRule(block=lambda m: 1, clip_norm=lambda m: 2),
    LaplaceSDQ: _TileRule(block=lambda m: 1, clip_norm=lambda m: 1),
    CEPAMGaussian: _TileRule(
        block=lambda m: m.params["n"], clip_norm=lambda m: _cepam_norm(m, 2), max_copies=lambda m: _cepam_copies(m, 2)
    ),
    CEPAMLaplace: _TileRule(
        block=lambda m: 1, clip_norm=lambda m: _cepam_norm(m, 1), max_copies=lambda m: _cepam_copies(m, 1)
    ),
    DPSQ: _TileRule(block=lambda m: 1),
    LaplaceSQ: _TileRule(block=lambda m: 1),
    TDist: _TileRule(block=lambda m: 2, clip_norm=lambda m: 2, pinned=lambda m: {"nu": m.nu, "s2": m.s2}),
    TDistSDQ: _TileRule(
        block=lambda m: 2,
        clip_norm=lambda m: 2,
        pinned=lambda m: {"nu": m.noise.nu, "s2": m.noise.s2, "support": m.quantizer.params["support"]},
    ),
}


def _tileable(m: Mechanism) -> bool:
    """DP-SQ's clip is also its quantizer range, so a rescaled clip would move the grid: only its unclipped,
    literal-range variant (clip_norm="none", per-coordinate clamp, fixed grid) tiles faithfully."""
    if isinstance(m, (DPSQ, LaplaceSQ)):
        return m.params["clip_norm"] == "none" and m.params.get("range", "literal") == "literal"
    return True


def resolve_mechanism(mechanism: str | Mechanism | BatchedMechanism, *, seed: int) -> Mechanism | BatchedMechanism:
    """A registered name becomes ``mechanisms.create(name, private_seed=...)`` (module docstring); a
    ``Mechanism`` or callable is returned as is; anything else is a ``ValueError``."""
    if isinstance(mechanism, str):
        return mechanisms.create(mechanism, private_seed=mechanisms.derive_seed("distinguish-private", seed))
    if isinstance(mechanism, Mechanism) or callable(mechanism):
        return mechanism
    raise ValueError(
        f"mechanism must be a registered name, a Mechanism or a callable f(x, seed), got {type(mechanism).__name__}"
    )


class BulkSampler:
    """``sampler(x, count, stream)``: ``count`` independent outputs (count x d_out, float64) for the input x (d,).

    ``path`` names the sampling path and ``description`` says why it is faithful (module docstring);
    ``per_call=True`` forces one call per output for a ``Mechanism`` (the reference the fast paths match).
    """

    def __init__(self, mechanism: Mechanism | BatchedMechanism, *, seed: int, per_call: bool = False) -> None:
        self.mechanism = mechanism
        self.seed = seed
        tiled = isinstance(mechanism, Mechanism) and not per_call
        self._rule = _TILE_RULES.get(type(mechanism)) if tiled and _tileable(mechanism) else None
        self._rebuilt: dict[int, Mechanism] = {}
        if not isinstance(mechanism, Mechanism):
            self.path = "batched callable"
            self.description = "the callable maps a batch (B, d) to B independent outputs by contract"
        elif self._rule is None:
            self.path = "per call"
            self.description = f"{mechanism.name}: one call of the real mechanism per output"
        elif self._rule.clip_norm(mechanism) is None:
            self.path = "tiled"
            self.description = (
                f"{mechanism.name}: one call on B copies end to end (block length {self._rule.block(mechanism)}; "
                "iid randomness per block, no per-call coupling)"
            )
        else:
            p = self._rule.clip_norm(mechanism)
            self.path = "tiled, clip rescaled"
            self.description = (
                f"{mechanism.name}: one call on B copies end to end on a copy with clip' = B^(1/{p}) clip, so the "
                f"l{p} clipping of the tiled vector scales every copy as one call would"
            )

    def __call__(self, x: torch.Tensor, count: int, stream: int) -> torch.Tensor:
        x = x.detach().to(device="cpu", dtype=torch.float64).reshape(-1)
        if self._rule is not None:
            return self._tiled(x, count, stream)
        if isinstance(self.mechanism, Mechanism):
            rows = [
                self.mechanism(x, mechanisms.derive_seed(self.seed, stream, i)).to(torch.float64) for i in range(count)
            ]
            return torch.stack(rows)
        return self._batched(x, count, stream)

    def _batched(self, x: torch.Tensor, count: int, stream: int) -> torch.Tensor:
        rows_per_call = max(1, _MAX_COORDINATES // max(1, x.numel()))
        chunks = []
        for chunk, start in enumerate(range(0, count, rows_per_call)):
            rows = min(rows_per_call, count - start)
            out = self.mechanism(x.expand(rows, -1).clone(), mechanisms.derive_seed(self.seed, stream, chunk))
            out = torch.as_tensor(out).to(device="cpu", dtype=torch.float64)
            if out.ndim != 2 or out.shape[0] != rows:
                raise ValueError(
                    f"the callable must return one output row per input row: shape ({rows}, d_out), got "
                    f"{tuple(out.shape)}"
                )
            chunks.append(out)
        return torch.cat(chunks)

    def _tiled(self, x: torch.Tensor, count: int, stream: int) -> torch.Tensor:
        rule, d = self._rule, x.numel()
        block = rule.block(self.mechanism)
        padded = -(-d // block) * block
        copies = max(1, _MAX_COORDINATES // padded)
        if rule.max_copies is not None:
            copies = min(copies, rule.max_copies(self.mechanism))
        row = torch.zeros(padded, dtype=torch.float64)
        row[:d] = x
        chunks = []
        for chunk, start in enumerate(range(0, count, copies)):
            b = min(copies, count - start)
            out = self._for_copies(b)(row.repeat(b), mechanisms.derive_seed(self.seed, stream, chunk))
            chunks.append(out.to(torch.float64).view(b, padded)[:, :d])
        return torch.cat(chunks)

    def _for_copies(self, copies: int) -> Mechanism:
        """The mechanism to call on ``copies`` tiled copies: itself, or a copy with the clip rescaled."""
        p = self._rule.clip_norm(self.mechanism)
        if p is None or copies == 1:
            return self.mechanism
        if copies not in self._rebuilt:
            m = self.mechanism
            params = {**m.params, **self._rule.pinned(m), "clip": m.params["clip"] * copies ** (1 / p)}
            self._rebuilt[copies] = type(m)(private_seed=m.private_seed, **params)
        return self._rebuilt[copies]


def bulk_sampler(mechanism: str | Mechanism | BatchedMechanism, *, seed: int = 0) -> BulkSampler:
    """The fastest faithful ``BulkSampler`` for ``mechanism`` (a registered name, a ``Mechanism`` or a
    batched callable); see the module docstring for the paths."""
    return BulkSampler(resolve_mechanism(mechanism, seed=seed), seed=seed)
