"""``auditkit mechanisms``: every registered mechanism with its claimed guarantee and rate, or one in detail."""
from __future__ import annotations

import textwrap
from typing import NamedTuple

import click
from rich.markup import escape
from rich.table import Table

from auditkit import mechanisms
from auditkit.cli.click_classes import AuditkitCommand
from auditkit.cli.errors import UsageFailure, run_guarded
from auditkit.cli.options import HelpArgument, plugin_option
from auditkit.cli.terminal import console

__all__ = ["WIDE_TABLE_MIN_WIDTH", "MechanismRow", "command", "mechanism_row"]


@click.command("mechanisms", cls=AuditkitCommand,
               help="List every registered mechanism with its claimed guarantee and rate (or one mechanism in detail).")
@click.argument("name", cls=HelpArgument, required=False, metavar="[NAME]",
                help="Show one mechanism's parameters and full claim.")
@plugin_option
def command(name: str | None, plugin: tuple[str, ...]) -> None:
    if name is None:
        run_guarded(_table)
    else:
        run_guarded(_detail, name)


# The 8-column table needs ~280 columns unwrapped; its rows wrap to ~4 lines each at 160 columns, 5 at 150 and
# 6 at 140, where the compact list (at most 3 lines each at 80 columns) reads better.
WIDE_TABLE_MIN_WIDTH = 160


class MechanismRow(NamedTuple):
    """One registered mechanism as the list shows it (numbers already formatted)."""

    name: str
    origin: str
    summary: str
    eps: str
    delta: str
    actual: str
    unit: str
    flags: str
    bits: str


def mechanism_row(name: str) -> MechanismRow:
    mechanism = mechanisms.create(name)
    mechanisms.preflight(mechanism)  # a plugin's bug: one line naming it (PluginCodeError)
    info = mechanisms.describe(name)
    claim = mechanism.guarantee()
    actual = mechanisms.capability(mechanism, "true_epsilon")
    return MechanismRow(
        name=info.name, origin=info.origin, summary=info.summary,
        eps="no privacy" if claim.epsilon is None else f"{claim.epsilon:.4g}",
        delta="-" if claim.epsilon is None else f"{claim.delta:.3g}",
        actual="-" if actual is None else f"{actual:.4g}",
        unit=claim.unit if claim.epsilon is not None else "-",
        flags=", ".join(sorted(claim.flags)) or "-", bits=f"{info.bits_per_coordinate:.2f}",
    )


def _table() -> None:
    rows = [mechanism_row(name) for name in mechanisms.names()]
    wide = console.width >= WIDE_TABLE_MIN_WIDTH
    if wide:
        _print_wide(rows)
    else:
        _print_compact(rows, console.width)
    console.print(
        "claimed eps: the mechanism's own one-round claim (`auditkit account NAME` composes it over rounds "
        "and checks it); eps as implemented: the epsilon of the noise the code really adds, where it is "
        "computed (flag claim-exceeded when larger); bits/coord: measured message size for a 10,000-coordinate "
        "update of l2 norm 1 (float32 = 32). `auditkit mechanisms NAME` lists the parameters"
        + ("." if wide else f" and the unit of privacy (the full table needs {WIDE_TABLE_MIN_WIDTH}+ columns).")
        + (" Mechanisms marked 'plugin' are registered by the module named."
           if any(row.origin != "built-in" for row in rows) else "")
    )


def _print_compact(rows: list[MechanismRow], width: int) -> None:
    """A narrow terminal's list: a line of numbers per mechanism, its description (and flags) wrapped below."""
    headers = ("name", "claimed eps", "delta", "eps as implemented", "bits/coord")
    cells = [(row.name, row.eps, row.delta, row.actual, row.bits) for row in rows]
    widths = [max(len(header), *(len(values[i]) for values in cells)) for i, header in enumerate(headers)]

    def line(values: tuple[str, ...]) -> str:
        return "  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(values, widths)))

    console.print("Registered mechanisms (default parameters)", style="bold", markup=False, highlight=False)
    console.print(line(headers), style="bold", markup=False, highlight=False)
    for row, values in zip(rows, cells):
        console.print(line(values), markup=False, highlight=False)
        detail = row.summary + ("" if row.flags == "-" else f" [flags: {row.flags}]") + (
            "" if row.origin == "built-in" else f" (plugin {row.origin})")
        console.print(textwrap.fill(detail, width=width, initial_indent="    ", subsequent_indent="    "),
                      markup=False, highlight=False, soft_wrap=True)


def _print_wide(rows: list[MechanismRow]) -> None:
    """A wide terminal's table: every column, the description wrapped in its cell."""
    table = Table(title="Registered mechanisms (default parameters)")
    table.add_column("name", style="bold", no_wrap=True)
    table.add_column("what it does")
    table.add_column("claimed eps", justify="right")
    table.add_column("delta", justify="right")
    table.add_column("eps as implemented", justify="right")
    table.add_column("unit of privacy")
    table.add_column("flags")
    table.add_column("bits/coord", justify="right")
    for row in rows:
        shown = escape(row.name) + ("" if row.origin == "built-in" else f"\n[dim]plugin {escape(row.origin)}[/dim]")
        table.add_row(shown, escape(row.summary), row.eps, row.delta, row.actual, escape(row.unit),
                      escape(row.flags), row.bits)
    console.print(table)


def _detail(name: str) -> None:
    try:
        mechanism = mechanisms.create(name)
    except ValueError as err:
        raise UsageFailure(str(err)) from None
    mechanisms.preflight(mechanism)  # a plugin's bug: one line naming it (PluginCodeError)
    info = mechanisms.describe(name)
    claim = mechanism.guarantee()
    console.print(f"[bold]{escape(info.name)}[/bold]: {escape(info.summary)}")
    if info.origin != "built-in":
        console.print(f"registered by plugin {info.origin}", markup=False, highlight=False)
    table = Table(title="parameters (CLI flag = --name with dashes; config key = name)")
    for column in ("name", "default", "allowed", "meaning"):
        table.add_column(column)
    for p in info.params:
        table.add_row(p.name, repr(p.default), escape(p.allowed), escape(p.help))
    console.print(table)
    console.print(f"claim (defaults): {escape(claim.summary())}", highlight=False)
    console.print(f"  unit: {claim.unit}; threat model: {claim.threat_model}", highlight=False, markup=False)
    for line in claim.assumptions:
        console.print(f"  assumes: {line}", highlight=False, markup=False)
    for line in claim.caveats:
        console.print(f"  caveat: {line}", highlight=False, markup=False)
    declared = [c for c in mechanisms.capabilities.CAPABILITIES if mechanisms.declared(mechanism, c)]
    generic = [c for c in mechanisms.capabilities.CAPABILITIES if c not in declared]
    console.print(f"audit capabilities declared: {', '.join(declared) or 'none'}; generic defaults: "
                  f"{', '.join(generic) or 'none'}", highlight=False, markup=False)
    console.print(f"bits/coord (reference update): {info.bits_per_coordinate:.3f}")
