"""The informed adversary's identification attack: which of M known candidates did the client hold?

Reconstruction robustness (Balle, Cherubin & Hayes, S&P 2022) measures reconstruction by an adversary who knows
everything but the target: here, the target example is one of M candidates (the target and M - 1 other real
examples, uniform prior), the adversary computes the update each candidate would produce at the same model (the
rows of ``pool``), observes the mechanism's output for the target's update (``decode(encode(u_target))``: the
server's view) and picks the most likely candidate:

* ``"likelihood"``: the candidate x maximising ln p(y | x) where the mechanism declares its output density
  (``output_log_density``): the Bayes-optimal pick under a uniform prior when the density is right;
* ``"nearest"``: otherwise the candidate nearest to y in l2 after the mechanism's own clipping (``clip`` in its
  ``clip_norm``), the maximum-likelihood pick for isotropic noise around the clipped update.

Ties are broken uniformly at random (a deterministic tie-break would credit a useless output to the candidate
listed first). The success rate over ``trials`` independent trials gets a Clopper-Pearson interval; a DP claim
bounds it (``auditkit.accounting.rero``), and :meth:`IdentificationResult.p_value` tests "success <= bound".

Each trial draws the target and the M - 1 others from the pool; for several M the smaller candidate sets are
prefixes of the largest (one mechanism call per trial serves every M, each M's trials stay independent).

A pool of large updates (200 x 11.2M parameters for ResNet-18: 9 GB in float32) need not be held: ``pool`` may be
:class:`CandidateUpdates`, handed out block by block; the trials run in groups and each group streams the blocks
once (:func:`score_candidates`). This is the exact statistic, not a sketch: a data-independent projection to k
coordinates keeps k / P of what separates two candidates while the noise keeps its norm (docs/guide/scale.md).
"""
from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
from scipy import stats

from auditkit.mechanisms import Mechanism, capability
from auditkit.mechanisms.densities import nearest_density, pair_log_densities
from auditkit.mechanisms.randomness import derive_seed

__all__ = ["CandidateUpdates", "HeldUpdates", "IdentificationResult", "SCORING_BYTES", "STATISTICS", "SpilledUpdates",
           "candidate_updates", "identify", "mechanism_outputs", "output_scorer", "score_candidates"]

STATISTICS = ("likelihood", "nearest")  # the score the adversary ranks candidates by


@dataclass(frozen=True)
class IdentificationResult:
    """How often the adversary picked the target among ``candidates`` (M) candidates in ``trials`` trials."""

    candidates: int
    trials: int
    successes: int
    statistic: str
    confidence: float

    @property
    def kappa(self) -> float:
        """The prior's own success, 1 / M: what guessing achieves."""
        return 1.0 / self.candidates

    @property
    def rate(self) -> float:
        return self.successes / self.trials

    @property
    def interval(self) -> tuple[float, float]:
        """The two-sided Clopper-Pearson interval of the success rate at ``confidence``."""
        return clopper_pearson(self.successes, self.trials, self.confidence)

    def lower(self, confidence: float) -> float:
        """The one-sided Clopper-Pearson lower limit of the success rate at ``confidence``."""
        if self.successes == 0:
            return 0.0
        return float(stats.beta.ppf(1 - confidence, self.successes, self.trials - self.successes + 1))

    def p_value(self, bound: float) -> float:
        """P[Binomial(trials, bound) >= successes]: the p-value of "the success probability is <= bound"."""
        if bound >= 1:
            return 1.0
        return float(stats.binom.sf(self.successes - 1, self.trials, bound))

    def exceeds(self, bound: float, confidence: float) -> bool:
        """Whether the success rate's lower limit at ``confidence`` is above ``bound`` (the claim is refuted)."""
        return self.lower(confidence) > bound

    def can_exceed(self, bound: float, confidence: float) -> bool:
        """Whether these trials could refute ``bound`` at all: a perfect record's lower limit is above it."""
        return (1 - confidence) ** (1 / self.trials) > bound


def clopper_pearson(successes: int, trials: int, confidence: float) -> tuple[float, float]:
    """The exact two-sided binomial interval (Clopper & Pearson 1934) at ``confidence``."""
    alpha = 1 - confidence
    low = 0.0 if successes == 0 else stats.beta.ppf(alpha / 2, successes, trials - successes + 1)
    high = 1.0 if successes == trials else stats.beta.ppf(1 - alpha / 2, successes + 1, trials - successes)
    return float(low), float(high)


