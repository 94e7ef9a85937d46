"""Agreement of ``auditkit.attacks.membership`` with the peers' own code on one seeded synthetic set of logits.

Peers (executed, not copied; pass their extracted sources with ``--peer-dir``):

* LiRA: tensorflow/privacy ``research/mi_lira_2021`` (Carlini et al.'s reference code). ``score.py`` (phi from
  logits) is a script that reads ``sys.argv[1]`` at import: it is run as a subprocess on a temporary folder laid out
  as it expects (``y_train.npy``, ``exp<k>/logits/0.npy`` of shape (N, 1, 1, C)), and its saved scores are read back.
  ``plot.py``'s ``generate_ours`` / ``generate_ours_offline`` are imported and called on those phi (their
  predictions are "lower = member", as their ``sweep`` negates them: the peer's member score is minus that).
* RMIA: privacytrustlab/ml_privacy_meter: ``attacks.py``'s ``run_rmia`` (what ``run_mia.py`` / ``audit.py`` call)
  and ``modules/mia/attacks/rmia.py``'s ``run_rmia`` (the newer module API), both imported from their files.

Layout of ``--peer-dir`` (extracted with ``git --git-dir=<mirror> show HEAD:<path> > ...``)::

    PEER_DIR/mi_lira_2021/{plot.py,score.py}                       # tensorflow/privacy research/mi_lira_2021
    PEER_DIR/ml_privacy_meter/attacks.py                           # privacytrustlab/ml_privacy_meter
    PEER_DIR/ml_privacy_meter/modules/mia/attacks/rmia.py

Data: R reference models, a target model, N candidate records, Z population samples, C classes. A record's true
class logit is its difficulty d_i ~ N(1, 1.5) plus ``--signal`` when the model trained on it plus N(0, 0.7) noise;
the other classes' logits are N(0, 1). "balanced": every record is IN for exactly R/2 references (the design under
which both peers' selections are exact); "random": each reference takes each record with probability 1/2.

    python benchmarks/compare_membership_peers.py --peer-dir /tmp/peers [--records 2000 --references 16]

Differences (also in docs/methodology/membership.md):
* LiRA, per-record variance, ``center="median"``: the same numbers (up to float rounding) online and offline with
  ``offline_score="density"``. Our default offline score is the paper's one-sided one (Alg. 1), which the reference
  code does not compute (its offline score is -log N(phi; mu_out, s_out), two-sided): compared by rank correlation.
* LiRA fixed variance: the reference code uses ``np.std`` of all IN values (for OUT too, online) or all OUT values
  (offline), which includes the spread between records' means; ours pools the within-record variance (separately
  for IN and OUT). Different estimators: rank correlation and the TPRs are reported.
* LiRA with random memberships: the reference code keeps only the first min_i(#IN_i) IN and min_i(#OUT_i) OUT
  references of every record (to stack them in one array); ours uses all of them.
* RMIA: ML Privacy Meter keeps, per sample, the ``num_reference_models`` largest OUT-masked probabilities (IN
  entries are zeroed first). For a record with exactly that many OUT references this is their mean; for the
  population (OUT everywhere) it is the mean of the largest half, not of all references, so its Pr(z) is biased up;
  with random memberships a record's Pr_out(x) is biased up (too many OUT) or down (zeros, too few). The score of x is
  the population's empirical CDF at Pr(x | theta) / Pr(x), so a different Pr(z) changes the score values but the
  ranking of the records only through ties. It also counts LR > 1 where the paper (and ours) counts LR >= gamma.
  The peer has no online RMIA; "online" runs its ``modules`` ``run_rmia`` with every reference marked OUT, a = 1 and
  num_reference_models = R, which makes its Pr(x) the mean over all references, the paper's online Pr(x).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from scipy import stats

from auditkit.attacks.membership import auc, lira_scores, logit_scaled_confidence, rmia_scores, tpr_at_fpr


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def synthetic(records: int, references: int, population: int, classes: int, signal: float, balanced: bool,
              seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    if balanced:
        reference_in = np.argsort(rng.random((references, records)), axis=0) < references // 2
    else:
        reference_in = rng.random((references, records)) < 0.5
    target_in = rng.random(records) < 0.5
    labels, population_labels = rng.integers(0, classes, records), rng.integers(0, classes, population)
    difficulty, z_difficulty = rng.normal(1, 1.5, records), rng.normal(1, 1.5, population)

    def logits(inside: np.ndarray, base: np.ndarray, y: np.ndarray) -> np.ndarray:
        out = rng.standard_normal(inside.shape + (classes,))
        true = base + signal * inside + 0.7 * rng.standard_normal(inside.shape)
        np.put_along_axis(out, np.broadcast_to(y, inside.shape)[..., None], true[..., None], axis=-1)
        return out

    return {"reference_in": reference_in, "target_in": target_in, "labels": labels,
            "population_labels": population_labels,
            "target": logits(target_in, difficulty, labels),
            "references": logits(reference_in, difficulty, labels),
            "population": logits(np.zeros(population, bool), z_difficulty, population_labels),
            "population_references": logits(np.zeros((references, population), bool), z_difficulty,
                                            population_labels)}


def peer_phi(peer: Path, data: dict[str, np.ndarray]) -> np.ndarray:
    """Carlini's score.py on the references' and the target's logits: phi of shape (R + 1, N), target last."""
    models = np.concatenate([data["references"], data["target"][None]])
    with tempfile.TemporaryDirectory() as folder:
        np.save(Path(folder) / "y_train.npy", data["labels"])
        for k, model_logits in enumerate(models):
            (Path(folder) / f"exp{k:03d}" / "logits").mkdir(parents=True)
            np.save(Path(folder) / f"exp{k:03d}" / "logits" / "0.npy", model_logits[:, None, None, :])
        subprocess.run([sys.executable, str(peer / "mi_lira_2021" / "score.py"), folder], check=True,
                       capture_output=True)
        return np.stack([np.load(Path(folder) / f"exp{k:03d}" / "scores" / "0.npy")[:, 0]
                         for k in range(len(models))])


