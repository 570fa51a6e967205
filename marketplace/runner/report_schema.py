"""The JSON Schema of report.json, shipped in the package, and the reference page made from it.

``marketplace/report.schema.json`` says what every report holds: the keys common to every
protocol. Each registered protocol ships a fragment for its own sections
(:func:`marketplace.plugins.report_fragment`), and :func:`report_schema` joins them: a report may
hold the common keys and its protocol's sections, and no other top-level key; inside the sections
fields may be added. A fragment may refer to the common definitions (``#/$defs/party_id``, ...). ``docs/report.md``
is generated from it (``python -m
marketplace.runner.report_schema > docs/report.md``); a test keeps the two in step.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from marketplace import plugins

SCHEMA_FILE = "report.schema.json"


@cache
def report_schema() -> dict[str, Any]:
    """The schema (draft 2020-12): the common keys read from the installed package, ``protocol``
    restricted to the registered protocols, and one ``if protocol == name then its sections``
    branch per registered protocol with a fragment."""
    schema = json.loads(resources.files("marketplace").joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))
    schema["properties"]["protocol"]["enum"] = list(plugins.names())  # the file names no protocol
    branches = []
    for name in plugins.names():
        fragment = plugins.report_fragment(name)
        if fragment is None:
            continue
        for key in fragment["properties"]:
            schema["properties"].setdefault(key, {"description": "A protocol section; see the protocol's entry."})
        branches.append(
            {"if": {"properties": {"protocol": {"const": name}}, "required": ["protocol"]}, "then": fragment}
        )
    if branches:
        schema["allOf"] = branches
    return schema


def report_problems(report: Any) -> list[str]:
    """Every way ``report`` departs from the schema, as ``path: message`` lines (empty: it conforms).

    Needs the ``jsonschema`` package (a test dependency).
    """
    import jsonschema

    validator = jsonschema.Draft202012Validator(report_schema())
    return [
        f"{'/'.join(map(str, error.absolute_path)) or '<top>'}: {error.message[:300]}"
        for error in sorted(validator.iter_errors(report), key=lambda e: list(map(str, e.absolute_path)))
    ]


def _type(spec: dict[str, Any], defs: dict[str, Any]) -> str:
    if "$ref" in spec:
        return spec["$ref"].rsplit("/", 1)[-1]
    if "enum" in spec:
        return " \\| ".join(f"`{v}`" for v in spec["enum"])
    kind = spec.get("type", "any")
    kinds = kind if isinstance(kind, list) else [kind]
    shown = []
    for k in kinds:
        if k == "array" and "items" in spec and "$ref" in spec["items"]:
            shown.append(f"array of {_type(spec['items'], defs)}")
        elif k == "object" and isinstance(spec.get("additionalProperties"), dict) and not spec.get("properties"):
            key = "party" if spec.get("propertyNames") else "key"
            shown.append(f"{key} -> {_type(spec['additionalProperties'], defs)}")
        else:
            shown.append(k)
    return " or ".join(shown)


def _rows(properties: dict[str, Any], required: list[str], defs: dict[str, Any], prefix: str = "") -> list[str]:
    rows = []
    for key, spec in properties.items():
        text = " ".join(str(spec.get("description", "")).split())
        need = "yes" if key in required else ""
        rows.append(f"| `{prefix}{key}` | {_type(spec, defs)} | {need} | {text} |")
        inner = spec
        if isinstance(spec.get("additionalProperties"), dict) and spec["additionalProperties"].get("properties"):
            inner = spec["additionalProperties"]
            key = f"{key}.<party>" if spec.get("propertyNames") else f"{key}.<key>"
        elif spec.get("type") == "array" and isinstance(spec.get("items"), dict) and spec["items"].get("properties"):
            inner = spec["items"]
            key = f"{key}[]"
        if (
            inner.get("properties")
            and inner is not spec
            or (spec.get("properties") and len(spec["properties"]) > 1 and not prefix)
        ):
            rows += _rows(inner["properties"], inner.get("required", []), defs, prefix=f"{prefix}{key}.")
    return rows


def _table(properties: dict[str, Any], required: list[str], defs: dict[str, Any]) -> str:
    head = ["| key | type | required | what it holds |", "|---|---|---|---|"]
    return "\n".join(head + _rows(properties, required, defs))


def markdown() -> str:
    """docs/report.md: every field of report.json, generated from the schema."""
    schema = report_schema()
    defs = schema["$defs"]
    sections = {branch["if"]["properties"]["protocol"]["const"]: branch["then"] for branch in schema.get("allOf", ())}
    protocol_keys = {key for then in sections.values() for key in then["properties"]}
    common = {k: v for k, v in schema["properties"].items() if k not in protocol_keys}
    parts = [
        "# report.json, field by field",
        "",
        "<!-- Generated from marketplace/report.schema.json and each protocol's report.schema.json by "
        "`python -m marketplace.runner.report_schema > docs/report.md`; edit the schema, not this page. -->",
        "",
        "Every run writes `report.json` in its run folder (see the README for the folder's other files). "
        "The JSON Schema it follows ships with the package as `marketplace/report.schema.json` (draft 2020-12); "
        "any JSON Schema validator checks a report against it, for example "
        '`python -c "import json, jsonschema; from marketplace.runner.report_schema import report_schema; '
        "jsonschema.validate(json.load(open('RUN/report.json')), report_schema())\"`.",
        "",
        "The top-level keys are fixed: a report holds the keys common to every protocol and its protocol's "
        "sections, and nothing else. Inside the protocol sections, the privacy ledgers and the per-party details, "
        "fields may be added over time; the ones listed here are always there (`required`) or there when they apply.",
        "",
        "## Every report",
        "",
        _table(common, schema["required"], defs),
        "",
        "## A privacy ledger (`privacy.<name>`)",
        "",
        " ".join(defs["ledger"]["description"].split()),
        "",
        _table(defs["ledger"]["properties"], [], defs),
        "",
        "## The per-round history (`history`)",
        "",
        " ".join(defs["history"]["description"].split()),
        "",
        _table(defs["history"]["properties"], defs["history"]["required"], defs),
        "",
        "## A part of the world (`data.owners[]`, `data.validation`, `data.test`, `data.seed_set`)",
        "",
        _table(defs["part"]["properties"], defs["part"]["required"], defs),
    ]
    for protocol, then in sections.items():
        parts += ["", f"## `{protocol}` sections", "", _table(then["properties"], then["required"], defs)]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":  # pragma: no cover
    print(markdown(), end="")
