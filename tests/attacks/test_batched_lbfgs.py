"""BatchedLBFGS: each row follows torch.optim.LBFGS on its own problem (float64, to rounding)."""
import functools

import pytest
import torch

from auditkit.attacks.batched_lbfgs import BatchedLBFGS

PROBLEMS, DIM = 5, 8


def _problems():
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(PROBLEMS, DIM, DIM, generator=generator, dtype=torch.float64)
    a = a @ a.transpose(1, 2) / DIM + 0.1 * torch.eye(DIM, dtype=torch.float64)
    b = torch.randn(PROBLEMS, DIM, generator=generator, dtype=torch.float64)
    x0 = torch.randn(PROBLEMS, DIM, generator=generator, dtype=torch.float64)

    def objective(x, i):  # smooth, non-quadratic, different per problem
        return 0.5 * x @ a[i] @ x - b[i] @ x + 0.05 * (x**4).sum() + 0.1 * torch.sin(3 * x).sum()

    return objective, x0


@pytest.mark.parametrize(
    ("history_size", "max_iter", "lr"),
    [(3, 7, 0.5), (100, 20, 1.0), (4, 2, 0.3)],  # ring-buffer wrap-around; torch defaults; max_eval < max_iter + 1
)
@pytest.mark.parametrize("sync_every", [1, 3])  # 3: the GPU's way, liveness asked only every third iteration
def test_rows_follow_torch_lbfgs_including_rows_that_stop(history_size, max_iter, lr, sync_every):
    objective, x0 = _problems()
    stop_after = {1: 3, 3: 5}  # these problems are not stepped any more after that many steps
    steps = 8

    def closure(x, rows):
        x = x.clone().requires_grad_(True)
        values = torch.stack([objective(x[k], int(row)) for k, row in enumerate(rows)])
        (grad,) = torch.autograd.grad(values.sum(), x)
        return values.detach(), grad, values.detach() * 2

    batched = BatchedLBFGS(x0.clone(), max_iter=max_iter, history_size=history_size, sync_every=sync_every)
    for step in range(steps):
        rows = torch.tensor([i for i in range(PROBLEMS) if step < stop_after.get(i, steps)])
        loss, extra = batched.step(functools.partial(closure, rows=rows), rows, lr)
        torch.testing.assert_close(extra, 2 * loss)

    for i in range(PROBLEMS):
        x = x0[i].clone().requires_grad_(True)
        reference = torch.optim.LBFGS([x], lr=lr, max_iter=max_iter, history_size=history_size)

        def reference_closure(x=x, i=i, reference=reference):
            reference.zero_grad()
            value = objective(x, i)
            value.backward()
            return value

        for _ in range(stop_after.get(i, steps)):
            reference.step(reference_closure)
        torch.testing.assert_close(batched.x[i], x.detach(), rtol=0, atol=1e-12)


def test_first_step_returns_the_objective_before_moving():
    objective, x0 = _problems()
    rows = torch.arange(PROBLEMS)

    def closure(x):
        x = x.clone().requires_grad_(True)
        values = torch.stack([objective(x[k], k) for k in range(PROBLEMS)])
        return values.detach(), torch.autograd.grad(values.sum(), x)[0]

    (first,) = BatchedLBFGS(x0.clone()).step(closure, rows, 1.0)
    torch.testing.assert_close(first, torch.stack([objective(x0[k], k) for k in range(PROBLEMS)]))


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="x must be a 2-D tensor"):
        BatchedLBFGS(torch.zeros(3))
    with pytest.raises(ValueError, match="history_size must be >= 1"):
        BatchedLBFGS(torch.zeros(2, 3), history_size=0)
    optimiser = BatchedLBFGS(torch.zeros(3, 2, dtype=torch.float64))
    zero = lambda x: (x.sum(dim=1), torch.ones_like(x))
    optimiser.step(zero, torch.tensor([0, 2]), 1.0)
    with pytest.raises(ValueError, match="rows must be a subset of the rows stepped before"):
        optimiser.step(zero, torch.tensor([1]), 1.0)


@pytest.mark.parametrize("sync_every", [None, 3], ids=["default-sync", "sync-3"])
def test_rows_follow_torch_lbfgs_on_device(device, sync_every):
    """On the device (float64; the default ``sync_every`` is 4 on a GPU and 1 on the CPU), every row follows
    torch.optim.LBFGS run on the CPU on its own problem, to 1e-10, rows that stop early included."""
    objective, x0 = _problems()
    generator = torch.Generator().manual_seed(0)  # the same problems as ``_problems``, on the device
    a = torch.randn(PROBLEMS, DIM, DIM, generator=generator, dtype=torch.float64)
    a = (a @ a.transpose(1, 2) / DIM + 0.1 * torch.eye(DIM, dtype=torch.float64)).to(device)
    b = torch.randn(PROBLEMS, DIM, generator=generator, dtype=torch.float64).to(device)
    stop_after, steps, lr = {1: 3, 3: 5}, 8, 1.0

    def closure(x, rows):
        x = x.clone().requires_grad_(True)
        values = (0.5 * torch.einsum("md,mde,me->m", x, a[rows], x) - (b[rows] * x).sum(1)
                  + 0.05 * (x**4).sum(1) + 0.1 * torch.sin(3 * x).sum(1))
        (grad,) = torch.autograd.grad(values.sum(), x)
        return values.detach(), grad

    batched = BatchedLBFGS(x0.clone().to(device), max_iter=7, history_size=3, sync_every=sync_every)
    assert batched.sync_every == (sync_every or (4 if device.type == "cuda" else 1))
    for step in range(steps):
        rows = torch.tensor([i for i in range(PROBLEMS) if step < stop_after.get(i, steps)], device=device)
        (loss,) = batched.step(functools.partial(closure, rows=rows), rows, lr)
        assert loss.device.type == device.type
    assert batched.x.device.type == device.type

    for i in range(PROBLEMS):
        x = x0[i].clone().requires_grad_(True)
        reference = torch.optim.LBFGS([x], lr=lr, max_iter=7, history_size=3)

        def reference_closure(x=x, i=i, reference=reference):
            reference.zero_grad()
            value = objective(x, i)
            value.backward()
            return value

        for _ in range(stop_after.get(i, steps)):
            reference.step(reference_closure)
        assert (x.detach() - x0[i]).abs().max() > 0.1  # the reference moved: the agreement is not at the start
        torch.testing.assert_close(batched.x[i].cpu(), x.detach(), rtol=0, atol=1e-10)