def compare(peer: Path, data: dict[str, np.ndarray]) -> list[tuple[str, np.ndarray, np.ndarray, str]]:
    sys.path.insert(0, str(peer / "mi_lira_2021"))
    plot = _load(peer / "mi_lira_2021" / "plot.py", "lira_plot")
    mlpm = _load(peer / "ml_privacy_meter" / "attacks.py", "mlpm_attacks")
    mlpm_module = _load(peer / "ml_privacy_meter" / "modules" / "mia" / "attacks" / "rmia.py", "mlpm_rmia")
    phi = peer_phi(peer, data)
    ours_phi = np.concatenate([logit_scaled_confidence(data["references"], data["labels"]),
                               logit_scaled_confidence(data["target"], data["labels"])[None]])
    print(f"phi (score.py vs logit_scaled_confidence): max |difference| {np.max(np.abs(phi - ours_phi)):.2e}")
    keep, scores = data["reference_in"], phi[:-1, :, None]
    check_keep, check_scores = data["target_in"][None], phi[-1:, :, None]
    args = (data["target"], data["labels"], data["references"], data["reference_in"])
    rows = []
    for name, ours_kw, peer_fn, peer_kw, how in [
        ("LiRA online, median", {"online": True, "center": "median"}, plot.generate_ours, {}, "max|d|"),
        ("LiRA online, mean", {"online": True}, plot.generate_ours, {}, "spearman"),
        ("LiRA online, fixed var", {"online": True, "fixed_variance": True, "center": "median"}, plot.generate_ours,
         {"fix_variance": True}, "spearman"),
        ("LiRA offline, density", {"online": False, "offline_score": "density", "center": "median"},
         plot.generate_ours_offline, {}, "max|d|"),
        ("LiRA offline, one-sided", {"online": False, "center": "median"}, plot.generate_ours_offline, {},
         "spearman"),
        ("LiRA offline, fixed var", {"online": False, "offline_score": "density", "fixed_variance": True,
                                         "center": "median"}, plot.generate_ours_offline, {"fix_variance": True},
         "spearman"),
    ]:
        prediction, answers = peer_fn(keep, scores, check_keep, check_scores, **peer_kw)
        assert np.array_equal(np.asarray(answers, bool), data["target_in"])
        rows.append((name, lira_scores(*args, **ours_kw), -np.asarray(prediction), how))

    # ML Privacy Meter: signals are softmax probabilities of the label; model 0 the target, 1 its pair (unused by
    # the score), 2.. the references; population memberships all False
    def probs(logits: np.ndarray, y: np.ndarray) -> np.ndarray:  # get_softmax's max-shifted softmax, in numpy
        shifted = np.exp(logits - logits.max(-1, keepdims=True))
        index = np.broadcast_to(y, logits.shape[:-1])[..., None]
        return np.take_along_axis(shifted, index, -1)[..., 0] / shifted.sum(-1)

    r = data["references"].shape[0]
    p_target, p_refs = probs(data["target"], data["labels"]), probs(data["references"], data["labels"]).T
    z_target = probs(data["population"], data["population_labels"])
    z_refs = probs(data["population_references"], data["population_labels"]).T
    all_signals = np.column_stack([p_target, p_target, p_refs])
    all_members = np.column_stack([data["target_in"], data["target_in"], data["reference_in"].T])
    population_signals = np.column_stack([z_target, z_target, z_refs])
    pop_args = (data["population"], data["population_labels"], data["population_references"])
    a = 0.5
    ours_offline = rmia_scores(*args, *pop_args, offline_a=a)
    rows.append(("RMIA offline a=0.5 (attacks.py)", ours_offline,
                 mlpm.run_rmia(0, all_signals, population_signals, all_members, r // 2, a), "max|d|"))
    rows.append(("RMIA offline a=0.5 (modules)", ours_offline,
                 mlpm_module.run_rmia(p_target, p_refs, data["reference_in"].T, z_target, z_refs, a), "max|d|"))
    rows.append(("RMIA online (modules, a=1)", rmia_scores(*args, *pop_args, offline_a=None),
                 mlpm_module.run_rmia(p_target, p_refs, np.zeros_like(p_refs, bool), z_target, z_refs, 1.0, r),
                 "max|d|"))
    # the same offline attack with every reference giving a population sample the same probability: the peer's
    # top-half mean of Pr(z) is then the mean, and what remains is the records' side (and > versus >=)
    flat_refs = np.broadcast_to(data["population_references"][:1], data["population_references"].shape)
    flat_z = np.broadcast_to(z_refs[:, :1], z_refs.shape)
    rows.append(("RMIA offline, flat Pr(z) (attacks.py)",
                 rmia_scores(*args, data["population"], data["population_labels"], flat_refs, offline_a=a),
                 mlpm.run_rmia(0, all_signals, np.column_stack([z_target, z_target, flat_z]), all_members, r // 2, a),
                 "max|d|"))
    return rows


def table(rows, members: np.ndarray) -> None:
    print(f"{'attack':<38} {'compare':>8} {'value':>9} {'TPR@0.1% ours':>13} {'peer':>6} {'TPR@1% ours':>11} "
          f"{'peer':>6} {'AUC ours':>8} {'peer':>6}")
    for name, ours, peer, how in rows:
        value = np.max(np.abs(ours - peer)) if how == "max|d|" else stats.spearmanr(ours, peer).statistic
        if how == "max|d|" and value > 1e-9:
            how = "max|d|*"
        tprs = [tpr_at_fpr(s, members, f).tpr for f in (0.001, 0.01) for s in (ours, peer)]
        shown = f"{value:.2e}" if how.startswith("max") else f"{value:.4f}"
        print(f"{name:<38} {how:>8} {shown:>9} {tprs[0]:>13.3f} {tprs[1]:>6.3f} {tprs[2]:>11.3f} {tprs[3]:>6.3f} "
              f"{auc(ours, members):>8.4f} {auc(peer, members):>6.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--peer-dir", type=Path, required=True)
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--references", type=int, default=16)
    parser.add_argument("--population", type=int, default=2000)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--signal", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for balanced in (True, False):
        data = synthetic(args.records, args.references, args.population, args.classes, args.signal, balanced,
                         args.seed)
        print(f"\n== {'balanced' if balanced else 'random'} memberships: R = {args.references}, N = {args.records}, "
              f"Z = {args.population}, C = {args.classes}, signal {args.signal}, seed {args.seed}; "
              f"{int(data['target_in'].sum())} members; IN references per record "
              f"{data['reference_in'].sum(0).min()}..{data['reference_in'].sum(0).max()}")
        table(compare(args.peer_dir, data), data["target_in"])
    print("\ncompare: max|d| = max |ours - peer| (* where not equal to 1e-9), spearman = rank correlation; "
          "TPR at the largest TPR with empirical FPR <= target (auditkit.attacks.membership.tpr_at_fpr) for both")


if __name__ == "__main__":
    main()
