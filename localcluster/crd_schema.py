"""An object checked against a CRD's structural schema before anything is applied, with the
apiserver's own wording for each refusal (`spec.x: Unsupported value: ...`), so that a bad
option stops the harness before a cluster starts rather than at its first `kubectl apply`.

It checks what the schema states field by field: type, enum, pattern, required, unknown
fields, list and string bounds, minimum and maximum. The CEL rules
(x-kubernetes-validations) are the apiserver's to evaluate and are not checked here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml


class SchemaError(ValueError):
    """The first violation found, as `<path>: <the apiserver's message>`."""


def version_schema(crd_file: Path, version: str) -> Mapping[str, Any]:
    """The openAPIV3Schema of `version` in a CRD file."""
    doc = yaml.safe_load(crd_file.read_text())
    for served in doc["spec"]["versions"]:
        if served["name"] == version:
            schema: Mapping[str, Any] = served["schema"]["openAPIV3Schema"]
            return schema
    raise SchemaError(f"{crd_file}: no version {version}")


_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


_JSON_TYPES = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    dict: "object",
    list: "array",
}


def check(value: Any, schema: Mapping[str, Any], path: str = "") -> None:
    """Raise SchemaError at the first field `value` breaks; `path` prefixes its name."""
    where = path or "<root>"
    kind = schema.get("type")
    if kind in _TYPES and value is not None:
        wrong_bool = kind in ("integer", "number") and isinstance(value, bool)
        if not isinstance(value, _TYPES[kind]) or wrong_bool:
            shown = _JSON_TYPES.get(type(value), type(value).__name__)
            raise SchemaError(
                f'{where}: Invalid value: "{shown}": {where} in body must be of type {kind}'
            )
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(f'"{v}"' for v in schema["enum"])
        raise SchemaError(f'{where}: Unsupported value: "{value}": supported values: {allowed}')
    if isinstance(value, str):
        _string(value, schema, where)
    if isinstance(value, int | float) and not isinstance(value, bool):
        _number(value, schema, where)
    if isinstance(value, dict):
        _object(value, schema, path)
    if isinstance(value, list):
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            raise SchemaError(
                f"{where}: Too many: {len(value)}: must have at most {schema['maxItems']} items"
            )
        if "minItems" in schema and len(value) < schema["minItems"]:
            raise _invalid(where, len(value), f"should have at least {schema['minItems']} items")
        for i, item in enumerate(value):
            check(item, schema.get("items") or {}, f"{path}[{i}]")


def _string(value: str, schema: Mapping[str, Any], where: str) -> None:
    pattern = schema.get("pattern")
    if pattern is not None and re.search(pattern, value) is None:
        raise SchemaError(
            f"{where}: Invalid value: \"{value}\": {where} in body should match '{pattern}'"
        )
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        raise SchemaError(f"{where}: Too long: may not be more than {schema['maxLength']} bytes")
    if "minLength" in schema and len(value) < schema["minLength"]:
        raise _invalid(where, f'"{value}"', f"should be at least {schema['minLength']} chars long")


def _number(value: float, schema: Mapping[str, Any], where: str) -> None:
    if "minimum" in schema and value < schema["minimum"]:
        raise _invalid(where, value, f"should be greater than or equal to {schema['minimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        raise _invalid(where, value, f"should be less than or equal to {schema['maximum']}")


def _object(value: Mapping[str, Any], schema: Mapping[str, Any], path: str) -> None:
    props: Mapping[str, Any] = schema.get("properties") or {}
    for name in schema.get("required") or ():
        if name not in value:
            raise SchemaError(f"{_join(path, name)}: Required value")
    extra = schema.get("additionalProperties")
    # An object with no properties listed (metadata, say) is the apiserver's to check.
    open_ended = (
        schema.get("x-kubernetes-preserve-unknown-fields")
        or extra is not None
        or "properties" not in schema
    )
    for key, item in value.items():
        if key in props:
            check(item, props[key], _join(path, key))
        elif isinstance(extra, Mapping):
            check(item, extra, _join(path, key))
        elif not open_ended and not _is_meta(path, key, schema):
            raise SchemaError(f'{path or "<root>"}: unknown field "{key}"')


def _is_meta(path: str, key: str, schema: Mapping[str, Any]) -> bool:
    """A top-level object's apiVersion, kind and metadata, which a CRD leaves to the
    apiserver."""
    return (
        path == ""
        and key in ("apiVersion", "kind", "metadata")
        and key not in (schema.get("properties") or {})
    )


def _invalid(where: str, shown: object, should: str) -> SchemaError:
    return SchemaError(f"{where}: Invalid value: {shown}: {where} in body {should}")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
