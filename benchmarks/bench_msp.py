"""Benchmark: model splitting (paper 004) -- consensus accuracy, the hidden-m bias, and the server's reconstruction.

Models are trained-model-like: the global model is an architecture's initial weights (``--model``, default
``cifar_cnn``, P = 169,578) and client i holds w_i = global + d + n_i, a shared drift d and a client part n_i with
iid Gaussian coordinates, each update 5% of the global model's norm. M = 20 clients (``--clients``).

(a) the sum invariant (5): max_k ||sum_i (alpha_i[k] + S_i[k]) - sum_i (1 + m_i) w_i||_inf relative to
    ||sum_i (1 + m_i) w_i||_inf, iterating ``consensus_step`` on the float32 uploads of msp and on noisy uploads
    (mspdq-like), m_max = 4;
(b) m_i = 1: ||w[K] - FedAvg mean|| / ||FedAvg mean|| vs K_t in {1, 2, 4, 8, 16, 32} (and relative to the mean
    update, with the predicted factor prod_k (1 - 2 gamma/(k+1)) of the split error left), msp and mspdq (B = 8);
(c) heterogeneous m_i (m_max = 2, 4, default gamma): the (1 + m_i)-weighted limit's bias and the aggregate's error;
(d) the adaptive server attack (``auditkit.attacks.targeted.msp_reconstruction``): relative error ||w_hat - w|| / ||w|| (median and max
    over clients) and the rate of exactly recovered m_i (the raw estimate within 0.1 of the true m_i) vs
    K_t = 1..10 and m_max = 1, 2, 4 for msp (K_t = 1: the split-support scale bound, no m), then vs B in
    {4, 6, 7, 8, 12, 16} for mspdq (K_t = 10, the paper's setting; knot start), with the default support = 1
    (pi = 16) and with the tight public range support = max |w| rounded up to 0.05.

    python benchmarks/bench_msp.py [--model cifar_cnn] [--clients 20] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import time

import torch

from auditkit import mechanisms
import auditkit.mechanisms.msp  # noqa: F401  (registers msp, msp-laplace, mspdq)
from auditkit.attacks.targeted.msp_reconstruction import reconstruct_from_split_support, reconstruct_msp
from auditkit.fl.params import flat_parameters
from auditkit.models import create_model
from auditkit.mechanisms.msp import consensus_limit, consensus_step
from auditkit.mechanisms.randomness import derive_seed, private_generator


def trained_like_models(model: str, clients: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(global (P,), models (M, P)) in float64: initial weights plus drift + client updates of 5% norm."""
    torch.manual_seed(seed)
    base = flat_parameters(create_model(model)).to(torch.float64)
    g = torch.Generator().manual_seed(seed)
    sigma = 0.05 * base.norm().item() / math.sqrt(2 * base.numel())
    drift = sigma * torch.randn(base.numel(), generator=g, dtype=torch.float64)
    own = sigma * torch.randn(clients, base.numel(), generator=g, dtype=torch.float64)
    return base, base + drift + own


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).norm() / b.norm()).item()


def _run(name: str, models: torch.Tensor, seed: int, **params) -> mechanisms.msp.MSPTranscript:
    return mechanisms.create(name, private_seed=seed, **params).run_consensus(models, seed)


def invariant(models: torch.Tensor, seed: int) -> None:
    print("\n(a) sum invariant (5), m_max = 4, K_t = 32: max relative error over k")
    mechanism = mechanisms.create("msp", private_seed=seed, m_max=4, consensus_rounds=32)
    keys = [derive_seed(seed, "client", i) for i in range(models.shape[0])]
    m = torch.tensor([mechanism.draw_m(key) for key in keys])
    g = torch.Generator().manual_seed(seed)
    for label, send in (
        ("float32 uploads (msp)", lambda a: a.float().double()),
        ("uploads + N(0, 0.01^2) (mspdq-like)", lambda a: a + 0.01 * torch.randn(a.shape, generator=g, dtype=a.dtype)),
    ):
        alpha = torch.stack([mechanism.split(w, int(mi), private_generator(seed, key, "split"))[0]
                             for w, mi, key in zip(models, m, keys)])
        invisible = (1 + m[:, None]) * models - alpha
        total = ((1 + m[:, None]) * models).sum(0)
        worst = 0.0
        for k in range(32):
            sent = send(alpha)
            alpha, invisible = consensus_step(alpha, invisible, sent, m, sent.mean(0), mechanism.gamma / (k + 1), 0.5)
            worst = max(worst, (((alpha + invisible).sum(0) - total).abs().max() / total.abs().max()).item())
        print(f"  {label:<38} m = {sorted(m.tolist())}: {worst:.2e}")


