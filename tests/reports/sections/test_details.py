"""The claim details' distinguishing facts: the worst pair's held-out ROC (AUROC and TPR at low FPR with their
intervals) from the results document alone, and nothing where an older document did not record it."""
from auditkit import mechanisms, results
from auditkit.attacks.audit_mechanism import audit_mechanism
from auditkit.reports import render_report
from auditkit.reports.sections.details import details
from auditkit.results import as_model


def _document(with_roc: bool):
    gaussian = mechanisms.create("gaussian", sigma=1.0, clip=0.5, private_seed=0)
    audit = audit_mechanism(gaussian, trials=20_000, search=True)
    section = results.distinguish_entry(audit, [], trials=20_000, confidence=0.95, tests=1)
    if not with_roc:
        del section["roc_summary"]
    setting = results.setting("s00", "gaussian <b>", gaussian, distinguish=section)
    doc = results.document("distinguish", "t", {}, results.provenance(seed=0, device="cpu", settings=[setting]),
                           [setting])
    return doc, audit.worst.roc_summary


def test_the_held_out_roc_is_a_fact_of_the_distinguishing_test(tmp_path):
    doc, summary = _document(with_roc=True)
    facts = dict(details(as_model(doc).settings[0]).facts)
    at1, at01 = summary.tpr_at
    shown = (f"AUROC {summary.auc:.3f} [{summary.auc_low:.3f}, {summary.auc_high:.3f}]; "
             f"TPR at 1 % FPR {100 * at1.tpr:.2f} % [{100 * at1.tpr_low:.2f}, {100 * at1.tpr_high:.2f}]; "
             f"at 0.1 % FPR {100 * at01.tpr:.2f} % [{100 * at01.tpr_low:.2f}, {100 * at01.tpr_high:.2f}]")
    assert facts["held-out ROC"].startswith(shown + " (the worst pair's test on its held-out outputs")
    assert "95 % intervals: DeLong for the AUROC, Clopper-Pearson for the TPR" in facts["held-out ROC"]
    render_report(doc, tmp_path)
    html, md = (tmp_path / "report.html").read_text(), (tmp_path / "report.md").read_text()
    assert shown in html and shown.replace("[", "\\[").replace("]", "\\]") in md
    assert "gaussian &lt;b&gt;" in html


def test_a_document_without_it_shows_no_roc_fact():
    doc, _ = _document(with_roc=False)
    assert "held-out ROC" not in dict(details(as_model(doc).settings[0]).facts)
