"""L-BFGS for many independent problems at once, following ``torch.optim.LBFGS`` step for step.

One ``torch.optim.LBFGS`` over all dummy images would mix the problems' curvature pairs, step sizes and stopping
tests, so every piece of state here is per row and torch's rules (``line_search_fn=None``) are applied row by row.
The direction is torch's two-loop recursion (Nocedal & Wright, 2nd ed., Algorithm 7.4) rewritten to read the
D-dimensional history twice per iteration, as batched matrix products: pairs indexed by age (0 = oldest), G = -g,
SY[i, k] = <s_i, y_k>, YY[i, k] = <y_i, y_k>, the coefficients solve two triangular systems

    alpha_i = rho_i (<s_i, G> - sum_{k > i} SY[i, k] alpha_k)                       (newest to oldest)
    beta_i  = rho_i (H_diag (<y_i, G> - sum_k YY[i, k] alpha_k) + sum_{k < i} SY[k, i] (alpha_k - beta_k))
    d       = H_diag (G - sum_k alpha_k y_k) + sum_k (alpha_k - beta_k) s_k,

the two loops' values in a different summation order; the Gram matrices are updated incrementally. Each row follows
torch's iterates for its problem alone up to rounding (tested in float64). The per-row state, step rule and stopping
tests: docs/methodology/inversion.md (#batched-lbfgs).
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

# Closure: rows of x (m x D) -> (objective m, gradient m x D, *anything else, handed back by ``step``).
Closure = Callable[[Tensor], tuple[Tensor, ...]]

_CURVATURE_MIN = 1e-10  # torch.optim.LBFGS stores a pair only when <y, s> exceeds this


class BatchedLBFGS:
    """Independent L-BFGS runs on the rows of ``x`` (M problems x D variables), updated in place.

    Parameters mirror ``torch.optim.LBFGS``; ``lr`` is given per :meth:`step`, so schedules can change it.
    Memory: 2 * history_size * D values of history per problem, plus two history_size^2 Gram matrices.
    """

    def __init__(
        self,
        x: Tensor,
        *,
        max_iter: int = 20,
        history_size: int = 100,
        tolerance_grad: float = 1e-7,
        tolerance_change: float = 1e-9,
        sync_every: int | None = None,
    ) -> None:
        if x.dim() != 2:
            raise ValueError(f"x must be a 2-D tensor (problems x variables), got shape {tuple(x.shape)}")
        if max_iter < 1:
            raise ValueError(f"max_iter must be >= 1, got {max_iter}")
        if history_size < 1:
            raise ValueError(f"history_size must be >= 1, got {history_size}")
        if sync_every is not None and sync_every < 1:
            raise ValueError(f"sync_every must be >= 1, got {sync_every}")
        self.x = x
        # Asking whether any row is still live stops the host until the device catches up. On a GPU the inner
        # loop checks only every few iterations (stopped rows stay frozen in between, so the iterates are the
        # same); on the CPU every iteration, where an evaluation saved is worth more than a wait.
        self.sync_every = sync_every if sync_every is not None else (4 if x.is_cuda else 1)
        self._width = 0  # an upper bound of _count.max() known on the host: pairs stored so far, at most
        self.max_iter = max_iter
        self.max_eval = max_iter * 5 // 4
        self.history_size = history_size
        self.tolerance_grad = tolerance_grad
        self.tolerance_change = tolerance_change
        rows, dim = x.shape
        like = dict(device=x.device, dtype=x.dtype)
        self._rows = torch.arange(rows, device=x.device)  # the problems whose state is held, in order
        self._n_iter = torch.zeros(rows, dtype=torch.long, device=x.device)
        self._d = torch.zeros(rows, dim, **like)
        self._t = torch.zeros(rows, **like)
        self._prev_grad = torch.zeros(rows, dim, **like)
        self._prev_loss = torch.zeros(rows, dtype=torch.float64, device=x.device)
        self._h_diag = torch.ones(rows, **like)
        # Ring buffer of pairs: _pairs[row, slot] = (s, y); the next pair goes to slot _head (the oldest once
        # full). rho and the Gram matrices SY, YY are kept in age order instead (index -1 = newest), with
        # zeros where a row has fewer pairs than history_size.
        self._pairs = torch.zeros(rows, history_size, 2, dim, **like)
        self._rho = torch.zeros(rows, history_size, **like)
        self._sy = torch.zeros(rows, history_size, history_size, **like)
        self._yy = torch.zeros(rows, history_size, history_size, **like)
        self._head = torch.zeros(rows, dtype=torch.long, device=x.device)
        self._count = torch.zeros(rows, dtype=torch.long, device=x.device)
        self._eye = torch.eye(history_size, **like)
        self._strictly_upper = torch.ones_like(self._eye).triu(diagonal=1)
        self._strictly_lower = torch.ones_like(self._eye).tril(diagonal=-1)

    def step(self, closure: Closure, rows: Tensor, lr: float) -> tuple[Tensor, ...]:
        """One ``torch.optim.LBFGS.step`` for each problem in ``rows`` (increasing indices; a subset of the
        previous call's rows, as problems only ever stop).

        ``closure`` receives the current values of those rows (m x D) and returns at least (objective m,
        gradient m x D). Returns the outputs of the step's first evaluation without the gradient:
        (objective, *extras), as ``torch.optim.LBFGS.step`` returns ``orig_loss``.
        """
        self._keep(rows)
        x = self.x[rows]
        n_iter, d, t, prev_grad, prev_loss = self._n_iter, self._d, self._t, self._prev_grad, self._prev_loss

        first_eval = closure(x)
        loss, grad = first_eval[0].detach(), first_eval[1].detach()
        loss64 = loss.double()
        evals = torch.ones_like(n_iter)
        live = grad.abs().amax(dim=1) > self.tolerance_grad
        inner = 0
        while inner < self.max_iter and (inner % self.sync_every or bool(live.any())):
            inner += 1
            n_iter = n_iter + live.long()
            later = live & (n_iter > 1)
            checked = self.sync_every == 1
            direction = self._direction(grad, prev_grad, d, t, later) if not checked or bool(later.any()) else d
            d = torch.where((live & (n_iter == 1))[:, None], -grad, torch.where(later[:, None], direction, d))
            prev_grad = torch.where(live[:, None], grad, prev_grad)
            prev_loss = torch.where(live, loss64, prev_loss)
            first_t = torch.clamp(1.0 / grad.abs().sum(dim=1), max=1.0) * lr
            t = torch.where(live, torch.where(n_iter == 1, first_t, torch.full_like(t, lr)), t)
            live = live & ~((grad * d).sum(dim=1) > -self.tolerance_change)
            x = x + torch.where(live[:, None], t[:, None] * d, torch.zeros_like(d))
            if inner == self.max_iter:
                break
            evaluation = closure(x)
            loss = torch.where(live, evaluation[0].detach(), loss)
            loss64 = torch.where(live, loss.double(), loss64)
            grad = torch.where(live[:, None], evaluation[1].detach(), grad)
            evals = evals + live.long()
            live = live & (evals < self.max_eval)
            live = live & (grad.abs().amax(dim=1) > self.tolerance_grad)
            live = live & ((t[:, None] * d).abs().amax(dim=1) > self.tolerance_change)
            live = live & ((loss64 - prev_loss).abs() >= self.tolerance_change)

        self.x[rows] = x
        self._n_iter, self._d, self._t, self._prev_grad, self._prev_loss = n_iter, d, t, prev_grad, prev_loss
        return (first_eval[0], *first_eval[2:])

    def _keep(self, rows: Tensor) -> None:
        """Drop the state of problems that are no longer stepped (they never come back)."""
        if rows.shape == self._rows.shape and bool((rows == self._rows).all()):
            return
        positions = torch.searchsorted(self._rows, rows)
        known = positions < len(self._rows)
        if not bool(known.all()) or not bool((self._rows[positions] == rows).all()):
            raise ValueError("rows must be a subset of the rows stepped before (problems only ever stop)")
        for name in ("_n_iter", "_d", "_t", "_prev_grad", "_prev_loss", "_h_diag", "_pairs", "_rho", "_sy",
                     "_yy", "_head", "_count"):
            setattr(self, name, getattr(self, name)[positions])
        self._rows = rows.clone()

    def _direction(self, grad: Tensor, prev_grad: Tensor, d: Tensor, t: Tensor, update: Tensor) -> Tensor:
        """Store the newest curvature pair of the ``update`` rows, then return d = -H g for every row
        (the caller keeps it only for the ``update`` rows)."""
        size = self.history_size
        y = grad - prev_grad
        s = d * t[:, None]
        ys = (y * s).sum(dim=1)
        stored = update & (ys > _CURVATURE_MIN)
        # Masked writes instead of indexing the stored rows: no host sync, rows not stored keep their state.
        every = torch.arange(len(grad), device=grad.device)
        slot = self._head
        fresh = torch.stack([s, y], dim=1)
        self._pairs[every, slot] = torch.where(stored[:, None, None], fresh, self._pairs[every, slot])
        self._head = torch.where(stored, (slot + 1) % size, slot)
        self._count = torch.where(stored, torch.clamp(self._count + 1, max=size), self._count)
        self._h_diag = torch.where(stored, ys / (y * y).sum(dim=1), self._h_diag)
        # Age-ordered arrays move one place towards the old end; the new pair takes the newest place.
        self._rho = torch.where(stored[:, None], torch.cat([self._rho[:, 1:], (1.0 / ys)[:, None]], dim=1), self._rho)
        self._sy = torch.where(stored[:, None, None], _shifted(self._sy), self._sy)
        self._yy = torch.where(stored[:, None, None], _shifted(self._yy), self._yy)
        self._width = min(size, self._width + 1)
        width = int(self._count.max()) if self.sync_every == 1 else self._width
        if width == 0:
            return -grad * self._h_diag[:, None]
        pairs = self._pairs[:, :width].reshape(len(grad), 2 * width, -1)  # slot order: s_0, y_0, s_1, y_1, ...
        # One pass over the history: <g, .> and, for the new pair, <s_new, y_k>, <y_new, s_k>, <y_new, y_k>.
        dots = torch.bmm(torch.stack([grad, s, y], dim=1), pairs.transpose(1, 2))
        slot_of_age, valid = self._slots_by_age(width)
        by_age = dots.reshape(len(grad), 3, width, 2).gather(
            2, slot_of_age[:, None, :, None].expand(-1, 3, -1, 2)
        ) * valid[:, None, :, None]
        keep = stored[:, None]
        self._sy[:, -1, :] = torch.where(keep, by_age[:, 1, :, 1], self._sy[:, -1, :])
        self._sy[:, :, -1] = torch.where(keep, by_age[:, 2, :, 0], self._sy[:, :, -1])
        self._yy[:, -1, :] = torch.where(keep, by_age[:, 2, :, 1], self._yy[:, -1, :])
        self._yy[:, :, -1] = torch.where(keep, by_age[:, 2, :, 1], self._yy[:, :, -1])

        rho, sy, yy, h_diag = self._rho, self._sy, self._yy, self._h_diag[:, None]
        s_g, y_g = -by_age[:, 0, :, 0], -by_age[:, 0, :, 1]  # <s_i, G>, <y_i, G> with G = -g
        upper = sy * self._strictly_upper
        alpha = torch.linalg.solve_triangular(self._eye + rho[:, :, None] * upper, (rho * s_g)[:, :, None], upper=True)
        lower = sy.transpose(1, 2) * self._strictly_lower  # lower[i, k] = <y_i, s_k> for k < i
        rhs = rho[:, :, None] * (h_diag[:, :, None] * (y_g[:, :, None] - yy @ alpha) + lower @ alpha)
        beta = torch.linalg.solve_triangular(self._eye + rho[:, :, None] * lower, rhs, upper=False)
        alpha, beta = alpha.squeeze(2), beta.squeeze(2)
        # d = H_diag (G - sum_k alpha_k y_k) + sum_k (alpha_k - beta_k) s_k, summed over the slots.
        by_slot = torch.stack([alpha - beta, -h_diag * alpha], dim=2) * valid[:, :, None]
        coefficients = torch.zeros(len(grad), width, 2, device=grad.device, dtype=grad.dtype)
        coefficients.scatter_add_(1, slot_of_age[:, :, None].expand(-1, -1, 2), by_slot)
        return -h_diag * grad + torch.bmm(coefficients.reshape(len(grad), 1, 2 * width), pairs).squeeze(1)

    def _slots_by_age(self, width: int) -> tuple[Tensor, Tensor]:
        """For ages 0..history_size-1 (oldest first; a row's count pairs take the newest ages): the slot
        holding each (clamped into [0, width)) and whether it holds a pair at all."""
        size = self.history_size
        count = self._count[:, None]
        age = torch.arange(size, device=count.device)[None, :]
        rank = age - (size - count)  # 0 for the oldest stored pair
        valid = rank >= 0
        slot = (self._head[:, None] - count + rank) % count.clamp(min=1)
        return torch.where(valid, slot, torch.zeros_like(slot)).clamp(max=width - 1), valid.to(self._rho.dtype)


def _shifted(gram: Tensor) -> Tensor:
    """``gram`` (rows x size x size) moved one place towards the old end along both axes; the newest row and
    column are zero until the new pair's inner products fill them."""
    out = torch.zeros_like(gram)
    out[:, :-1, :-1] = gram[:, 1:, 1:]
    return out
