"""Draw many independent outputs of a mechanism for one input, from the real implementation, in bulk.

A black-box audit must sample the mechanism as implemented, not a model of it. ``bulk_sampler`` picks the
fastest path that is faithful, i.e. whose B outputs have exactly the joint law of B separate calls
``m(x, seed_i)`` with independent seeds:

* ``batched callable``: a callable ``f(x, seed)`` that maps a batch x (B, d) to B independent outputs
  (B, d_out) by contract; called on chunks of rows.
* ``tiled``: one call of the real mechanism on B copies of x laid end to end (each copy zero-padded to a
  multiple of the mechanism's block length), as the mechanism declares it can be sampled
  (``Mechanism.tiling()``, a ``auditkit.mechanisms.Tiling``: the block length, why it is faithful, the most copies per
  call, and the mechanism to call on B copies -- e.g. one whose clip is rescaled to B^(1/p) clip so that
  clipping the tiled vector scales every copy as one call would).
* ``mechanism batch``: where the mechanism cannot be tiled in its configuration (``tiling()`` returns None) but
  declares its own vectorised sampler (``Mechanism.batch_sampling()``, a ``auditkit.mechanisms.BatchSampling``: e.g.
  MSP-FL's split with a hidden m_i per call), that sampler called for chunks of B outputs.
* ``per call``: one call per output, each with its own seed. Always faithful, about 1e3-1e5 outputs/s. Taken
  when the mechanism declares neither (the description says whether it declared that it cannot be sampled in
  bulk or declared nothing, the generic default), and for ``per_call=True``.

Seeds: chunk c of stream s gets the shared seed ``derive_seed(seed, s, c)`` (output i of the per-call path
``derive_seed(seed, s, i)``), so every call has fresh shared and private randomness. A mechanism given by name
is created with ``private_seed = derive_seed("distinguish-private", seed)``, so runs are reproducible; a given
instance keeps its ``private_seed`` (None: OS entropy on every call, not reproducible).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from auditkit import mechanisms
from auditkit.mechanisms import BatchSampling, Mechanism, Tiling, capability, declared

__all__ = ["BatchedMechanism", "BulkSampler", "bulk_sampler", "resolve_mechanism"]

BatchedMechanism = Callable[[torch.Tensor, int], torch.Tensor]
"""f(x, seed): x of shape (B, d) float64 -> B independent outputs of shape (B, d_out)."""

_MAX_COORDINATES = 2**20  # coordinates per call of a tiled or batched path (memory, not correctness)


def resolve_mechanism(mechanism: str | Mechanism | BatchedMechanism, *, seed: int) -> Mechanism | BatchedMechanism:
    """A registered name becomes ``auditkit.mechanisms.create(name, private_seed=...)`` (module docstring); a
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
    ``generic_default`` is True when the per-call path was taken because the mechanism declares nothing about
    how it can be sampled; ``per_call=True`` forces one call per output for a ``Mechanism`` (the reference the
    fast paths match).
    """

    def __init__(self, mechanism: Mechanism | BatchedMechanism, *, seed: int, per_call: bool = False) -> None:
        self.mechanism = mechanism
        self.seed = seed
        self.generic_default = False
        self._tiling: Tiling | None = None
        self._batch: BatchSampling | None = None
        if not isinstance(mechanism, Mechanism):
            self.path = "batched callable"
            self.description = "the callable maps a batch (B, d) to B independent outputs by contract"
            return
        if not per_call:
            self._tiling = capability(mechanism, "tiling")
            self._batch = None if self._tiling is not None else capability(mechanism, "batch_sampling")
        if self._tiling is not None:
            self.path = "tiled"
            self.description = (
                f"{mechanism.name}: one call on B copies end to end (block length {self._tiling.block}): "
                f"{self._tiling.why}"
            )
            return
        if self._batch is not None:
            self.path = "mechanism batch"
            self.description = f"{mechanism.name}: its own sampler of B outputs in one call: {self._batch.why}"
            return
        self.path = "per call"
        if per_call:
            reason = "forced"
        elif declared(mechanism, "tiling") or declared(mechanism, "batch_sampling"):
            reason = "the mechanism declares it cannot be sampled in bulk in this configuration"
        else:
            self.generic_default = True
            reason = "generic default: the mechanism declares neither tiling nor batch_sampling"
        self.description = f"{mechanism.name}: one call of the real mechanism per output ({reason})"

    def __call__(self, x: torch.Tensor, count: int, stream: int) -> torch.Tensor:
        x = x.detach().to(device="cpu", dtype=torch.float64).reshape(-1)
        if self._tiling is not None:
            return self._tiled(x, count, stream)
        if self._batch is not None:
            return self._mechanism_batch(x, count, stream)
        if isinstance(self.mechanism, Mechanism):
            rows = [
                self.mechanism(x, mechanisms.derive_seed(self.seed, stream, i)).to(torch.float64) for i in range(count)
            ]
            return torch.stack(rows)
        return self._batched(x, count, stream)

    def _mechanism_batch(self, x: torch.Tensor, count: int, stream: int) -> torch.Tensor:
        return self._in_chunks(x.numel(), count, stream, lambda rows, seed: self._batch.sample(x, rows, seed),
                               f"{self.mechanism.name}.batch_sampling()")

    def _batched(self, x: torch.Tensor, count: int, stream: int) -> torch.Tensor:
        return self._in_chunks(x.numel(), count, stream,
                               lambda rows, seed: self.mechanism(x.expand(rows, -1).clone(), seed), "the callable")

    def _in_chunks(
        self, d: int, count: int, stream: int, draw: Callable[[int, int], torch.Tensor], who: str
    ) -> torch.Tensor:
        """``draw(rows, seed)`` on chunks of at most ``_MAX_COORDINATES`` coordinates, checked and concatenated."""
        rows_per_call = max(1, _MAX_COORDINATES // max(1, d))
        chunks = []
        for chunk, start in enumerate(range(0, count, rows_per_call)):
            rows = min(rows_per_call, count - start)
            out = torch.as_tensor(draw(rows, mechanisms.derive_seed(self.seed, stream, chunk)))
            out = out.to(device="cpu", dtype=torch.float64)
            if out.ndim != 2 or out.shape[0] != rows:
                raise ValueError(
                    f"{who} must return one output row per input row: shape ({rows}, d_out), got {tuple(out.shape)}"
                )
            chunks.append(out)
        return torch.cat(chunks)

    def _tiled(self, x: torch.Tensor, count: int, stream: int) -> torch.Tensor:
        tiling, d = self._tiling, x.numel()
        padded = -(-d // tiling.block) * tiling.block
        copies = max(1, _MAX_COORDINATES // padded)
        if tiling.max_copies is not None:
            copies = min(copies, tiling.max_copies)
        row = torch.zeros(padded, dtype=torch.float64)
        row[:d] = x
        chunks = []
        for chunk, start in enumerate(range(0, count, copies)):
            b = min(copies, count - start)
            mechanism = self.mechanism if tiling.for_copies is None else tiling.for_copies(b)
            out = mechanism(row.repeat(b), mechanisms.derive_seed(self.seed, stream, chunk))
            chunks.append(out.to(torch.float64).view(b, padded)[:, :d])
        return torch.cat(chunks)


def bulk_sampler(mechanism: str | Mechanism | BatchedMechanism, *, seed: int = 0) -> BulkSampler:
    """The fastest faithful ``BulkSampler`` for ``mechanism`` (a registered name, a ``Mechanism`` or a
    batched callable); see the module docstring for the paths."""
    return BulkSampler(resolve_mechanism(mechanism, seed=seed), seed=seed)
