"""Operator parameter schemas and their validation (pure; used on the DSP side).

A schema maps a parameter name to a spec dict::

    {"type": "int", "default": 3, "min": 1, "max": 31, "odd": True}
    {"type": "float", "min": 0.0}
    {"type": "str", "choices": ["reflect101", "constant"]}
    {"type": "int_list", "len": 2}

Types: int, float, bool, str, bytes, int_list, float_list, any. A spec without
``default`` is required. Specs travel in the operator table (READY) and in
firmware manifests, so they are plain data.
"""
from __future__ import annotations

import math
from typing import Any

from . import errors

_SCALARS = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,), "bytes": (bytes,)}
_LISTS = {"int_list": (int,), "float_list": (int, float)}
TYPES = frozenset(_SCALARS) | frozenset(_LISTS) | {"any"}
_KEYS = {"type", "default", "min", "max", "choices", "odd", "len", "doc"}


def check_schema(schema: dict) -> dict:
    """Validate a schema itself (at registration). Raises ValueError; returns it."""
    for name, spec in schema.items():
        if not isinstance(name, str) or not isinstance(spec, dict):
            raise ValueError(f"parameter {name!r}: spec must be a dict")
        unknown = set(spec) - _KEYS
        if unknown:
            raise ValueError(f"parameter {name!r}: unknown spec keys {sorted(unknown)}")
        if spec.get("type") not in TYPES:
            raise ValueError(f"parameter {name!r}: type must be one of {sorted(TYPES)}")
        if "default" in spec and not (spec["default"] is None or _default_ok(name, spec)):
            raise ValueError(f"parameter {name!r}: default {spec['default']!r} does not satisfy its own spec")
    return schema


def _default_ok(name: str, spec: dict) -> bool:
    try:
        _check_value("schema", name, spec, spec["default"])
    except errors.InvalidArgument:
        return False
    return True


def _type_ok(value: Any, kind: str) -> bool:
    if kind == "any":
        return True
    if kind in _LISTS:
        return isinstance(value, list) and all(_type_ok(v, kind[:-5]) for v in value)
    if isinstance(value, bool) and kind != "bool":
        return False
    return isinstance(value, _SCALARS[kind])


def _check_value(op: str, name: str, spec: dict, value: Any) -> Any:
    kind = spec["type"]
    if not _type_ok(value, kind):
        raise errors.InvalidArgument(f"{op}: parameter {name!r} must be {kind}, got {type(value).__name__} {value!r:.40}")
    items = value if kind in _LISTS else [value]
    if kind in ("float", "float_list") and not all(math.isfinite(v) for v in items):
        raise errors.InvalidArgument(f"{op}: parameter {name!r} must be finite, got {value!r:.40}")
    if "len" in spec and len(value) != spec["len"]:
        raise errors.InvalidArgument(f"{op}: parameter {name!r} must have {spec['len']} elements, got {len(value)}")
    for v in items:
        if "min" in spec and v < spec["min"]:
            raise errors.InvalidArgument(f"{op}: parameter {name!r} must be >= {spec['min']}, got {v}")
        if "max" in spec and v > spec["max"]:
            raise errors.InvalidArgument(f"{op}: parameter {name!r} must be <= {spec['max']}, got {v}")
        if spec.get("odd") and v % 2 == 0:
            raise errors.InvalidArgument(f"{op}: parameter {name!r} must be odd, got {v}")
    if "choices" in spec and value not in spec["choices"]:
        raise errors.InvalidArgument(f"{op}: parameter {name!r} must be one of {spec['choices']}, got {value!r}")
    if kind == "float":
        return float(value)
    return value


def validate(op: str, schema: dict, params: dict) -> dict:
    """Checked params with defaults filled in. Raises InvalidArgument naming the parameter."""
    unknown = set(params) - set(schema)
    if unknown:
        raise errors.InvalidArgument(f"{op}: unknown parameter(s) {sorted(unknown)}; accepted: {sorted(schema)}")
    out = {}
    for name, spec in schema.items():
        if name in params:
            out[name] = _check_value(op, name, spec, params[name])
        elif "default" in spec:
            out[name] = spec["default"]
        else:
            raise errors.InvalidArgument(f"{op}: missing required parameter {name!r}")
    return out
