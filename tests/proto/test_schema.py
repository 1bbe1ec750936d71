"""protocol.schema: operator parameter validation (as a firmware applies it to a TASK's params)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from protocol import errors
from protocol.schema import check_schema, validate

INVALID_ARGUMENT = -6000001

BLUR = {
    "ksize": {"type": "int", "default": 3, "min": 1, "max": 31, "odd": True},
    "sigma": {"type": "float", "min": 0.0},
    "border": {"type": "str", "default": "reflect101", "choices": ["reflect101", "constant"]},
    "anchor": {"type": "int_list", "len": 2, "default": [-1, -1], "min": -1},
}


def bad(schema, params, *fragments):
    """validate must raise InvalidArgument whose message contains every fragment."""
    with pytest.raises(errors.InvalidArgument) as info:
        validate("blur", schema, params)
    assert type(info.value) is errors.InvalidArgument
    assert info.value.code == INVALID_ARGUMENT
    for f in fragments:
        assert f in info.value.message, info.value.message
    return info.value


# --- defaults, required, unknown -------------------------------------------------------------

def test_defaults_are_filled_in():
    assert validate("blur", BLUR, {"sigma": 1.5}) == {"ksize": 3, "sigma": 1.5, "border": "reflect101",
                                                      "anchor": [-1, -1]}


def test_given_values_override_defaults():
    out = validate("blur", BLUR, {"ksize": 5, "sigma": 0.0, "border": "constant", "anchor": [2, 0]})
    assert out == {"ksize": 5, "sigma": 0.0, "border": "constant", "anchor": [2, 0]}


def test_validate_does_not_mutate_params():
    params = {"sigma": 2}
    validate("blur", BLUR, params)
    assert params == {"sigma": 2}


def test_required_parameter_missing():
    bad(BLUR, {}, "'sigma'", "missing")


def test_unknown_parameter():
    e = bad(BLUR, {"sigma": 1.0, "kernel": 3}, "kernel")
    assert "blur" in e.message  # names the operator too


def test_empty_schema_accepts_only_empty_params():
    assert validate("ping", {}, {}) == {}
    bad({}, {"x": 1}, "x")


# --- types -----------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [True, False, 3.0, "3", None, [3]])
def test_int_rejects_non_int(value):
    bad({"n": {"type": "int"}}, {"n": value}, "'n'", "int")


@pytest.mark.parametrize("value", [True, False, "1.0", None, [1.0]])
def test_float_rejects_non_number(value):
    bad({"x": {"type": "float"}}, {"x": value}, "'x'", "float")


def test_float_accepts_int_and_returns_float():
    out = validate("op", {"x": {"type": "float"}}, {"x": 3})
    assert out == {"x": 3.0}
    assert type(out["x"]) is float


@pytest.mark.parametrize("value", [0, 1, "true", None])
def test_bool_rejects_non_bool(value):
    bad({"flag": {"type": "bool"}}, {"flag": value}, "'flag'", "bool")


def test_bool_accepts_bool():
    assert validate("op", {"flag": {"type": "bool"}}, {"flag": False}) == {"flag": False}


@pytest.mark.parametrize("kind, good, wrong", [("str", "a", b"a"), ("bytes", b"a", "a")])
def test_str_and_bytes_are_distinct(kind, good, wrong):
    assert validate("op", {"p": {"type": kind}}, {"p": good}) == {"p": good}
    bad({"p": {"type": kind}}, {"p": wrong}, "'p'")


@pytest.mark.parametrize("value", [[1, True], [1, 2.0], (1, 2), "12", 12, [[1]]])
def test_int_list_rejects_bad_elements_and_non_lists(value):
    bad({"v": {"type": "int_list"}}, {"v": value}, "'v'", "int_list")


def test_float_list_accepts_ints_and_rejects_bools():
    assert validate("op", {"v": {"type": "float_list"}}, {"v": [1, 2.5]}) == {"v": [1, 2.5]}
    bad({"v": {"type": "float_list"}}, {"v": [1.0, False]}, "'v'")


def test_any_accepts_anything():
    for value in (None, 1, "x", [1, "a"], {"k": b"v"}, True):
        assert validate("op", {"a": {"type": "any"}}, {"a": value}) == {"a": value}


# --- constraints -----------------------------------------------------------------------------

def test_min_and_max_are_inclusive():
    spec = {"k": {"type": "int", "min": 1, "max": 31}}
    assert validate("op", spec, {"k": 1}) == {"k": 1}
    assert validate("op", spec, {"k": 31}) == {"k": 31}
    bad(spec, {"k": 0}, "'k'", ">= 1")
    bad(spec, {"k": 32}, "'k'", "<= 31")


def test_float_min_max():
    spec = {"s": {"type": "float", "min": 0.0, "max": 1.0}}
    assert validate("op", spec, {"s": 1}) == {"s": 1.0}
    bad(spec, {"s": -0.001}, "'s'")
    bad(spec, {"s": 1.0001}, "'s'")
    bad(spec, {"s": math.inf}, "'s'")


def test_nan_fails_a_range_constraint():
    sleep_schema = {"ms": {"type": "float", "min": 0.0, "max": 60000.0}}  # framework sleep's schema
    bad(sleep_schema, {"ms": math.nan}, "'ms'")


def test_odd():
    spec = {"k": {"type": "int", "odd": True}}
    for k in (1, 3, -1, 31):
        assert validate("op", spec, {"k": k}) == {"k": k}
    for k in (0, 2, -2, 30):
        bad(spec, {"k": k}, "'k'", "odd")


def test_odd_false_allows_even():
    assert validate("op", {"k": {"type": "int", "odd": False}}, {"k": 4}) == {"k": 4}


def test_choices():
    spec = BLUR["border"]
    assert validate("op", {"b": spec}, {"b": "constant"}) == {"b": "constant"}
    bad({"b": spec}, {"b": "wrap"}, "'b'", "wrap")
    bad({"b": spec}, {"b": "Constant"}, "'b'")


def test_list_len():
    spec = {"a": {"type": "int_list", "len": 2}}
    assert validate("op", spec, {"a": [0, 0]}) == {"a": [0, 0]}
    bad(spec, {"a": [0]}, "'a'", "2")
    bad(spec, {"a": [0, 0, 0]}, "'a'", "2")
    bad(spec, {"a": []}, "'a'")


def test_list_min_max_apply_to_each_element():
    spec = {"a": {"type": "int_list", "min": -1, "max": 10}}
    assert validate("op", spec, {"a": [-1, 10, 5]}) == {"a": [-1, 10, 5]}
    bad(spec, {"a": [0, -2]}, "'a'", "-2")
    bad(spec, {"a": [11, 0]}, "'a'", "11")


def test_list_odd_applies_to_each_element():
    spec = {"k": {"type": "int_list", "odd": True}}
    assert validate("op", spec, {"k": [3, 5]}) == {"k": [3, 5]}
    bad(spec, {"k": [3, 4]}, "'k'")


def test_blur_schema_combined():
    bad(BLUR, {"sigma": 1.0, "ksize": 4}, "'ksize'", "odd")
    bad(BLUR, {"sigma": -1.0}, "'sigma'")
    bad(BLUR, {"sigma": 1.0, "anchor": [-2, 0]}, "'anchor'")


# --- check_schema ------------------------------------------------------------------------------

def test_check_schema_returns_a_good_schema():
    assert check_schema(BLUR) is BLUR
    assert check_schema({}) == {}
    for kind in ("int", "float", "bool", "str", "bytes", "int_list", "float_list", "any"):
        check_schema({"p": {"type": kind}})


@pytest.mark.parametrize("schema", [
    {"p": "int"},                                   # spec not a dict
    {"p": None},
    {1: {"type": "int"}},                           # name not a str
    {"p": {}},                                      # no type
    {"p": {"type": "integer"}},                     # unknown type
    {"p": {"type": "list"}},
    {"p": {"type": "int", "maximum": 3}},           # unknown spec key
    {"p": {"type": "int", "required": True}},
], ids=["spec-str", "spec-none", "int-name", "no-type", "type-integer", "type-list", "key-maximum",
        "key-required"])
def test_check_schema_rejects_bad_specs(schema):
    with pytest.raises(ValueError):
        check_schema(schema)


def test_check_schema_error_names_the_parameter():
    with pytest.raises(ValueError, match="'ksize'"):
        check_schema({"ksize": {"type": "int", "mx": 3}})
    with pytest.raises(ValueError, match="mx"):
        check_schema({"ksize": {"type": "int", "mx": 3}})


def test_check_schema_rejects_default_of_wrong_type():
    with pytest.raises(ValueError, match="'ksize'"):
        check_schema({"ksize": {"type": "int", "default": "three"}})


def test_validate_remembers_a_parameter_set_per_schema_object():
    """A parameter set seen before under the same schema object gives an equal new dict without
    checking again; another schema object (a new image) or other values are checked afresh."""
    from protocol import schema as sch
    spec = {"k": {"type": "int", "min": 0}, "d": {"type": "float", "default": 1.5}}
    first = sch.validate("op", spec, {"k": 3})
    again = sch.validate("op", spec, {"k": 3})
    assert first == again == {"k": 3, "d": 1.5} and again is not first
    again["k"] = 99                                    # a caller's change stays its own
    assert sch.validate("op", spec, {"k": 3}) == {"k": 3, "d": 1.5}
    other = {"k": {"type": "int", "min": 5}, "d": {"type": "float", "default": 1.5}}
    with pytest.raises(errors.InvalidArgument):
        sch.validate("op", other, {"k": 3})            # same bytes, another schema: checked
    with pytest.raises(errors.InvalidArgument):
        sch.validate("op", spec, {"k": -1})
    arr = np.zeros(2)                                  # not wire data: checked every time, no memo
    assert sch.validate("op", {"x": {"type": "any"}}, {"x": arr})["x"] is arr
