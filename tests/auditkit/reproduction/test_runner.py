"""Row and ordering verdicts on runs whose outcomes are set by hand, the t interval against its closed form, and one
real (tiny) reproduction end to end."""
import dataclasses
import math

import pytest

from auditkit.reproduction import check_reproduction_inputs, load_paper, reproduce
from auditkit.reproduction.paper import Ordering, Row, Table
from auditkit.reproduction.runner import interval, ordering_entry, plan_reproduction, row_entry, run_reasons


def test_interval_is_the_student_t_interval():
    mean, low, high = interval([1.0, 2.0, 3.0])
    half = 4.302652729911275 / math.sqrt(3)  # t_{0.975, 2} = 4.3027 (tables), sd = 1
    assert (mean, low, high) == pytest.approx((2.0, 2.0 - half, 2.0 + half))
    assert interval([5.0]) is None


def tiny_paper(rows, orderings=()):
    """The CEPAM paper file with its table replaced by ``rows`` (configs are never trained here)."""
    paper = load_paper("cepam")
    return dataclasses.replace(paper, tables=(Table("T", "a table", "test_accuracy", tuple(rows)),),
                               orderings=tuple(orderings))


def runs_for(plan, accuracies):
    """Fake runs: row i's setting gets accuracies[i] per seed (fractions)."""
    runs = {}
    for i, per_seed in enumerate(accuracies):
        key = plan.row_setting[("T", i)]
        runs[key] = {s: {"test_accuracy": a, "curve": [a]} for s, a in zip(plan.seeds, per_seed, strict=True)}
    return runs


def row(method, paper, model="mlp", **extra):
    return Row(method, {"training": {"model": model}, "mechanism": {"name": method}}, paper, 1, **extra)


def test_verdicts_follow_the_paper_interval_and_name_why_not_comparable(tmp_path):
    paper = tiny_paper([row("none", "80.0±1.0"), row("sdq", "70.0"), row("gaussian", "50.0", comparable=False,
                                                                         why="a setting the paper leaves unstated")])
    plan = plan_reproduction(paper, budget="paper", seeds=3)
    plan = dataclasses.replace(plan, paper=dataclasses.replace(paper, data=plan.dataset))  # same data as the paper
    runs = runs_for(plan, [[0.805, 0.81, 0.815], [0.80, 0.81, 0.82], [0.5, 0.5, 0.5]])
    first, second, third = (row_entry(plan, "T", i, runs) for i in range(3))
    assert first["verdict"] == "reproduced" and first["mean"] == pytest.approx(81.0)  # 80 + 1 meets [79.8, 82.2]
    assert second["verdict"] == "not reproduced" and second["difference"] == pytest.approx(11.0)
    assert third["verdict"] == "not comparable" and third["why"] == ["a setting the paper leaves unstated"]
    quick = plan_reproduction(paper, budget="quick", seeds=1)
    entry = row_entry(quick, "T", 0, runs_for(quick, [[0.8], [0.8], [0.8]]))
    assert entry["verdict"] == "not comparable" and entry["interval"] is None and entry["why"] == []
    reasons = run_reasons(quick)  # the whole run's: data, rounds, seeds
    assert any("mnist-5k" in w for w in reasons) and any("rounds (--budget quick)" in w for w in reasons)
    assert "one seed: no interval" in reasons and run_reasons(plan) == []


def test_orderings_are_judged_on_paired_seeds():
    rows = [row("none", "80"), row("sdq", "70"), row("gaussian", "60")]
    paper = tiny_paper(rows, [Ordering("claim", "none above the others", "T", ("none",), ("sdq", "gaussian"))])
    plan = plan_reproduction(paper, budget="quick", seeds=3)
    # none beats sdq by 1 point on every seed although the seeds vary a lot; gaussian is within noise of none
    runs = runs_for(plan, [[0.70, 0.80, 0.90], [0.69, 0.79, 0.89], [0.72, 0.78, 0.91]])
    pairs = ordering_entry(plan, paper.orderings[0], runs)
    assert [(p["below"], p["verdict"]) for p in pairs] == [("sdq", "holds"), ("gaussian", "unresolved")]
    assert pairs[0]["interval"] == pytest.approx([1.0, 1.0])
    flipped = runs_for(plan, [[0.69, 0.79, 0.89], [0.70, 0.80, 0.90], [0.5, 0.5, 0.5]])
    assert ordering_entry(plan, paper.orderings[0], flipped)[0]["verdict"] == "reversed"


@pytest.mark.parametrize(("args", "message"), [
    (("nope", "quick", None, None), "PAPER must be one of"),
    (("cepam", "slow", None, None), "--budget must be one of quick, paper; got 'slow'"),
    (("cepam", "quick", 0, None), "--seeds must be an integer >= 1, got 0"),
])
def test_bad_input_is_refused_before_anything_runs(args, message):
    with pytest.raises(ValueError, match=message):
        check_reproduction_inputs(*args)


def test_a_data_dir_without_the_papers_data_is_refused(tmp_path):
    with pytest.raises(ValueError, match="does not hold mnist"):
        check_reproduction_inputs("cepam", "quick", None, str(tmp_path))
    with pytest.raises(ValueError, match="must be an existing folder"):
        check_reproduction_inputs("cepam", "quick", None, str(tmp_path / "absent"))


def test_a_tiny_reproduction_runs_end_to_end_and_writes_its_reports(tmp_path, monkeypatch):
    """Two rows of 003 Table I, 3 clients, 2 rounds, 2 seeds: real training, real report files."""
    import auditkit.reproduction as reproduction

    paper = load_paper("cepam")
    table = paper.table("003 Table I")
    small = dataclasses.replace(
        paper, base={**paper.base, "training": {**paper.base["training"], "clients": 3, "tau": 2}},
        budgets={"quick": {"rounds": 2, "seeds": 2, "why": "test"}, "paper": paper.budgets["paper"]},
        tables=(dataclasses.replace(table, rows=table.rows[:1] + table.rows[2:3]),),
        orderings=(Ordering("o", "FL above FL+SDQ", "003 Table I", ("FL",), ("FL+SDQ",)),))
    monkeypatch.setattr(reproduction, "load_paper", lambda paper_id: small)
    document = reproduce("cepam", out=tmp_path)
    rows = document["tables"][0]["rows"]
    assert [r["method"] for r in rows] == ["FL", "FL+SDQ"] and all(len(r["per_seed"]) == 2 for r in rows)
    assert all(r["verdict"] == "not comparable" for r in rows)  # mnist-5k, 2 rounds
    assert all(0 <= v <= 100 for r in rows for v in r["per_seed"])
    assert document["orderings"][0]["pairs"][0]["verdict"] in ("holds", "reversed", "unresolved")
    for name in ("reproduction.json", "report.html", "report.md", "figures/reproduction-0.png"):
        assert (tmp_path / name).is_file()
    assert "82.06±1.35 (l. 419)" in (tmp_path / "report.md").read_text()