def fedavg_gap(base: torch.Tensor, models: torch.Tensor, seed: int) -> None:
    print("\n(b) m_i = 1: aggregate w[K] vs FedAvg's mean (gamma = 0.3, eps_c = 0.5, eps_s = 0.5)")
    fedavg = models.mean(0)
    print(f"  {'mechanism':<12} {'K_t':>4} {'/|mean w|':>10} {'/|mean upd|':>11} {'predicted':>10} {'uploads':>8} "
          f"{'bits/coord':>10}")
    for name, params in (("msp", {}), ("mspdq", {"bits": 8})):
        for rounds in (1, 2, 4, 8, 16, 32):
            transcript = _run(name, models, seed, consensus_rounds=rounds, **params)
            first = transcript.alpha[0].mean(0)
            decay = math.prod(1 - 0.6 / (k + 1) for k in range(rounds))  # prod_k (1 - 2 gamma/(k+1)), m_i = 1
            predicted = decay * (first - fedavg).norm().item() / (fedavg - base).norm().item()
            print(f"  {name:<12} {rounds:>4} {_rel(transcript.aggregate, fedavg):>10.2e} "
                  f"{(transcript.aggregate - fedavg).norm().item() / (fedavg - base).norm().item():>11.3g} "
                  f"{predicted if name == 'msp' else float('nan'):>10.3g} {transcript.uploads:>8} "
                  f"{transcript.bits[0] / models.shape[1]:>10.2f}")


def hidden_m_bias(base: torch.Tensor, models: torch.Tensor, seed: int) -> None:
    print("\n(c) heterogeneous hidden m_i: the (1 + m_i)-weighted limit vs FedAvg's mean")
    fedavg = models.mean(0)
    update = (fedavg - base).norm().item()
    print(f"  {'m_max':>5} {'gamma':>6} {'mean m':>6} {'bias/|mean w|':>13} {'bias/|mean upd|':>15} "
          f"{'K=10 err/upd':>12} {'K=32 err/upd':>12}")
    for m_max in (2, 4):
        errors, transcript = [], None
        for rounds in (10, 32):
            transcript = _run("msp", models, seed, m_max=m_max, consensus_rounds=rounds)
            errors.append((transcript.aggregate - fedavg).norm().item() / update)
        m = transcript.hidden.m
        limit = consensus_limit(models, m)
        print(f"  {m_max:>5} {transcript.hidden.gamma:>6.3f} {m.double().mean().item():>6.2f} "
              f"{_rel(limit, fedavg):>13.2e} {(limit - fedavg).norm().item() / update:>15.3g} "
              f"{errors[0]:>12.3g} {errors[1]:>12.3g}")


def reconstruction(models: torch.Tensor, seed: int) -> None:
    print("\n(d) the server's reconstruction: ||w_hat - w||/||w|| (median, max over clients), m_i recovered exactly")
    print(f"  {'mechanism':<10} {'m_max':>5} {'K_t':>4} {'B':>3} {'median':>9} {'max':>9} {'m exact':>8} "
          f"{'gamma_hat':>9} {'overloads':>9} {'s':>5}")
    truth_norm = models.norm(dim=1)

    def row(name, m_max, rounds, bits, transcript, w_hat, result, seconds):
        errors = (w_hat - models).norm(dim=1) / truth_norm
        exact, gamma = "-", "-"
        if result is not None:
            found = result.rounded & (result.m_hat == transcript.hidden.m)
            exact, gamma = f"{found.double().mean():.2f}", f"{result.gamma_hat.median():.4f}"
        print(f"  {name:<10} {m_max:>5} {rounds:>4} {bits:>3} {errors.median():>9.2e} {errors.max():>9.2e} "
              f"{exact:>8} {gamma:>9} {transcript.overloads:>9} {seconds:>5.1f}")

    for m_max in (1, 2, 4):
        for rounds in range(1, 11):
            start = time.perf_counter()
            transcript = _run("msp", models, seed, m_max=m_max, consensus_rounds=rounds)
            if rounds == 1:
                w_hat, result = reconstruct_from_split_support(transcript, 0.5, 1.5), None
            else:
                result = reconstruct_msp(transcript)
                w_hat = result.w_hat
            row("msp", m_max, rounds, "-", transcript, w_hat, result, time.perf_counter() - start)
    tight = math.ceil(models.abs().max().item() / 0.05) * 0.05
    for support in (1.0, tight):
        print(f"  mspdq, support = {support:g}: pi = {8 * 2 * support:g}")
        for bits in (4, 6, 7, 8, 12, 16):
            start = time.perf_counter()
            transcript = _run("mspdq", models, seed, bits=bits, consensus_rounds=10, support=support)
            result = reconstruct_msp(transcript)
            row("mspdq", 1, 10, bits, transcript, result.w_hat, result, time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="cifar_cnn")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    base, models = trained_like_models(args.model, args.clients, args.seed)
    print(f"model {args.model}: P = {models.shape[1]}, M = {models.shape[0]}, ||update||/||global|| = "
          f"{((models - base).norm(dim=1) / base.norm()).mean().item():.3f}")
    start = time.perf_counter()
    invariant(models, args.seed)
    fedavg_gap(base, models, args.seed)
    hidden_m_bias(base, models, args.seed)
    reconstruction(models, args.seed)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
