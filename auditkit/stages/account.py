"""The ``account`` stage: a setting's one-round claim and the claim composed over the rounds it ran
(``auditkit.accounting``), as the results' accounting section; with ``[dp_sgd]`` also the example-level claim of
the clients' DP-SGD (``example_level``), beside the client-level one."""
from __future__ import annotations

from typing import Any

from auditkit import mechanisms
from auditkit import results
from auditkit.accounting.dp_sgd import example_level_claim
from auditkit.config import AccountingConfig, AuditConfig, TrainingConfig

__all__ = ["account_rounds", "account_run", "account_stage", "with_example_level"]


def account_rounds(mechanism: mechanisms.Mechanism, rounds: int, accounting: AccountingConfig,
                   training: TrainingConfig | None = None) -> dict[str, Any]:
    """The accounting section of ``rounds`` rounds of ``mechanism``: the client-level claim composed over every
    round at the config's composition delta and accountant, amplified by the ``training`` participation where the
    mechanism's claim covers client sampling (``auditkit.accounting.client_sampling``)."""
    participation = "full" if training is None else training.participation
    sample_rate = None if training is None else training.sample_rate
    return results.accounting_entry(mechanism, rounds, composition_delta=accounting.composition_delta,
                                    accountant=accounting.accountant, participation=participation,
                                    sample_rate=sample_rate)


def with_example_level(entry: dict[str, Any], config: AuditConfig, rounds: int,
                       data: dict[str, Any]) -> dict[str, Any]:
    """``entry`` with, when the clients trained with DP-SGD, the ``example_level`` claim of ``rounds`` rounds of the
    run's ``[dp_sgd]`` on the clients of ``data`` (the run's data summary: its ``client_sizes``;
    ``auditkit.accounting.dp_sgd``), at the config's composition delta and accountant; unchanged otherwise."""
    if not config.dp_sgd.enabled:
        return entry
    t, a = config.training, config.accounting
    claim = example_level_claim(config.dp_sgd.noise_multiplier, config.dp_sgd.max_grad_norm, batch_size=t.batch_size,
                                client_sizes=data["client_sizes"], rounds=rounds, tau=t.tau,
                                delta=a.composition_delta, accountant=a.accountant)
    return {**entry, "example_level": claim.to_dict()}


def account_run(run: Any) -> dict[str, Any]:
    """The accounting section of a finished training run (``auditkit.stages.train.TrainingRun``)."""
    rounds = run.result.rounds[-1].round
    return with_example_level(account_rounds(run.mechanism, rounds, run.config.accounting, run.config.training), run.config, rounds,
                              run.data_summary)


def account_stage(mechanism: mechanisms.Mechanism, config: AuditConfig, trained: dict[str, Any]) -> dict[str, Any]:
    """The audit's account stage for one setting: its claim composed over the rounds the train stage ran
    (``trained``, its result), with the example-level claim of DP-SGD where the clients train with it."""
    rounds = trained["training"]["final"]["round"]
    entry = account_rounds(mechanism, rounds, config.accounting, config.training)
    return with_example_level(entry, config, rounds, trained["provenance"]["data"])
