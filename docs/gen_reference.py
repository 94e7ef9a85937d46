"""Generate the reference pages from the code at build time (run by ``mkdocs-gen-files``).

* ``reference/api/...``: one page per public module of the installed ``auditkit`` namespace (walked, never
  listed here: ``griffe_auditkit.modules``), rendered by mkdocstrings;
* ``reference/mechanisms.md``: the registry (``auditkit.mechanisms``), as ``auditkit mechanisms`` lists it;
* ``reference/config.md``: the keys of the config dataclasses (``auditkit.config``) and of the round protocols'
  tables, with their types, defaults, the choices the validation allows and the comments beside them;
* ``reference/cli.md``: after the commands (mkdocs-click), the mechanism flags every such command takes;
* ``reference/bibliography.md``: ``auditkit.bibliography.PAPERS``, when that module exists;
* ``reference/results-schema.md``: the JSON Schema of results.json and reproduction.json, generated from their
  pydantic models (``auditkit.results.ResultsDocument``, ``auditkit.results.Reproduction``), and the two schema
  files themselves;
* ``reference/SUMMARY.md``: the Reference section's navigation (mkdocs-literate-nav).
"""
from __future__ import annotations

import ast
import dataclasses
import importlib
import json
import inspect
import sys
import textwrap
import tokenize
import types
import typing
from io import StringIO
from pathlib import Path

import click
import mkdocs_gen_files

sys.path.insert(0, str(Path(__file__).resolve().parent))
from griffe_auditkit import modules, plain  # noqa: E402

PIPE = "&#x7C;"


def cell(text: object) -> str:
    """``text`` as one Markdown table cell of prose."""
    text = " ".join(str(text).split()).replace("|", PIPE)
    for char in "[]*":  # never a link (or an autorefs cross-reference), never emphasis
        text = text.replace(char, "\\" + char)
    return text


def code(value: object) -> str:
    """A value as inline code in a table cell (the tables extension never splits a cell at a ``|`` in code)."""
    text = repr(value) if not isinstance(value, str) else f'"{value}"'
    return f"`{' '.join(text.split())}`"


def code_text(text: str) -> str:
    """Text as inline code in a table cell."""
    return f"`{' '.join(text.split())}`"


def table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def prose(docstring: str | None) -> str:
    """A docstring as Markdown prose (reST's ``::`` and roles made plain)."""
    return plain(inspect.cleandoc(docstring)) if docstring else ""


# ------------------------------------------------------------------ API pages

nav = mkdocs_gen_files.Nav()
for name in modules():
    parts = tuple(name.split("."))
    page = Path("reference", "api", *parts[1:]) if len(parts) > 1 else Path("reference", "api")
    is_package = any(other.startswith(name + ".") for other in modules())
    doc = (page / "index.md") if is_package or len(parts) == 1 else page.with_suffix(".md")
    nav[parts] = doc.relative_to("reference").as_posix()
    with mkdocs_gen_files.open(doc, "w") as fd:
        fd.write(f"# `{name}`\n\n::: {name}\n")
    mkdocs_gen_files.set_edit_path(doc, Path("docs", "gen_reference.py"))


# ------------------------------------------------------------------ mechanisms (the registry)


