"""The report's opening paragraph: what the command ran, on what data and model, and how."""
from __future__ import annotations

from typing import Any

from auditkit.reports.sections.text import number, plural
from auditkit.results.model import Data, ResultsDocument


def intro(results: ResultsDocument) -> str:
    """One paragraph: what was run (each command's own account), on what, and how; provenance sections that are
    null are not mentioned."""
    p, command = results.provenance, results.command
    what = plural(len(results.settings), "mechanism setting")
    tool = f"auditkit {p.auditkit_version} (command: {command})"
    clauses = _context(results)
    run = f"seed {p.seed}, device {p.device}."
    if command in ("train", "audit"):
        head = f"{what} {'trained and accounted' if command == 'train' else 'audited'} with {tool}"
        if clauses and p.data is not None:  # "... audited with auditkit 0.1.0 (command: audit) on the digits ..."
            head += " " + clauses.pop(0)
        return ", ".join([head, *clauses, run])
    if command == "attack":
        if p.model is not None:  # named with the attack
            clauses = [c for c in clauses if not c.startswith("model ")]
        head = _attack_head(results, f"{what} attacked with {tool}")
    elif command == "distinguish":
        head = _distinguish_head(results, f"{what} tested with {tool}")
    elif command == "canary":
        head = _canary_head(results, f"{what} audited in one run with {tool}")
    else:
        head = _account_head(results, f"{what} accounted with {tool}")
    return "; ".join([", ".join([head, *clauses]), run])


def _context(results: ResultsDocument) -> list[str]:
    """Clauses on the data, model and FL training, each only where the provenance records it."""
    p = results.provenance
    data, model, training = p.data, p.model, p.training
    clauses = []
    if data is not None:
        split = partition_text(data) + (f" split over {training.clients} clients" if training is not None
                                         else " split")
        clauses.append(f"on the {data.dataset} dataset ({split}; {data.train:,} training, "
                       f"{data.validation:,} validation and {data.test:,} test examples)")
    if model is not None:
        clauses.append(f"model {model.name} ({model.num_params:,} parameters)")
    if training is not None:
        local = (plural(training.local_epochs, "local epoch") if training.local_epochs is not None
                 else f"τ = {training.tau} local steps")
        clauses.append(f"{training.rounds} FedAvg rounds of {local} (batch size {training.batch_size}, "
                       f"learning rate {number(training.lr, 'g')}, participation: {training.participation})")
    return clauses


def partition_text(data: Data) -> str:
    """The partition with the parameter it was made with: "dirichlet (alpha = 0.5)", "shards (2 per client)"."""
    if data.dirichlet_alpha is not None:
        return f"{data.partition} (alpha = {number(data.dirichlet_alpha, 'g')})"
    if data.shards_per_client is not None:
        return f"{data.partition} ({data.shards_per_client} shards per client)"
    return data.partition


def _same(values: list[Any]) -> Any:
    """The value every item shares, or None when they differ (or there are none)."""
    return values[0] if values and all(v == values[0] for v in values) else None


def _attack_head(results: ResultsDocument, head: str) -> str:
    """What ``auditkit attack`` did: which attack, on how many images from which source, through which model."""
    inversions = [s.inversion for s in results.settings if s.inversion is not None]
    attack = _same([i.attack for i in inversions]) or "gradient inversion"
    images, source = _same([i.images for i in inversions]), _same([i.source for i in inversions])
    what = " ".join(str(x) for x in (images, source, "images") if x is not None)
    recorded = results.provenance.model
    model = (f"{recorded.name} ({recorded.num_params:,} parameters)" if recorded is not None else
             _same([i.model for i in inversions]) or "(as recorded per setting)")
    text = (f"{head}: {attack} inverts the gradients of {what}, each held by a single-image client (one local "
            f"step), through model {model}, once on the clean gradients and once on the server's view after the "
            f"mechanism")
    given = _same([i.label_given for i in inversions])
    if given is not None:
        text += ", the attacker given the true labels" if given else ", the labels inferred by the attack"
    if len(inversions) > 1 and any(i.error_std is not None for i in inversions):
        text += "; a defence curve: each setting is one mechanism at one parameter value"
    return text


def _distinguish_head(results: ResultsDocument, head: str) -> str:
    """What ``auditkit distinguish`` did: the tests, their trials and confidence."""
    tests = [s.distinguish for s in results.settings if s.distinguish is not None]
    trials, count, confidence = (_same([getattr(t, key) for t in tests]) for key in ("trials", "tests", "confidence"))
    how = [text for value, text in ((trials, f"{trials or 0:,} outputs per neighbouring pair"),
                                    (count, f"{count} tests"),
                                    (confidence, f"{number(100 * (confidence or 0), 'g')} % family-wise confidence, "
                                                 f"Bonferroni")) if value is not None]
    return (f"{head} by black-box distinguishing tests on outputs sampled from the real implementation"
            + (f" ({', '.join(how)})" if how else "") + ": each certified lower bound on epsilon is set against "
            "the claim")


def _canary_head(results: ResultsDocument, head: str) -> str:
    """What ``auditkit canary`` did: the idealized one-run game, its canaries and bound."""
    runs = [s.canary for s in results.settings if s.canary]
    canaries, bound = (_same([getattr(c, key) for c in runs]) for key in ("canaries", "bound"))
    return (f"{head}: the idealized one-run game, each canary one call of the mechanism on the claim's neighbouring "
            "pair" + ("" if canaries is None else f", {canaries:,} canaries")
            + ("" if bound is None else f", {bound} bound") + "; nothing was trained")


def _account_head(results: ResultsDocument, head: str) -> str:
    """What ``auditkit account`` did: the claims composed analytically, over how many rounds, how."""
    runs = [s.accounting for s in results.settings if s.accounting is not None]
    rounds, delta, accountant = (_same([getattr(a, key) for a in runs])
                              for key in ("rounds", "composition_delta", "accountant"))
    return (f"{head}: analytic accounting, each one-round claim composed"
            + ("" if rounds is None else f" over {plural(rounds, 'round')}")
            + ("" if delta is None else f" at δ = {number(delta)}")
            + ("" if accountant is None else f" (accountant asked for: {accountant})")
            + "; nothing was trained, attacked or tested")
