"""Building a results document's sections (auditkit.results.build)."""
import json

import numpy as np
import torch
import pytest

from auditkit import mechanisms, results
from auditkit.attacks.audit_mechanism import audit_mechanism
from auditkit.attacks.one_run import one_run_bound
from auditkit.attacks.roc import roc_summary
from auditkit.mechanisms.tradeoff import GaussianTradeOff
from auditkit.results import as_model, load_results
from auditkit.results.model import RocSummary as RocSummaryEntry
from auditkit.strict_json import dumps_strict


def _distinguish(verdict="consistent", bound=2.0, adaptive=(), p=0.4):
    return {"worst_pair": "axis", "verdict": verdict, "p_value": p, "tests": 6, "epsilon_lower_bound": bound,
            "max_certifiable": 9.46, "confidence": 0.95, "adaptive": list(adaptive)}


def test_a_setting_records_the_epsilon_its_mechanism_really_adds():
    jopeq = mechanisms.create("jopeq-laplace", eps=10.0, bits=2)
    entry = results.setting("s00", "jopeq", jopeq, distinguish=_distinguish("inconclusive", 6.0, p=1.0))
    assert entry["mechanism"]["true_epsilon"] == pytest.approx(jopeq.true_epsilon()) and jopeq.true_epsilon() > 10
    assert entry["verdict"]["evidence"] == "analytic"
    gaussian = results.setting("s01", "gaussian", mechanisms.create("gaussian"), distinguish=_distinguish())
    assert gaussian["mechanism"]["true_epsilon"] is None and gaussian["verdict"]["verdict"] == "consistent"


def _round_trip(document, tmp_path):
    """``document`` written as strict JSON and read back (load_results), with the strict JSON itself."""
    path = tmp_path / "results.json"
    path.write_text(dumps_strict(document), encoding="utf-8")
    return load_results(path), json.loads(path.read_text(encoding="utf-8"))


def test_the_distinguishing_tests_held_out_roc_is_recorded_and_round_trips(tmp_path):
    gaussian = mechanisms.create("gaussian", sigma=1.0, clip=0.5, private_seed=0)
    audit = audit_mechanism(gaussian, trials=20_000, search=True)
    entry = results.setting("s00", "gaussian", gaussian, distinguish=results.distinguish_entry(
        audit, [], trials=20_000, confidence=0.95, tests=1))
    doc = results.document("distinguish", "t", {}, results.provenance(seed=0, device="cpu", settings=[entry]), [entry])
    loaded, strict = _round_trip(doc, tmp_path)
    recorded = loaded["settings"][0]["distinguish"]
    assert recorded == strict["settings"][0]["distinguish"]
    assert recorded == json.loads(dumps_strict(doc))["settings"][0]["distinguish"]
    summary = audit.worst.roc_summary
    assert recorded["roc_summary"]["auc"] == recorded["estimates"][0]["roc_summary"]["auc"] == summary.auc
    assert [p["tpr"] for p in recorded["roc_summary"]["tpr_at"]] == [p.tpr for p in summary.tpr_at]
    model = as_model(loaded).settings[0].distinguish
    assert (model.roc_summary.auc_low, model.roc_summary.auc_high) == (summary.auc_low, summary.auc_high)


def test_a_canary_views_roc_summary_is_its_scores_and_an_older_view_without_it_loads(tmp_path):
    rng = np.random.default_rng(0)
    inserted = rng.random(5_000) < 0.5
    scores = rng.standard_normal(5_000) + inserted
    curve = GaussianTradeOff(1.0)
    view = results.canary_view("output", "likelihood ratio", one_run_bound(scores, inserted, curve=curve, delta=1e-5),
                               scores, inserted, curve)
    assert view["roc_summary"] == roc_summary(scores, inserted).to_dict()
    claim = {"epsilon": curve.epsilon(1e-5), "delta": 1e-5, "curve": curve.label, "rounds": 1, "note": "the claim"}
    older = {key: value for key, value in view.items() if key != "roc_summary"}
    for views in ([view], [older]):
        section = results.canary_entry(kind="idealized", canaries=5_000, bound="fdp", confidence=0.95, claim=claim,
                                       views=views, seconds=1.0, details={})
        entry = results.setting("s00", "gaussian", mechanisms.create("gaussian"), canary=section)
        doc = results.document("canary", "t", {}, results.provenance(seed=0, device="cpu", settings=[entry]), [entry])
        loaded, strict = _round_trip(doc, tmp_path)
        assert loaded == strict == json.loads(dumps_strict(doc))
    # too few canaries on one side for DeLong's variance: the summary is left out, not made up
    few = results.canary_view("output", "s", one_run_bound(scores[:3], np.array([True, False, False]), curve=None,
                                                    delta=1e-5),
                              scores[:3], np.array([True, False, False]), None)
    assert "roc_summary" not in few


def test_a_roc_summary_with_a_nan_is_refused():
    rng = np.random.default_rng(1)
    inserted = rng.random(100) < 0.5
    summary = roc_summary(rng.standard_normal(100), inserted).to_dict()
    with pytest.raises(ValueError, match="auc"):
        RocSummaryEntry.model_validate({**summary, "auc": "a half"})


@pytest.mark.parametrize("name, params", [("gaussian", {"sigma": 0.3, "clip": 1.0}),
                                          ("laplace", {"scale": 0.2, "clip": 1.0}),
                                          ("cepam-gaussian", {"sigma": 0.3, "clip": 1.0, "n": 2})])
def test_the_recorded_noise_std_is_the_spread_of_what_the_mechanism_adds(name, params):
    mechanism = mechanisms.create(name, private_seed=3, **params)
    recorded = results.build.mechanism_entry(mechanism)["noise_std"]
    x = torch.zeros(40_000, dtype=torch.float32)
    x[0] = 0.5  # inside the clip: the output is x plus the noise alone
    error = (mechanism(x, seed=7).double() - x.double()).numpy()
    # 40,000 coordinates: the sample std is within 1.5 % of the true one at ~ 4 standard errors (se = 0.35 %)
    assert np.std(error) == pytest.approx(recorded, rel=0.015)


def test_a_mechanism_without_an_additive_noise_density_records_no_noise_std():
    assert "noise_std" not in results.build.mechanism_entry(mechanisms.create("sdq", bits=4))
    assert "noise_std" not in results.build.mechanism_entry(mechanisms.create("none"))
