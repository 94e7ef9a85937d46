"""Markdown rendering of a results document."""
from __future__ import annotations

from typing import Any


def _pct(value: float) -> str:
    return f"{100 * value:.2f}%"


def _composed(entry: dict[str, Any]) -> str:
    return f"(eps={entry['epsilon']:.4g}, delta={entry['delta']:.3g}) via {entry['backend']}"


def _accounting_rows(accounting: dict[str, Any] | None) -> list[str]:
    """The claim composed over the run's rounds (or why there is no number), as table rows."""
    if accounting is None:
        return []
    rounds = accounting["rounds"]
    composed = accounting["composed"]
    value = _composed(composed) if composed is not None else f"no number: {accounting['refusal']}"
    rows = [f"| claimed over {rounds} rounds | {value} | client-level, every round counted |"]
    if accounting.get("composed_actual") is not None:
        rows.append(f"| realised noise over {rounds} rounds | {_composed(accounting['composed_actual'])} "
                    "| the claim is exceeded by the noise the code adds |")
    return rows


def render_summary(results: dict[str, Any]) -> str:
    """A short markdown summary: setting, accuracy, bits, and the mechanism's claimed guarantee."""
    config, final, mech = results["config"], results["final"], results["mechanism"]
    training, data = config["training"], results["data"]
    params = ", ".join(f"{k}={v}" for k, v in mech["params"].items() if k != "private_seed") or "-"
    ratio = final["compression_vs_float32"]
    lines = [
        "# auditkit summary",
        "",
        f"Mechanism `{mech['name']}` ({params}) on `{data['dataset']}` "
        f"({data['partition']} split over {training['clients']} clients), model `{results['model']['name']}` "
        f"({results['model']['num_params']:,} parameters), {final['round']} rounds of FedAvg with "
        f"tau = {training['tau']} local steps (batch {training['batch_size']}), seed {config['seed']}, "
        f"device `{results['environment']['device']}`.",
        "",
        "| measure | value | unit / view |",
        "|---|---|---|",
        f"| final test accuracy | {_pct(final['test_accuracy'])} | `public` model |",
        f"| best test accuracy | {_pct(final['best_test_accuracy'])} | over rounds |",
        f"| final test loss | {final['test_loss']:.4f} | cross-entropy |",
        f"| uplink rate | {final['bits_per_coordinate']:.3f} | bits/coordinate (float32 = 32) |",
        f"| compression vs float32 | {'-' if ratio is None else f'{ratio:.2f}x'} | |",
        f"| uplink total | {final['uplink_bits_total'] / 8e6:.3f} | MB, all clients and rounds |",
        f"| claimed guarantee | {mech['guarantee_summary']} | analytic, as the mechanism states it |",
        *_accounting_rows(results.get("accounting")),
        "",
        "## Accuracy by round",
        "",
        "| round | lr | test accuracy | test loss | bits/coordinate |",
        "|---|---|---|---|---|",
    ]
    for r in results["rounds"]:
        lines.append(
            f"| {r['round']} | {r['lr']:.4g} | {_pct(r['test_accuracy'])} | {r['test_loss']:.4f} "
            f"| {r['bits_per_coordinate']:.3f} |"
        )
    lines += [
        "",
        f"Threat-model views recorded at rounds: {', '.join(str(o['round']) for o in results['observations']) or 'none'}.",
        "Attacks, empirical DP tests and verdicts are not part of this audit yet.",
        "",
    ]
    return "\n".join(lines)