def mechanisms_page() -> str:
    from auditkit import mechanisms
    from auditkit.cli.mechanisms import mechanism_row  # what `auditkit mechanisms` prints, row by row

    rows = [mechanism_row(name) for name in mechanisms.names()]
    out = ['<div class="prose-column" markdown>\n', table(
        ["name", "what it does", "claim (eps, delta)", "eps as implemented", "flags", "bits/coord"],
        [[f"[`{r.name}`](#{r.name.replace('+', '')})" + ("" if r.origin == "built-in" else f" (plugin {r.origin})"),
          cell(r.summary), r.eps if r.delta == "-" else f"{r.eps}, {r.delta}", r.actual,
          cell(r.flags.replace(", ", " ")), r.bits] for r in rows]), "</div>\n"]
    out.append(
        "*claim*: the mechanism's own one-round claim at its default parameters; *eps as implemented*: the "
        "epsilon of the noise the code really adds, where it is computed; *bits/coord*: the measured message size "
        "for a 10,000-coordinate update of l2 norm 1 (float32 = 32).\n")
    capabilities = mechanisms.capabilities.CAPABILITIES
    for row in rows:
        mechanism = mechanisms.create(row.name)
        claim = mechanism.guarantee()
        cls = mechanisms.mechanism_class(row.name)
        out.append(f"## `{row.name}` {{#{row.name.replace('+', '')}}}\n\n{cell(row.summary)}\n")
        if row.origin != "built-in":
            out.append(f"Registered by plugin `{row.origin}`.\n")
        out.append(f"Class: `{cls.__module__}.{cls.__qualname__}`. Unit of privacy: {cell(row.unit)}.\n")
        if cls.params_spec:
            out.append(table(["parameter (flag, config key)", "default", "allowed", "meaning"],
                             [[f"`{p.name}` (`--{p.name.replace('_', '-')}`)", code(p.default), cell(p.allowed),
                               cell(p.help)] for p in cls.params_spec]))
        out.append(f"**Claim at the defaults:** {cell(claim.summary())}\n")
        notes = [f"- assumes: {cell(line)}" for line in claim.assumptions]
        notes += [f"- caveat: {cell(line)}" for line in claim.caveats]
        if notes:
            out.append("\n".join(notes) + "\n")
        declared = [c for c in capabilities if mechanisms.declared(mechanism, c)]
        out.append(f"Audit capabilities declared: {', '.join(f'`{c}`' for c in declared) or 'none'}.\n")
    return "\n".join(out)


# ------------------------------------------------------------------ config keys


def _comments(cls: type) -> dict[str, str]:
    """The comment beside each field of a dataclass, read from its source."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    comments = {tok.start[0]: tok.string.lstrip("#").strip()
                for tok in tokenize.generate_tokens(StringIO(source).readline) if tok.type == tokenize.COMMENT}
    fields = {}
    for node in ast.parse(source).body[0].body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.lineno in comments:
            fields[node.target.id] = comments[node.lineno]
    return fields


def _choices(module: types.ModuleType) -> dict[str, tuple]:
    """``section.key`` -> the values the config's validation allows (its ``_choice(value, ALLOWED, "key")`` calls)."""
    found = {}
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_choice"
                and len(node.args) == 3 and isinstance(node.args[2], ast.Constant)):
            try:
                allowed = eval(compile(ast.Expression(node.args[1]), "<config>", "eval"), vars(module))
            except Exception:  # an expression of local names: not shown
                continue
            found[node.args[2].value] = tuple(allowed)
    return found


def _type_name(annotation: object) -> str:
    text = str(annotation).replace("typing.", "")
    return text if not isinstance(annotation, type) else annotation.__name__


def _default(field: dataclasses.Field) -> str:
    if field.default is not dataclasses.MISSING:
        return code(list(field.default) if isinstance(field.default, tuple) else field.default)
    if field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        value = field.default_factory()  # type: ignore[misc]
        return "(table)" if dataclasses.is_dataclass(value) else code(value)
    return "(required)"


def _flags() -> dict[str, tuple[str, str]]:
    """``section.key`` -> (the ``audit`` command's flag that sets it, that flag's help): the options of
    ``auditkit.cli.audit.CONFIG_KEYS`` (option name -> config key) and the ``--dp-sgd-KEY`` flags, one per field of
    ``auditkit.fl.spec.DPSGDSpec``, looked up in the click command itself."""
    from auditkit.cli.app import build_cli
    from auditkit.cli.audit import CONFIG_KEYS
    from auditkit.fl.spec import DPSGDSpec

    params = build_cli().commands["audit"].params
    by_name = {param.name: param for param in params if isinstance(param, click.Option)}
    by_flag = {opt: param for param in by_name.values() for opt in param.opts}

    def described(option: click.Option) -> tuple[str, str]:
        flag = next((o for o in option.opts if o.startswith("--")), option.opts[0])
        return flag, " ".join((option.help or "").split())

    found = {key: described(by_name[name]) for name, key in CONFIG_KEYS.items() if name in by_name}
    for field in dataclasses.fields(DPSGDSpec):
        option = by_flag.get(f"--dp-sgd-{field.name.replace('_', '-')}")
        if option is not None:
            flag, flag_help = described(option)
            found[f"dp_sgd.{field.name}"] = (flag, field.metadata.get("help") or flag_help)
    return found


EXAMPLE = Path(__file__).resolve().parent / "examples" / "audit.toml"


