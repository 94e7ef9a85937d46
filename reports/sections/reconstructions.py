"""The reconstructions section: the clean attack's grid once for the settings that share it, then each setting's
inversion and probe grids, with their captions (the HTML folds each setting's)."""
from __future__ import annotations

from dataclasses import dataclass

from auditkit.reports.sections.text import plural
from auditkit.results.model import Inversion, Probe, Setting


@dataclass(frozen=True)
class Reconstruction:
    """A grid (path relative to the results folder) and its caption."""

    path: str
    caption: str


@dataclass(frozen=True)
class SettingGrids:
    """A setting's grids: its label, a line of what they show (the mean SSIMs), and the grids themselves."""

    label: str
    summary: str
    grids: tuple[Reconstruction, ...]


@dataclass(frozen=True)
class Reconstructions:
    """The section: the clean references two or more settings share (one grid for all of them), then each setting's
    own grids (a clean reference no other setting shares is among them)."""

    references: tuple[Reconstruction, ...]
    settings: tuple[SettingGrids, ...]

    def paths(self) -> list[str]:
        """Every grid the section shows, each once, in order."""
        shown = [grid.path for grid in self.references]
        shown += [grid.path for block in self.settings for grid in block.grids]
        return list(dict.fromkeys(shown))


REFERENCES_NOTE = (
    "The clean attack (the same attack without a mechanism) is drawn once for the settings whose clean attack ran on "
    "the same inputs (same targets, model, round and seed: the same images); its references differ where the inputs "
    "do (a later round's model, or the probe's updates rescaled to each mechanism's clip). Each setting's own grids "
    "follow, the ground truth beside what the attack recovered from the defended view.")


def grid_paths(settings: list[Setting]) -> list[str]:
    """Every grid file the settings name (their inversion's and probe's grid and clean reference), each once."""
    paths = [path for s in settings for section in (s.inversion, s.probe) if section is not None
             for path in (section.figure, section.clean_figure) if path is not None]
    return list(dict.fromkeys(paths))


def reconstructions(settings: list[Setting]) -> Reconstructions:
    """The section's grids: each clean reference that two or more settings name once (``clean_figure``: settings
    whose clean attack ran on the same inputs share the file), then per setting its inversion's and probe's grids,
    preceded by a clean reference only it names. A document from before the clean references has its clean rows
    in each setting's grid: those grids are shown as they are."""
    users: dict[str, tuple[Inversion | Probe, list[str]]] = {}  # clean reference -> its first section, its users
    for s in settings:
        for section in (s.inversion, s.probe):
            if _shown(section) and section.clean_figure is not None:
                users.setdefault(section.clean_figure, (section, []))[1].append(s.label)
    shared = {path for path, (_, labels) in users.items() if len(labels) > 1}
    attacked = {kind: sum(_shown(getattr(s, kind)) for s in settings) for kind in ("inversion", "probe")}
    references = tuple(
        Reconstruction(path, _reference_caption(section, "every setting" if len(labels) == attacked[_kind(section)]
                                                else ", ".join(labels)))
        for path, (section, labels) in users.items() if path in shared)
    drawn = [s for s in settings if _shown(s.inversion) or _shown(s.probe)]
    blocks = []
    for s in drawn:
        grids = []
        for section, caption in ((s.inversion, _inversion_caption), (s.probe, _probe_caption)):
            if not _shown(section):
                continue
            if section.clean_figure is not None and section.clean_figure not in shared:
                grids.append(Reconstruction(section.clean_figure, _reference_caption(section, "this setting")))
            grids.append(Reconstruction(section.figure, caption(s.label, section)))
        blocks.append(SettingGrids(s.label, _summary(s), tuple(grids)))
    return Reconstructions(references, tuple(blocks))


def _shown(section: Inversion | Probe | None) -> bool:
    return section is not None and section.figure is not None


def _kind(section: Inversion | Probe) -> str:
    return "inversion" if isinstance(section, Inversion) else "probe"


def _reference_caption(section: Inversion | Probe, who: str) -> str:
    if isinstance(section, Inversion):
        return (f"Clean reference for {who}: {section.attack} on the clients' true updates at round {section.round}, "
                "no mechanism (rows: ground truth, the clean reconstruction with its SSIM).")
    return (f"Clean reference of the probe for {who}: {_probe_setup(section)}, the clean updates, no mechanism "
            "(rows: the client's example, the clean reconstruction with its SSIM).")


_IN_REFERENCE = "; the clean reconstruction is in the clean reference"


def _inversion_caption(label: str, inversion: Inversion) -> str:
    clean_row = inversion.clean_figure is None and inversion.clean is not None  # a grid drawn with its clean row
    names = ["ground truth", *(["clean"] if clean_row else []), "defended",
             *(view.name for view in inversion.views or [])]
    return (f"{label}: {inversion.attack} {attacked_view(inversion)} (rows: {', '.join(names)}"
            f"{_IN_REFERENCE if inversion.clean_figure else ''}).")


def _probe_caption(label: str, probe: Probe) -> str:
    clean_row = "" if probe.clean_figure else "the clean reconstruction, "
    return (f"{label}: inversion probe ({_probe_setup(probe)}; rows: the client's example, {clean_row}the defended "
            "one, and, where drawn, the candidate the identification adversary picked from the server's view"
            f"{_IN_REFERENCE if probe.clean_figure else ''}).")


def _probe_setup(probe: Probe) -> str:
    return (f"{probe.attack}, {probe.targets} clients with {plural(probe.batch_size, 'example')} each, "
            f"{plural(probe.local_steps, 'step')}, round {probe.round}")


def _summary(setting: Setting) -> str:
    """What a setting's fold holds: the attacks' mean SSIM, clean then defended."""
    parts = []
    for name, section in (("inversion", setting.inversion), ("probe", setting.probe)):
        if _shown(section):
            clean = "" if section.clean is None else f"{_ssim(section.clean.ssim_mean)} clean → "
            parts.append(f"{name} SSIM {clean}{_ssim(section.defended.ssim_mean)} defended")
    return "; ".join(parts)


def _ssim(value: float) -> str:
    return f"{round(value, 2) + 0.0:.2f}"  # + 0.0: -0.003 reads 0.00, not -0.00


def attacked_view(inversion: Inversion) -> str:
    """Which view was attacked: an FL round's, or ``auditkit attack``'s single-image gradients."""
    if inversion.round is None:
        return f"on the {inversion.view}'s view of single-image gradients"
    return f"on the {inversion.view}'s view at round {inversion.round}"
