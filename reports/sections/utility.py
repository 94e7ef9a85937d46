"""Utility against privacy: each trained setting's final accuracy and loss beside its claimed and certified
epsilon (the figure's points), and the findings that flag a setting far below the run without a mechanism and
explain it from the run's own numbers: the noise against the clipped update, the clients averaged, the levers."""
from __future__ import annotations

import math
from dataclasses import dataclass

from auditkit.mechanisms.views import View
from auditkit.reports.sections.summary import baseline, certified_bound, versus
from auditkit.reports.sections.text import number, percent
from auditkit.results.model import ResultsDocument, Setting

# a setting has poor utility when it loses more than this share of the gap between chance and the run without a
# mechanism (the ceiling): what training gains, not an absolute accuracy
POOR_SHARE = 0.5
NEAR_CHANCE = 1.5  # below this many times chance the model learns almost nothing
AT_CLIP = 0.9  # updates whose norm, read from the SNR, is at least this share of the clip are taken as clipped


@dataclass(frozen=True)
class RunScale:
    """What every setting of a run shares: the model's coordinates d, the clients averaged per round n (expected,
    under Poisson sampling), the classes (chance is 1 / classes); None where the results do not record it."""

    coordinates: int | None
    clients: float | None
    classes: int | None

    @property
    def chance(self) -> float | None:
        return None if not self.classes else 1 / self.classes


def run_scale(results: ResultsDocument) -> RunScale:
    """The run's d (``provenance.model.num_params``), n (every client under full participation, else the config's
    clients per round, or q K under Poisson sampling) and classes (``provenance.data.classes``)."""
    p = results.provenance
    model, training, data = p.model, p.training, p.data
    clients = None
    if training is not None:
        config = results.config.get("training") or {}
        if training.participation == "full":
            clients = float(training.clients)
        elif config.get("clients_per_round"):
            clients = float(config["clients_per_round"])
        elif config.get("sample_rate"):
            clients = float(config["sample_rate"]) * training.clients
    return RunScale(coordinates=None if model is None else model.num_params, clients=clients,
                    classes=None if data is None else data.classes)


@dataclass(frozen=True)
class UtilityPoint:
    """One trained setting on the privacy-utility axes: its one-round claimed epsilon (None: no finite claim), its
    strongest certified epsilon lower bound (None: not tested), its final test accuracy and loss."""

    setting_id: str
    label: str
    mechanism: str
    claimed: float | None
    certified: float | None
    accuracy: float
    loss: float


def utility_points(settings: list[Setting]) -> list[UtilityPoint]:
    """Every trained setting's point, in setting order."""
    points = []
    for s in settings:
        if s.training is None:
            continue
        bound = certified_bound(s)
        claimed = s.mechanism.guarantee.epsilon
        points.append(UtilityPoint(
            setting_id=s.id, label=s.label, mechanism=s.mechanism.name,
            claimed=claimed if claimed is not None and math.isfinite(claimed) else None,
            certified=None if bound is None else bound.epsilon_lower_bound,
            accuracy=s.training.final.test_accuracy, loss=s.training.final.test_loss))
    return points


def lost_share(accuracy: float, ceiling: float, chance: float | None) -> float | None:
    """The share of the gap between chance (0 when unknown) and the ceiling that ``accuracy`` lost:
    (ceiling - accuracy) / (ceiling - chance); None when the ceiling is not above chance."""
    floor = chance or 0.0
    return None if ceiling <= floor else (ceiling - accuracy) / (ceiling - floor)


@dataclass(frozen=True)
class NoiseShare:
    """The privacy noise of one round against the clipped signal: ``std`` per coordinate on ``coordinates`` d,
    added by each client (``central`` False: n draws averaged) or once by the server to the sum (True)."""

    std: float
    coordinates: int
    clients: float
    central: bool
    clip: float | None
    clip_norm: str | None

    @property
    def norm(self) -> float:
        """The expected l2 norm of one noise draw, sigma sqrt(d)."""
        return self.std * math.sqrt(self.coordinates)

    @property
    def mean_norm(self) -> float:
        """The noise on the mean of n updates: sigma sqrt(d) / sqrt(n) for n independent draws, / n for one draw
        on the sum."""
        return self.norm / (self.clients if self.central else math.sqrt(self.clients))


