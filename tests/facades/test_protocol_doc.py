"""The protocol docs match the code: every method's parameter and result tables in
docs/methods.md are generated from the shared schema, and docs/protocol.md's error
table from cone.errors.

Regenerate the tables with `python -m tests.facades.test_protocol_doc`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cone import errors
from cone.facades.jsonrpc import _errors as protocol_errors
from cone.schema import Method, methods

DOCS = Path(__file__).resolve().parents[2] / "docs"
PROTOCOL_DOC = DOCS / "protocol.md"
#: Which page holds each generated region.
PAGES = {"errors": PROTOCOL_DOC, "methods": DOCS / "methods.md"}


def _type(schema: dict[str, Any]) -> str:
    kind = schema.get("type")
    if kind is None:
        return "any JSON"
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    if schema.get("format") == "date-time":
        return "string (RFC 3339)"
    if schema.get("contentEncoding") == "base64":
        return "string (base64)"
    if kind == "object":
        return "object"
    return str(kind)


def _constraints(schema: dict[str, Any]) -> str:
    parts = []
    if "minimum" in schema or "maximum" in schema:
        parts.append(f"{schema.get('minimum', '')}–{schema.get('maximum', '')}")
    if "minLength" in schema:
        parts.append(f"{schema['minLength']}–{schema.get('maxLength', '')} chars")
    elif "maxLength" in schema:
        parts.append(f"≤ {schema['maxLength']} chars")
    if "pattern" in schema:
        parts.append(f"`{schema['pattern']}`")
    if "minItems" in schema or "maxItems" in schema:
        parts.append(f"{schema.get('minItems', 0)}–{schema.get('maxItems', '')} items")
    items = schema.get("items", {})
    if "pattern" in items:
        parts.append(f"items `{items['pattern']}`")
    if "default" in schema:
        parts.append(f"default `{json.dumps(schema['default'])}`")
    return "; ".join(parts)


def params_table(method: Method) -> str:
    """The parameter table of a method, as docs/protocol.md shows it."""
    props = method.params_schema["properties"]
    if not props:
        return "Parameters: none (omit `params`, or send `{}`)."
    required = set(method.params_schema.get("required", []))
    rows = ["| parameter | type | required | limits | meaning |", "| --- | --- | --- | --- | --- |"]
    for name, schema in props.items():
        kind = _type(schema)
        if schema.get("type") == "object" and "properties" in schema:
            kind = f"{kind}: {{{_fields(schema)}}}"
        rows.append(
            f"| `{name}` | {kind} | {'yes' if name in required else 'no'} | "
            f"{_constraints(schema)} | {schema.get('description', '')} |"
        )
    return "\n".join(rows)


def _fields(schema: dict[str, Any]) -> str:
    required = set(schema.get("required", []))
    parts = []
    for name, prop in schema["properties"].items():
        inner = prop.get("items", prop)
        kind = _type(prop)
        if inner.get("type") == "object" and "properties" in inner:
            kind = f"{kind}: {{{_fields(inner)}}}"
        parts.append(f"`{name}` ({kind}{'' if name in required else ', when set'})")
    return ", ".join(parts)


def result_fields(method: Method) -> str:
    """The result's fields, as docs/protocol.md shows them."""
    return f"Result: {_fields(method.result_schema)}."


def error_table() -> str:
    """Codes of every error class, as docs/protocol.md shows them."""
    rows = ["| code | error | default reason |", "| --- | --- | --- |"]
    classes = [
        protocol_errors.ParseError,
        protocol_errors.InvalidRequest,
        protocol_errors.LineTooLong,
        protocol_errors.MethodNotFound,
    ]
    for cls in classes:
        rows.append(f"| {cls.code} | {cls.__name__} | `{cls.reason}` |")
    for cone_cls in [
        errors.InvalidArgument,
        errors.Unavailable,
        errors.NotFound,
        errors.Conflict,
        errors.FailedPrecondition,
        errors.RateLimited,
        errors.StateError,
        errors.NoIdentity,
        errors.TargetError,
        errors.Internal,
    ]:
        rows.append(
            f"| {cone_cls.jsonrpc_code} | {cone_cls.__name__} | `{cone_cls.default_reason}` |"
        )
    return "\n".join(rows)


def generated() -> dict[str, str]:
    """The generated regions of the doc, by marker name."""
    blocks = [
        f"### `{m.name}`\n\n{m.summary}\n\n{params_table(m)}\n\n{result_fields(m)}"
        for m in methods().values()
    ]
    return {"errors": error_table(), "methods": "\n\n".join(blocks)}


def _region(name: str) -> tuple[str, str]:
    return f"<!-- generated: {name} -->\n", f"\n<!-- end generated: {name} -->"


def rewrite(text: str, names: list[str] | None = None) -> str:
    """The doc with its generated regions (`names`, or all) replaced by what the code
    says now."""
    for name, body in generated().items():
        if names is not None and name not in names:
            continue
        start, end = _region(name)
        head, _, rest = text.partition(start)
        _, _, tail = rest.partition(end)
        text = f"{head}{start}{body}{end}{tail}"
    return text


@pytest.mark.parametrize("name", list(generated()))
def test_the_protocol_doc_matches_the_schema_and_error_table(name: str) -> None:
    page = PAGES[name]
    text = page.read_text()
    start, end = _region(name)
    assert start in text and end in text, f"docs/{page.name} lacks the {name} region"
    assert rewrite(text, [name]) == text, (
        f"docs/{page.name} is out of step with the code: "
        "run `python -m tests.facades.test_protocol_doc` to regenerate its tables"
    )


if __name__ == "__main__":
    for region, page in PAGES.items():
        page.write_text(rewrite(page.read_text(), [region]))
