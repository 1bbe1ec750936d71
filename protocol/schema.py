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

import msgpack

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


#: validated parameter sets remembered by :func:`validate` (a firmware sees the same few again and again)
MEMO_SIZE = 512
_memo: dict = {}


def validate(op: str, schema: dict, params: dict) -> dict:
    """Checked params with defaults filled in (a new dict). Raises InvalidArgument naming the parameter.

    The result of a parameter set seen before under the same schema object is remembered,
    keyed by its msgpack bytes (a task's parameters are the same from task to task: checking
    them again cost 5-20 µs of every task): a hit costs the packing. Parameters msgpack cannot
    carry are checked every time. Callers must not change the nested values they get.
    """
    try:
        key = (op, _packb(params))
    except Exception:          # not wire data (an in-process caller's numpy values): no memo
        return _validate(op, schema, params)
    hit = _memo.get(key)
    if hit is not None and hit[0] is schema:
        return dict(hit[1])
    out = _validate(op, schema, params)
    if len(_memo) >= MEMO_SIZE:
        del _memo[next(iter(_memo))]         # the oldest
    _memo[key] = (schema, out)
    return dict(out)


def _packb(value: Any) -> bytes:
    # msgpack.packb (3.4 µs) rather than one reused Packer (1.4 µs): a shared Packer is not safe
    # across threads, and a per-thread one would bring threading into this sans-I/O module
    return msgpack.packb(value, use_bin_type=True)


def _validate(op: str, schema: dict, params: dict) -> dict:
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