def noise_share(setting: Setting, scale: RunScale) -> NoiseShare | None:
    """The setting's noise (``mechanism.noise_std``) on the run's d and n; None where either is not recorded."""
    mechanism = setting.mechanism
    if mechanism.noise_std is None or not scale.coordinates or not scale.clients:
        return None
    clip = mechanism.params.get("clip") if mechanism.clip_norm else None
    return NoiseShare(std=mechanism.noise_std, coordinates=scale.coordinates, clients=scale.clients,
                      central=mechanism.view == View.AGGREGATE,
                      clip=float(clip) if isinstance(clip, int | float) and clip > 0 else None,
                      clip_norm=mechanism.clip_norm)


def signal_norm(share: NoiseShare, snr_db: float | None) -> float | None:
    """The clients' update norm the measured uplink SNR implies, sigma sqrt(d) 10^(SNR / 20) (the SNR is a
    ratio of per-coordinate variances, ``auditkit.fl.snr``); None without a finite SNR or for central noise (its
    uplink carries no noise)."""
    if share.central or snr_db is None or not math.isfinite(snr_db):
        return None
    return share.norm * 10 ** (snr_db / 20)


def _clients(n: float) -> str:
    return f"{n:,.0f}" if n == round(n) else number(n, ".3g")


def _noise_words(setting: Setting, share: NoiseShare) -> str:
    """"each client adds noise of norm ≈ 34.74 (σ 0.2162 on each of 25,818 coordinates) to an update clipped to l2
    norm 0.1 (uplink SNR -50.85 dB); averaging 10 clients divides the noise by √10 = 3.162 only: ..."."""
    n, d, clip = share.clients, share.coordinates, share.clip
    drawn = f"noise of norm ≈ {number(share.norm)} (σ {number(share.std)} on each of {d:,} coordinates)"
    clipped = "" if clip is None else f" {share.clip_norm} norm {number(clip)}"
    ratio = "" if clip is None else (f", {rough_ratio(share.mean_norm / clip)} times the largest mean update "
                                     f"({number(clip)})")
    if share.central:
        return (f"the server adds {drawn} once to the sum of {_clients(n)} updates"
                + (f" clipped to{clipped}" if clip else "")
                + f": the mean's noise ≈ {number(share.mean_norm)}{ratio}")
    snr = setting.training.final.snr_db
    measured = "" if snr is None or not math.isfinite(snr) else f" (uplink SNR {number(snr)} dB)"
    return (f"each client adds {drawn} to an update" + (f" clipped to{clipped}" if clip else "") + measured
            + f"; averaging {_clients(n)} clients divides the noise by √{_clients(n)} = {number(math.sqrt(n))} "
              f"only: the mean's noise ≈ {number(share.mean_norm)}{ratio}")


def rough_ratio(value: float) -> str:
    """A ratio to two significant digits: 110, 3.2, 0.45."""
    rounded = float(f"{value:.2g}")
    return f"{rounded:,.0f}" if rounded >= 10 else f"{rounded:g}"


def _clip_lever(setting: Setting, share: NoiseShare) -> str:
    """What the clip can do: nothing when the updates reach it (the noise calibrated to epsilon grows with it,
    sigma ∝ C); a smaller clip, down to the updates' norm, when they stay below it."""
    if share.clip is None:
        return ""
    updates = signal_norm(share, setting.training.final.snr_db)
    if updates is not None and updates < AT_CLIP * share.clip:
        return (f"a clip nearer the updates' norm (≈ {number(updates)} from the SNR, against the clip "
                f"{number(share.clip)}; σ ∝ C for a fixed claim)")
    return "not a larger clip (σ ∝ C for a fixed claim, and the updates reach the clip)"


def _levers(setting: Setting, share: NoiseShare | None, scale: RunScale) -> list[str]:
    """The levers that would raise utility, fitting how the mechanism adds its error."""
    accounting = setting.accounting
    composed = None if accounting is None else accounting.composed
    claimed = setting.mechanism.guarantee.epsilon
    if claimed is None:
        bits = setting.training.final.bits_per_coordinate
        return [f"a finer encoding than {number(bits)} bits per coordinate"] if bits < 32 else []
    levers = []
    if share is not None and not share.central:
        n = _clients(share.clients)
        levers.append(f"central noise (dp-fedavg: one draw on the sum, √{n} = {number(math.sqrt(share.clients))} "
                      "times less noise on the mean; its claim covers the released aggregate, not the server's "
                      "view)")
    if scale.clients:
        fall = "1 / n" if share is not None and share.central else "1 / √n"
        levers.append(f"more clients per round than {_clients(scale.clients)} (noise on the mean ∝ {fall})")
    if share is not None:
        levers.append(f"a smaller model (noise norm ∝ √d, d = {share.coordinates:,})")
    else:
        levers.append("a larger ε per round")
    if composed is not None and composed.rounds > 1:
        levers.append(f"fewer rounds than {composed.rounds} at the same whole-run claim: a larger ε, less noise, "
                      "per round")
    if share is not None:
        clip = _clip_lever(setting, share)
        if clip:
            levers.append(clip)
    return levers