SCORING_BYTES = 1 << 30  # what ``identify`` holds of the outputs scored at once, unless told (float64)


@runtime_checkable
class CandidateUpdates(Protocol):
    """The pool, row i the update the client sends if it holds candidate i, computed block by block so that a
    pool of large updates is never held at once. ``blocks()`` yields (start, rows[start:stop]) covering every row
    once, always in the same blocks (a recomputed row is then the same bits each time); ``rows(indices)`` gives
    the rows named (computed within their blocks)."""

    dimension: int

    def __len__(self) -> int: ...

    def blocks(self) -> Iterator[tuple[int, torch.Tensor]]: ...

    def rows(self, indices: np.ndarray) -> torch.Tensor: ...


@dataclass(frozen=True)
class HeldUpdates:
    """A pool held in memory (P x d), handed out ``block`` rows at a time (default: all), so that what scoring
    converts to float64 is one block."""

    updates: torch.Tensor
    block: int | None = None

    @property
    def dimension(self) -> int:
        return int(self.updates.shape[1])

    def __len__(self) -> int:
        return len(self.updates)

    def blocks(self) -> Iterator[tuple[int, torch.Tensor]]:
        step = self.block or len(self.updates)
        for start in range(0, len(self.updates), step):
            yield start, self.updates[start:start + step]

    def rows(self, indices: np.ndarray) -> torch.Tensor:
        return self.updates[torch.as_tensor(np.asarray(indices, dtype=np.int64))]


