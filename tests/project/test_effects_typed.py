"""The engines' outputs are typed: a driver that forgets one kind of effect is a mypy error.

Each vocabulary (the relay engine's effects, a core engine's, the SDK session's connect steps and
actions) is a union of classes, and every driver dispatches on it with ``match`` ending in
``case _: assert_never(x)``. Here mypy checks two consumers of each union, written as a driver
is: one matching every class (clean), one matching all but the last (an error at its
``assert_never``, naming the class left out)."""
from __future__ import annotations

import typing

import pytest

from tests import mypy_run

#: module, union -> the classes in it (read from the union itself: a class added is checked too)
UNIONS = [("relay_server.effects", "Effect"), ("dsp_side.core_effects", "CoreEffect"),
          ("arm_side.steps", "Step"), ("arm_side.steps", "Action")]


def members(module: str, union: str) -> list[str]:
    mod = __import__(module, fromlist=[union])
    return [cls.__name__ for cls in typing.get_args(getattr(mod, union))]


def consumer(module: str, union: str, handled: list[str]) -> str:
    cases = "".join(f"        case {name}():\n            return {i}\n" for i, name in enumerate(handled))
    return (f"from typing import assert_never\n\nfrom {module} import {union}, {', '.join(handled)}\n\n\n"
            f"def consume(x: {union}) -> int:\n    match x:\n{cases}        case _:\n            assert_never(x)\n")


@pytest.fixture(scope="module")
def mypy_verdicts(tmp_path_factory) -> dict[str, str]:
    """file name -> mypy's lines about it, for a complete and an incomplete consumer of each union
    (one mypy run over all of them)."""
    where = tmp_path_factory.mktemp("consumers")
    files = []
    for module, union in UNIONS:
        names = members(module, union)
        for kind, handled in (("complete", names), ("missing", names[:-1])):
            path = where / f"{kind}_{union.lower()}.py"
            path.write_text(consumer(module, union, handled))
            files.append(path)
    # the project's settings, from the cache of the run over the packages (tests/mypy_run.py); the
    # packages' own errors are test_lint.py's: only the lines naming a consumer are read below
    res = mypy_run.run(*map(str, files), where=where / ".mypy_cache")
    assert "error" in res.stdout or res.returncode == 0, res.stdout + res.stderr
    return {path.name: "\n".join(line for line in res.stdout.splitlines() if path.name in line) for path in files}


@pytest.mark.parametrize("module, union", UNIONS)
def test_a_consumer_that_handles_every_kind_is_clean(mypy_verdicts, module, union):
    assert len(members(module, union)) >= 4
    assert mypy_verdicts[f"complete_{union.lower()}.py"] == ""


@pytest.mark.parametrize("module, union", UNIONS)
def test_a_consumer_that_forgets_one_kind_is_a_mypy_error(mypy_verdicts, module, union):
    forgotten = members(module, union)[-1]
    said = mypy_verdicts[f"missing_{union.lower()}.py"]
    assert "assert_never" in said and f'"{forgotten}"' in said and "error" in said, said
