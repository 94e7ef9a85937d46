"""The privacy table's accountant column: the accountant that composed each claim, and why when it is not the one
asked for (``auditkit.accounting.composition.Fallback``, recorded by the account stage)."""
from auditkit import mechanisms, results
from auditkit.reports.sections.summary import privacy_row
from auditkit.results import as_model


def _row(name: str, rounds: int = 20, accountant: str = "opacus-prv", **params):
    mechanism = mechanisms.create(name, **params)
    accounting = results.accounting_entry(mechanism, rounds, composition_delta=1e-5, accountant=accountant)
    setting = results.setting("s00", name, mechanism, accounting=accounting)
    document = results.document("account", "t", {}, results.provenance(seed=0, device="cpu", settings=[setting]),
                                [setting])
    return privacy_row(as_model(document).settings[0]), accounting


def test_the_accountant_asked_for_is_named_alone():
    row, accounting = _row("gaussian", clip=0.1, sigma=1.0)  # z = 10 under replace-one: PRV composes it
    assert accounting["composed"]["fallbacks"] == [] and row.accountant == "opacus-prv"
    assert "opacus" not in row.composed  # the accountant has its own column


def test_a_fallback_names_the_accountant_used_the_one_asked_for_and_why():
    row, accounting = _row("gaussian", clip=0.1, sigma=0.06884)  # z = 0.34 add/remove: below PRV's 0.5
    assert accounting["composed"]["fallbacks"] == ["prv-weak-noise"]
    assert row.accountant == "opacus-rdp (asked for opacus-prv: PRV cannot evaluate a noise multiplier below 0.5)"


def test_a_file_from_before_the_fallbacks_says_the_reason_is_not_recorded():
    row, accounting = _row("gaussian", clip=0.1, sigma=0.06884)
    mechanism = mechanisms.create("gaussian", clip=0.1, sigma=0.06884)
    for key in ("requested", "fallbacks"):
        del accounting["composed"][key]
    setting = results.setting("s00", "old", mechanism, accounting=accounting)
    document = results.document("account", "t", {}, results.provenance(seed=0, device="cpu", settings=[setting]),
                                [setting])
    old = privacy_row(as_model(document).settings[0])
    assert old.accountant == "opacus-rdp (asked for opacus-prv: the reason is not recorded)"