def _example_comments() -> dict[str, str]:
    """``section.key`` -> the comment beside it in the annotated example config (``docs/examples/audit.toml``),
    where neither the dataclass nor a flag explains a key."""
    import re

    found, section = {}, ""
    line_re = re.compile(r"^#?\s*([A-Za-z_]+)\s*=\s*[^#]*#\s*(.+)$")
    for line in EXAMPLE.read_text(encoding="utf-8").splitlines() if EXAMPLE.is_file() else ():
        header = re.match(r"^#?\s*\[\[?([A-Za-z_]+)\]\]?", line)
        if header:
            section = header.group(1)
            continue
        match = line_re.match(line)
        if match:
            found.setdefault(f"{section}.{match.group(1)}" if section else match.group(1), match.group(2).strip())
    return found


def _key_rows(cls: type, prefix: str, choices: dict[str, tuple], flags: dict[str, tuple[str, str]],
              skip=()) -> list[list[str]]:
    examples = _example_comments()
    hints = typing.get_type_hints(cls)
    comments = _comments(cls)
    rows = []
    for field in dataclasses.fields(cls):
        if field.name in skip or dataclasses.is_dataclass(hints[field.name]):
            continue
        key = f"{prefix}.{field.name}" if prefix else field.name
        flag, flag_help = flags.get(key, ("", ""))
        meaning = comments.get(field.name) or flag_help or examples.get(key, "")
        allowed = choices.get(key)
        if allowed:
            listed = ", ".join(f"`{c}`" for c in allowed)
            rest = meaning.replace(" | ".join(allowed), "").strip(" :;.")  # a help text that lists them itself
            meaning = f"one of {listed}" + (f". {rest}" if rest else "")
        rows.append([f"`{field.name}`", code_text(_type_name(hints[field.name])), _default(field), cell(meaning),
                     f"`{flag}`" if flag else ""])
    return rows


def config_page() -> str:
    from auditkit import config, mechanisms

    choices, flags = _choices(config), _flags()
    headers = ["key", "type", "default", "meaning", "flag"]
    hints = typing.get_type_hints(config.AuditConfig)
    out = ["## Top level {#top-level}\n", prose(config.AuditConfig.__doc__) + "\n",
           table(headers, _key_rows(config.AuditConfig, "", choices, flags, skip=("mechanisms", "tables")))]
    for field in dataclasses.fields(config.AuditConfig):
        kind = hints[field.name]
        if field.name == "mechanisms":
            out += [f"## `[mechanism]` or `[[mechanisms]]` {{#mechanisms}}\n",
                    prose(config.MechanismConfig.__doc__) + "\n",
                    "Besides these keys, a mechanism table holds the mechanism's own parameters (any parameter "
                    "of the named mechanism: see [Mechanisms](mechanisms.md)), `target_eps` (the noise calibrated "
                    "to that one-round claim) and the options of its round protocol (below).\n",
                    table(headers, [
                        ["`name`", "`str`", code(config.MechanismConfig().name), "a registered mechanism",
                         "`--mechanism`"],
                        ["`label`", "`str`", "`None`", "display name in reports (default: the name and parameters)",
                         ""],
                        ["`sweep`", "`table of lists`", "`{}`",
                         "parameter = [values]: one setting per combination of the listed values", ""],
                    ])]
        elif dataclasses.is_dataclass(kind):
            out += [f"## `[{field.name}]` {{#{field.name}}}\n", prose(kind.__doc__) + "\n",
                    table(headers, _key_rows(kind, field.name, choices, flags))]
    for name in mechanisms.protocol_names():
        protocol = mechanisms.protocol_class(name)
        options = getattr(protocol, "options", ())
        if options:
            out += [f"## Options of the `{name}` round protocol {{#protocol-{name}}}\n",
                    f"Keys of a mechanism table whose mechanism trains with `{protocol.__module__}."
                    f"{protocol.__qualname__}`.\n",
                    table(["key", "default", "allowed", "meaning"],
                          [[f"`{p.name}`", code(p.default), cell(p.allowed), cell(p.help)] for p in options])]
        if getattr(protocol, "table", None):
            kind = protocol.table_type
            out += [f"## `[{protocol.table}]` {{#{protocol.table}}}\n", prose(kind.__doc__) + "\n",
                    f"Read by the `{name}` round protocol (`{protocol.__module__}.{protocol.__qualname__}`).\n",
                    table(headers, _key_rows(kind, protocol.table, choices, flags))]
    return "\n".join(out)