class SpilledUpdates:
    """A pool written once to an unnamed temporary file in ``folder`` (default: ``tempfile.gettempdir()``, i.e.
    ``TMPDIR``; the file has no name and is gone when this is collected or the process ends) and read back a block
    at a time, in ``source``'s blocks and bits: memory one block, at the cost of reading the file once per group of
    trials instead of recomputing the pool."""

    def __init__(self, source: CandidateUpdates, folder: str | None = None) -> None:
        self.dimension = source.dimension
        self._file = tempfile.TemporaryFile(dir=folder)
        self._blocks: list[tuple[int, int]] = []
        self.dtype: torch.dtype | None = None
        for start, rows in source.blocks():
            self.dtype = rows.dtype
            self._file.write(rows.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
            self._blocks.append((start, len(rows)))
        self._file.flush()
        self._row_bytes = self.dimension * torch.empty((), dtype=self.dtype).element_size()

    def __len__(self) -> int:
        return sum(count for _, count in self._blocks)

    def _read(self, start: int, count: int) -> torch.Tensor:
        out = torch.empty(count, self.dimension, dtype=self.dtype)
        self._file.seek(start * self._row_bytes)
        self._file.readinto(memoryview(out.view(torch.uint8).numpy()))
        return out

    def blocks(self) -> Iterator[tuple[int, torch.Tensor]]:
        for start, count in self._blocks:
            yield start, self._read(start, count)

    def rows(self, indices: np.ndarray) -> torch.Tensor:
        indices = np.asarray(indices, dtype=np.int64)
        out = torch.empty(len(indices), self.dimension, dtype=self.dtype)
        for i, row in enumerate(indices):
            out[i] = self._read(int(row), 1)[0]
        return out


def candidate_updates(pool: torch.Tensor | CandidateUpdates) -> CandidateUpdates:
    """``pool`` as :class:`CandidateUpdates`: a P x d tensor is held (``HeldUpdates``)."""
    if isinstance(pool, torch.Tensor):
        if pool.dim() != 2:
            raise ValueError(f"pool must be a P x d matrix of updates, got shape {tuple(pool.shape)}")
        return HeldUpdates(pool.detach().cpu())
    return pool


def output_scorer(mechanism: Mechanism) -> tuple[str, Any]:
    """The statistic's name and the density candidates are scored by (module docstring): the mechanism's declared
    ``output_log_density``, else ``nearest_density`` (ln p = -||y - clip(x)||^2)."""
    log_density = capability(mechanism, "output_log_density")
    if log_density is None:
        return "nearest", nearest_density(mechanism)
    return "likelihood", log_density


def score_candidates(log_density: Any, ys: np.ndarray, pool: CandidateUpdates, drawn: np.ndarray) -> np.ndarray:
    """ln p(ys[t] | pool[drawn[t, j]]) for every t and j, shape drawn.shape: the pool's blocks streamed once, each
    scored against the outputs paired with its rows (``pair_log_densities``: one matrix product for a Gaussian
    density, a compiled loop for JoPEQ's, one call per candidate for a plugin's own). Memory: the outputs, one
    block, and the density's work on them, never the whole pool."""
    table = np.full(drawn.shape, np.nan, dtype=np.float64)
    for start, block in pool.blocks():
        inside = (drawn >= start) & (drawn < start + len(block))
        if not inside.any():
            continue
        rows, columns = np.nonzero(inside)
        table[rows, columns] = pair_log_densities(log_density, ys, block.detach().cpu().double().numpy(),
                                                  rows, drawn[rows, columns] - start)
    if np.isnan(table).any():
        raise ValueError("the pool's blocks left candidates unscored: blocks() must cover every row once")
    return table


def mechanism_outputs(mechanism: Mechanism, updates: torch.Tensor, trials: Sequence[int], seed: int) -> np.ndarray:
    """decode(from_bytes(to_bytes(encode(u)))) of each row of ``updates`` (float64), trial t's shared randomness
    keyed by (``seed``, t): the server's view of the target's update."""
    outputs = np.empty((len(trials), updates.shape[1]), dtype=np.float64)
    for i, (row, t) in enumerate(zip(updates.float(), trials, strict=True)):
        shared = derive_seed(seed, "identification-trial", int(t))
        message = mechanism.encode(row, shared)
        outputs[i] = mechanism.decode(type(message).from_bytes(message.to_bytes()), shared).double().numpy()
    return outputs


def identify(
    mechanism: Mechanism,
    pool: torch.Tensor | CandidateUpdates,
    *,
    candidates: int | Sequence[int] = (10, 100),
    trials: int = 500,
    confidence: float = 0.95,
    seed: int = 0,
    memory_bytes: int = SCORING_BYTES,
) -> list[IdentificationResult]:
    """The identification attack of the module docstring on ``mechanism``, one result per M in ``candidates``.

    ``pool``: P x d, row i the update the client sends if it holds candidate example i (P >= max M), a tensor or
    :class:`CandidateUpdates` computed block by block. Trial t draws max M distinct rows uniformly; the first is
    the target, so it is uniform within every prefix of M rows (the candidate set for that M). The target's update
    goes through the mechanism once (encode -> bytes -> decode, shared randomness keyed by ``seed`` and t) and that
    output is scored against each prefix. ``confidence`` is that of the reported intervals. The trials run in
    groups whose outputs (float64) and targets (float32) fit ``memory_bytes``; each group streams the pool's blocks once
    (``score_candidates``), so memory is O(group x d + block x d), never P x d.
    """
    sizes = [candidates] if isinstance(candidates, int) else list(candidates)
    if not sizes or any(isinstance(m, bool) or not isinstance(m, int) or m < 2 for m in sizes):
        raise ValueError(f"candidates must be integers >= 2, got {candidates!r}")
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ValueError(f"trials must be an integer >= 1, got {trials!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    source = candidate_updates(pool)
    if len(source) < max(sizes):
        raise ValueError(f"candidates must be at most the {len(source)} rows of pool, got {max(sizes)}")
    statistic, log_density = output_scorer(mechanism)
    rng = np.random.default_rng(derive_seed(seed, "identification"))
    largest = max(sizes)
    drawn = np.stack([rng.choice(len(source), size=largest, replace=False) for _ in range(trials)])  # [:, 0]: target
    table = np.empty(drawn.shape, dtype=np.float64)
    group = max(1, memory_bytes // (12 * source.dimension))  # outputs float64, their targets float32
    for start in range(0, trials, group):
        stop = min(start + group, trials)
        targets = source.rows(drawn[start:stop, 0])
        ys = mechanism_outputs(mechanism, targets, range(start, stop), seed)
        del targets
        table[start:stop] = score_candidates(log_density, ys, source, drawn[start:stop])
        del ys  # the next group's outputs take its place, not a place beside it (twice the memory given)
    wins = dict.fromkeys(sizes, 0)
    for s in table:
        for m in sizes:
            best = np.flatnonzero(s[:m] == s[:m].max())
            wins[m] += int(rng.choice(best) == 0)
    return [IdentificationResult(m, trials, wins[m], statistic, confidence) for m in sizes]