def explanation(setting: Setting, scale: RunScale) -> str:
    """Why a setting's utility is poor, from its recorded numbers; "" when nothing recorded explains it."""
    final = setting.training.final
    share = noise_share(setting, scale)
    if share is not None:
        return _noise_words(setting, share)
    if setting.mechanism.guarantee.epsilon is None:
        snr = "" if final.snr_db is None or not math.isfinite(final.snr_db) else (
            f": the server decodes each update at uplink SNR {number(final.snr_db)} dB")
        return f"it claims no privacy, so no privacy noise explains it{snr}"
    if final.snr_db is not None and math.isfinite(final.snr_db):
        return (f"the server decodes each update with an error {rough_ratio(10 ** (-final.snr_db / 20))} times the "
                f"update's spread (uplink SNR {number(final.snr_db)} dB)")
    return ""


def levers(setting: Setting, scale: RunScale) -> list[str]:
    """The levers that would raise the setting's utility, fitting how its mechanism adds its error."""
    return _levers(setting, noise_share(setting, scale), scale)


def unusable(setting: Setting, settings: list[Setting], scale: RunScale) -> str:
    """"its model trains to 11.50 % against 77.30 % without a mechanism" for a trained setting whose utility is
    poor (lost more than ``POOR_SHARE`` of the gain over chance, or near chance), so a verdict that the claim holds
    is not read as a usable mechanism; "" otherwise."""
    reference, chance = baseline(settings), scale.chance
    if setting.training is None or setting is reference:
        return ""
    accuracy = setting.training.final.test_accuracy
    near = chance is not None and accuracy < NEAR_CHANCE * chance
    lost = None if reference is None else lost_share(accuracy, reference.training.final.test_accuracy, chance)
    if not near and (lost is None or lost <= POOR_SHARE):
        return ""
    against = "" if reference is None else (f" against {percent(reference.training.final.test_accuracy)} without a "
                                            "mechanism")
    return f"its model trains to {percent(accuracy)}{against} (poor utility, see below)"


def utility_findings(settings: list[Setting], scale: RunScale) -> list[str]:
    """One line per trained setting: its final accuracy against the run without a mechanism; a setting that lost
    more than ``POOR_SHARE`` of the gap between chance and that run (without one: below ``NEAR_CHANCE`` times
    chance) is flagged, with ``explanation``; then, once per mechanism with a flagged setting, its ``levers``."""
    trained = [s for s in settings if s.training is not None]
    if len(trained) < 2:
        return []
    reference, chance = baseline(settings), scale.chance
    if reference is None:
        lines = ["no run without a mechanism in this audit: accuracies below are absolute"
                 + ("" if chance is None else f" (chance: {percent(chance)})")]
    else:
        lines = [f"{reference.label} (no mechanism): {percent(reference.training.final.test_accuracy)}"
                 + ("" if chance is None else f"; chance is {percent(chance)}")]
    by_mechanism: dict[str, list[str]] = {}
    for s in trained:
        if s is reference:
            continue
        accuracy = s.training.final.test_accuracy
        line = f"{s.label}: {percent(accuracy)}" + ("" if reference is None else f" ({versus(s, reference)})")
        lost = None if reference is None else lost_share(accuracy, reference.training.final.test_accuracy, chance)
        flags = []
        if lost is not None and lost > POOR_SHARE:
            over = "chance" if chance is not None else "nothing"
            flags.append(f"poor utility: it lost {100 * lost:.0f} % of what training without a mechanism gains over "
                         f"{over} (flagged above {100 * POOR_SHARE:.0f} %)")
        if chance is not None and accuracy < NEAR_CHANCE * chance:
            flags.append("near chance: the model learns almost nothing")
        if not flags:
            lines.append(line)
            continue
        why = explanation(s, scale)
        lines.append(f"{line}; {'; '.join(flags)}." + (f" Why: {why}." if why else ""))
        found = levers(s, scale)
        if found:
            by_mechanism.setdefault(s.mechanism.name, found)
    # the levers once per mechanism (its settings share them), after its settings' lines
    return lines + [f"levers for {name} (its poor settings above): {'; '.join(found)}."
                    for name, found in by_mechanism.items()]