# ------------------------------------------------------------------ CLI: the mechanism flags


def mechanism_flags_section() -> str:
    from auditkit.cli.mechanism_flags import mechanism_flags

    rows = []
    for flag in mechanism_flags():
        texts: dict[str, list[str]] = {}
        for mechanism, spec in flag.specs:
            texts.setdefault(f"{spec.help} ({spec.allowed}; default `{spec.default!r}`)", []).append(mechanism)
        meaning = "<br>".join(f"{', '.join(f'`{m}`' for m in names)}: {cell(text)}" for text, names in texts.items())
        rows.append([f"`{flag.flag}`", code_text(flag.metavar), meaning])
    return table(["flag", "value", "mechanisms that have it: meaning (allowed; default)"], rows)


# ------------------------------------------------------------------ bibliography


def bibliography_page() -> str | None:
    """The papers of ``auditkit.bibliography`` (None while that module does not exist)."""
    try:
        bibliography = importlib.import_module("auditkit.bibliography")
    except ImportError:
        return None
    papers = getattr(bibliography, "PAPERS", None)
    if not papers:
        return None
    out = ["# Bibliography\n", prose(bibliography.__doc__) + "\n"]
    for key, paper in papers.items():
        short = getattr(paper, "short", "")
        out.append(f"## {key}{': ' + short if short else ''} {{#paper-{key}}}\n")
        citation = cell(paper.citation() if hasattr(paper, "citation") else paper)
        url = getattr(paper, "url", None)
        if url:
            citation = citation.replace(url, f"<{url}>") if url in citation else f"{citation} <{url}>"
        out.append(citation + "\n")
        note = getattr(paper, "note", "")
        if note:
            out.append(f"Note: {cell(note)}\n")
    return "\n".join(out)


def results_schema_pages() -> dict[str, str]:
    """The results schema's page and its two JSON Schema files, from the models."""
    results = importlib.import_module("auditkit.results")
    schemas = {"results.schema.json": results.ResultsDocument, "reproduction.schema.json": results.Reproduction}
    files = {f"reference/{name}": json.dumps(model.model_json_schema(by_alias=True), indent=2) + "\n"
             for name, model in schemas.items()}
    out = [f"# Results schema (`{results.SCHEMA}`, version {results.SCHEMA_VERSION})\n",
           "Every command writes one JSON document in this schema (strict JSON: NaN and the infinities are the strings "
           "\"NaN\", \"Infinity\" and \"-Infinity\"); `auditkit report` renders any of them, and reads every older "
           "version auditkit wrote, upgraded in memory. The schemas below are generated from the models in "
           "`auditkit.results` (`ResultsDocument`, `Reproduction`), which also check every document before it is "
           "written.\n"]
    for name, model in schemas.items():
        out.append(f"## {model.__name__}: [{name}]({name})\n\n{prose(model.__doc__)}\n")
        out.append(f"```json\n{files[f'reference/{name}']}```\n")
    return {"reference/results-schema.md": "\n".join(out), **files}


# ------------------------------------------------------------------ write

for page, text in (("reference/mechanisms.md", mechanisms_page()), ("reference/config.md", config_page()),
                   ("reference/cli.md", mechanism_flags_section())):
    with mkdocs_gen_files.open(page, "a") as fd:  # appended to the page's hand-written introduction
        fd.write("\n" + text)

bibliography = bibliography_page()
if bibliography is not None:
    with mkdocs_gen_files.open("reference/bibliography.md", "w") as fd:
        fd.write(bibliography)

for page, text in results_schema_pages().items():
    with mkdocs_gen_files.open(page, "w") as fd:
        fd.write(text)

with mkdocs_gen_files.open("reference/SUMMARY.md", "w") as fd:
    fd.write("* [Command line](cli.md)\n* [Mechanisms](mechanisms.md)\n* [Config keys](config.md)\n"
             "* [Results schema](results-schema.md)\n")
    if bibliography is not None:
        fd.write("* [Bibliography](bibliography.md)\n")
    fd.write("* API\n")
    fd.writelines("    " + line for line in nav.build_literate_nav())
