"""The report's one colour language: verdict colours (the badges' colours) mean a verdict and nothing else;
mechanisms and settings are told apart by marker, line style and a neutral palette that shares no hue with a
verdict."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from auditkit.results.model import Setting

# the badges' colours (templates/base.html.j2): only ever a verdict
VERDICT_COLOURS = {"consistent": "#2e7d32", "violated": "#c62828", "claim holds only cell-locally": "#c62828",
                   "vacuous claim": "#ef6c00", "inconclusive": "#757575", "no claim": "#bdbdbd"}
OTHER_VERDICT_COLOUR = "#37474f"

# neutral, no green, red or orange: navy, steel blue, purple, brown, black, slate, plum, sky
NEUTRAL_PALETTE = ("#1f3b73", "#4a90c2", "#6a3d9a", "#8c6d31", "#111111", "#5d6d7e", "#9e4f8f", "#7fb3d5")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")
LINESTYLES = ("-", "--", "-.", ":")
CEILING_COLOUR = "#111111"  # the run without a mechanism, drawn as a reference line


def mechanism_styles(names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Mechanism name -> matplotlib style (color, marker, linestyle), in order of first appearance: a neutral
    colour, a marker and a line style each, so a mechanism reads apart in greyscale too."""
    unique = list(dict.fromkeys(names))
    return {name: {"color": NEUTRAL_PALETTE[i % len(NEUTRAL_PALETTE)], "marker": MARKERS[i % len(MARKERS)],
                   "linestyle": LINESTYLES[i % len(LINESTYLES)]} for i, name in enumerate(unique)}


def _shade(colour: str, amount: float) -> str:
    """``colour`` mixed towards white by ``amount`` in [0, 1] (0: the colour itself)."""
    rgb = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * amount):02x}" for c in rgb)


def setting_styles(settings: Sequence[Setting]) -> dict[str, dict[str, Any]]:
    """Setting id -> matplotlib style, distinct for every setting: its mechanism's marker and line style, and
    the mechanism's colour lightened step by step for the mechanism's later settings (the first the strongest)."""
    families: dict[str, list[str]] = {}
    for s in settings:
        families.setdefault(s.mechanism.name, []).append(s.id)
    base = mechanism_styles(list(families))
    styles = {}
    for name, ids in families.items():
        for j, setting_id in enumerate(ids):
            amount = 0.0 if len(ids) == 1 else 0.55 * j / (len(ids) - 1)
            styles[setting_id] = {**base[name], "color": _shade(base[name]["color"], amount)}
    return styles


def verdict_colour(verdict: str) -> str:
    """The badge colour of ``verdict`` (an unknown verdict: a dark slate, never a verdict's colour)."""
    return VERDICT_COLOURS.get(verdict, OTHER_VERDICT_COLOUR)
