"""The reconstructions section: each inversion's and each probe's image grid, with its caption."""
from __future__ import annotations

from dataclasses import dataclass
from auditkit.reports.sections.text import plural
from auditkit.results.model import Inversion, Setting


@dataclass(frozen=True)
class Reconstruction:
    """A setting's reconstruction grid (path relative to the results folder) and its caption."""

    path: str
    caption: str


def reconstructions(settings: list[Setting]) -> list[Reconstruction]:
    """The grids the inversion stage drew, then the probe's: one per setting that drew one, each with its caption."""
    grids = []
    for s in settings:
        inversion = s.inversion
        if inversion is None or inversion.figure is None:
            continue
        rows = ["ground truth", *(["clean"] if inversion.clean is not None else []), "defended",
                *(view.name for view in inversion.views or [])]
        grids.append(Reconstruction(path=inversion.figure, caption=f"{s.label}: {inversion.attack} "
                                    f"{attacked_view(inversion)} (rows: {', '.join(rows)})."))
    for s in settings:
        probe = s.probe
        if probe is not None:
            grids.append(Reconstruction(path=probe.figure, caption=(
                f"{s.label}: inversion probe ({probe.attack}, {probe.targets} clients with "
                f"{plural(probe.batch_size, 'example')} each, {plural(probe.local_steps, 'step')}, round "
                f"{probe.round}; rows: the client's example, the clean reconstruction, the defended one, and, "
                f"where drawn, the candidate the identification adversary picked from the server's view).")))
    return grids


def attacked_view(inversion: Inversion) -> str:
    """Which view was attacked: an FL round's, or ``auditkit attack``'s single-image gradients."""
    if inversion.round is None:
        return f"on the {inversion.view}'s view of single-image gradients"
    return f"on the {inversion.view}'s view at round {inversion.round}"
