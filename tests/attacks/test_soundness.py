"""Soundness of the audit in CI (``auditkit.attacks.soundness``): every registered mechanism and the example plugin over
several seeds at a reduced budget. It fails if correct claims are called "violated" more often than a sound audit
at 95% allows (the 99.9% quantile of Binomial(audits, 0.05), overall and per mechanism), or if a known-exceeded
claim -- JoPEQ's moment-matched ``jopeq-laplace`` (true eps 6.05 > 4) and the half-noise plugin (twice the claim,
4.38 > 1.99) -- is caught in fewer than half its seeds. The full table (20 seeds, 10^5 trials per pair) is
``benchmarks/bench_soundness.py``."""

from pathlib import Path

import pytest

from auditkit import mechanisms
from auditkit.attacks.soundness import allowed_false_alarms, soundness_sweep

pytestmark = pytest.mark.soundness

PLUGIN = Path(__file__).resolve().parents[2] / "examples" / "half_noise_plugin" / "half_noise.py"
SEEDS, TRIALS = 8, 20_000


def test_correct_claims_are_rarely_violated_and_known_excesses_are_caught():
    mechanisms.load_plugins([str(PLUGIN)])
    rows = soundness_sweep(trials=TRIALS, seeds=SEEDS)
    by_kind = {kind: [r for r in rows if r.kind == kind] for kind in ("correct", "known-exceeded", "vacuous")}
    # known-exceeded: what each mechanism declares of itself (true_epsilon), the plugin like the built-ins
    assert {r.name for r in by_kind["known-exceeded"]} == {"jopeq-laplace", "half-noise-laplace", "half-noise-gaussian"}
    assert len(by_kind["correct"]) >= 12 and {"sdq", "none"} <= {r.name for r in by_kind["vacuous"]}
    audits = sum(r.seeds for r in by_kind["correct"])
    violated = sum(r.violated for r in by_kind["correct"])
    assert violated <= allowed_false_alarms(audits, 0.95), [r.line() for r in by_kind["correct"] if r.violated]
    failing = [r.line() for r in rows if not r.passes]
    assert not failing, failing
    for row in by_kind["known-exceeded"]:  # caught with a bound clearly above the claim, not by a hair
        assert min(row.bounds) > row.claimed_epsilon, row.line()
