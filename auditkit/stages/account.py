"""The ``account`` stage: a setting's one-round claim and the claim composed over the rounds it ran
(``auditkit.accounting``), as the results' accounting section."""
from __future__ import annotations

from typing import Any

from auditkit import mechanisms
from auditkit import results
from auditkit.config import AccountingConfig, TrainingConfig

__all__ = ["account_rounds", "account_run"]


def account_rounds(mechanism: mechanisms.Mechanism, rounds: int, accounting: AccountingConfig,
                   training: TrainingConfig | None = None) -> dict[str, Any]:
    """The accounting section of ``rounds`` rounds of ``mechanism``: the client-level claim composed over every
    round at the config's composition delta and backend, amplified by the ``training`` participation where the
    mechanism's claim covers client sampling (``auditkit.accounting.client_sampling``)."""
    participation = "full" if training is None else training.participation
    sample_rate = None if training is None else training.sample_rate
    return results.accounting_entry(mechanism, rounds, composition_delta=accounting.composition_delta,
                                    backend=accounting.backend, participation=participation, sample_rate=sample_rate)


def account_run(run: Any) -> dict[str, Any]:
    """The accounting section of a finished training run (``auditkit.stages.train.TrainingRun``)."""
    return account_rounds(run.mechanism, run.result.rounds[-1].round, run.config.accounting, run.config.training)
