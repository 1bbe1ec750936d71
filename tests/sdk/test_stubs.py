"""Typed stubs from operator declarations (arm_side.stubgen, 'vdsp firmware stubs'): a stub sends
what its declaration says, mypy refuses a wrong parameter type, and the CLI writes the
tutorial's stub from a built image. (That the checked-in stock modules are the generator's
current output: tests/tools/test_regen.py.)"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import mypy_run
from protocol.contract import cv_ops, framework_ops, nn_ops
from protocol.contract.operator import OperatorEntry
from protocol.task_options import TaskOptions
from arm_side import stubgen

ROOT = Path(__file__).resolve().parents[2]
CUSTOM = ROOT / "examples" / "custom_op"


class Recorder:
    """A Submitter that records what a stub submits (the stub layer alone; the live tutorial
    test runs the real path)."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def rpc(self, cmd, inputs=(), outputs=(), params=None, *, options=None, **task):
        o = TaskOptions.of(options, **task)     # what Soc.rpc makes of them
        self.calls.append((cmd, list(inputs), list(outputs), params, o.core, o.priority, o.custom_id))
        return "task"


def load(source: str, name: str):
    namespace: dict = {"__name__": name}
    exec(compile(source, name, "exec"), namespace)
    return namespace


def test_every_stock_operator_has_a_stub_named_by_its_entry():
    from arm_side.stubs import cv, framework, nn, pointcloud
    for mod, entries in ((cv, cv_ops.ENTRIES), (nn, nn_ops.ENTRIES), (framework, framework_ops.ENTRIES),
                         (pointcloud, None)):
        names = sorted(mod.__all__)
        if entries is not None:
            assert names == sorted(e.function_name for e in entries.values())
        assert all(callable(getattr(mod, n)) for n in names)
    assert cv.gaussian_blur.__doc__.startswith("Gaussian smoothing (cv::GaussianBlur)")


def test_a_stub_sends_its_declared_parameters_with_their_defaults():
    from arm_side.stubs import cv, framework, nn
    soc = Recorder()
    assert cv.gaussian_blur(soc, (1, 8), (2, 8), src={"s": 1}, dst={"d": 2}, sigma_x=1.5, priority=7) == "task"
    assert soc.calls[-1] == (0x0809, [(1, 8)], [(2, 8)], {"src": {"s": 1}, "dst": {"d": 2}, "ksize": [5, 5],
                                                          "sigma_x": 1.5, "sigma_y": 0.0, "border": "reflect101"},
                             0, 7, 0)
    cv.roi_resize(soc, [(1, 8), (3, 4)], [(2, 8)], src={}, dst={}, roi=(0, 0, 1, 1))   # pad_value None: not sent
    assert soc.calls[-1][1] == [(1, 8), (3, 4)] and "pad_value" not in soc.calls[-1][3]
    assert soc.calls[-1][3]["roi"] == [0, 0, 1, 1]
    cv.roi_resize(soc, [(1, 8)], [(2, 8)], src={}, dst={}, roi=[0, 0, 1, 1], pad_value=(9,))
    assert soc.calls[-1][3]["pad_value"] == [9]
    framework.fill(soc, (5, 16), value=3, core=2, custom_id=4)
    assert soc.calls[-1] == (0x0002, [], [(5, 16)], {"value": 3, "size": -1}, 2, 0, 4)
    urgent = TaskOptions(core=1, priority=200, custom_id=-3)        # one value, and a keyword over it
    framework.fill(soc, (5, 16), value=3, options=urgent, priority=9)
    assert soc.calls[-1] == (0x0002, [], [(5, 16)], {"value": 3, "size": -1}, 1, 9, -3)
    nn.layout(soc, (1, 8), (2, 8), input={}, output={}, platform="RK3588")
    assert soc.calls[-1][3] == {"input": {}, "output": {}, "channels": -1, "platform": "RK3588"}
    with pytest.raises(TypeError):
        framework.fill(soc, (5, 16))            # value is required


def test_names_that_are_not_python_or_clash_are_renamed_on_the_python_side_only():
    table = [{"id": 0x1500, "name": "my.op-1", "inputs": [2, 2], "outputs": [0, 0], "doc": 'says """hi"""',
              "params": {"class": {"type": "int", "default": 1}, "core": {"type": "str", "choices": ["a", "b"]},
                         "src0": {"type": "any", "doc": "a descriptor"}}}]
    ns = load(stubgen.from_table(table, "t"), "t")
    fn = ns["my_op_1"]
    assert 'says """hi"""' in fn.__doc__
    soc = Recorder()
    fn(soc, (1, 1), (2, 2), class_=3, core_="b", src0={}, core=1)
    assert soc.calls[-1] == (0x1500, [(1, 1), (2, 2)], [], {"class": 3, "core": "b", "src0": {}}, 1, 0, 0)
    with pytest.raises(ValueError, match="share the stub name"):
        stubgen.from_table(table + [dict(table[0], id=0x1501, name="my_op_1")], "t")


def test_the_generated_module_is_ruff_clean(tmp_path):
    (tmp_path / "stubs.py").write_text(stubgen.generate(cv_ops.ENTRIES.values(), "t"))
    res = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"),
                          str(tmp_path / "stubs.py")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.fixture(scope="module")
def custom_stub(tmp_path_factory) -> Path:
    """The tutorial's image built (unsigned) and its stubs written by the CLI."""
    tmp = tmp_path_factory.mktemp("stubs")
    rt = tmp / "rt"
    rt.mkdir(mode=0o700)
    env = dict(os.environ, VDSP_RUNTIME_DIR=str(rt), PYTHONPATH=str(ROOT))
    vdsp = [sys.executable, "-m", "vdsp_sim.cli", "firmware"]
    img = tmp / "image" / "vdsp1"
    res = subprocess.run([*vdsp, "build", "--unsigned", str(CUSTOM), "-o", str(img)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    out = tmp / "custom_op_stubs.py"
    res = subprocess.run([*vdsp, "stubs", str(img), "-o", str(out)], env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert "saturate_add(0x1400)" in res.stdout
    return out


def test_firmware_stubs_writes_the_tutorials_checked_in_stub(custom_stub):
    assert custom_stub.read_text() == (CUSTOM / "custom_op_stubs.py").read_text()
    ns = load(custom_stub.read_text(), "custom_op_stubs")
    soc = Recorder()
    ns["saturate_add"](soc, (1, 8), (2, 8), delta=-5, core=2)
    assert soc.calls == [(0x1400, [(1, 8)], [(2, 8)], {"delta": -5}, 2, 0, 0)]
    assert "delta (int; -255..255; required): added to every byte" in ns["saturate_add"].__doc__


def test_firmware_stubs_of_a_missing_image_is_a_clear_error(tmp_path):
    rt = tmp_path / "rt"
    rt.mkdir(mode=0o700)
    res = subprocess.run([sys.executable, "-m", "vdsp_sim.cli", "firmware", "stubs", str(tmp_path / "nope"), "-o",
                          str(tmp_path / "x.py")], env=dict(os.environ, VDSP_RUNTIME_DIR=str(rt)),
                         capture_output=True, text=True, timeout=120)
    assert res.returncode != 0 and "nope" in res.stderr and not (tmp_path / "x.py").exists()


def mypy(where: Path, *files: str) -> subprocess.CompletedProcess:
    """mypy with the project's settings over ``files`` in ``where``, from the cache of the run over
    the packages (tests/mypy_run.py)."""
    cache = where / ".mypy_cache"
    shutil.rmtree(cache, ignore_errors=True)
    return mypy_run.run("--config-file", str(ROOT / "pyproject.toml"), *files, where=cache, cwd=where,
                        env=dict(os.environ, MYPYPATH=str(ROOT)))


GOOD = """
import cv2
import numpy as np

from arm_side import AsyncSoc, Soc, Task, TaskOptions, cv as api
from arm_side.stubs import cv
from custom_op_stubs import saturate_add

with Soc() as soc:
    a, b = soc.mem.alloc(8), soc.mem.alloc(8)
    task: Task = saturate_add(soc, a, b, delta=10, core=2)
    saturate_add(soc, a, b, delta=10, options=TaskOptions(priority=3, timeout_ms=500), custom_id=1).wait()
    values: dict = task.wait(1000)
    cv.gaussian_blur(soc, a, b, src={}, dst={}, ksize=(3, 3), border="reflect").wait(1000)
    gray = np.zeros((4, 4), np.uint8)
    api.gaussian_blur(soc, gray, 5, sigma_x=1.2, borderType=cv2.BORDER_REFLECT)
    level, bw = api.threshold(soc, gray, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU)


async def main() -> dict:
    async with AsyncSoc() as asoc:
        m = asoc.soc.mem.alloc(8)
        return await saturate_add(asoc, m, m, delta=-5)
"""

BAD = """
import numpy as np

from arm_side import Soc, cv as api
from arm_side.stubs import cv
from custom_op_stubs import saturate_add

with Soc() as soc:
    a, b = soc.mem.alloc(8), soc.mem.alloc(8)
    saturate_add(soc, a, b, delta="ten")
    saturate_add(soc, a, b, delta=1, gain=2)
    cv.gaussian_blur(soc, a, b, src={}, dst={}, border="reflect_101")
    api.median_blur(soc, np.zeros((4, 4), np.uint8), ksize="3")
    saturate_add(soc, a, b, delta=1, priority="high")
    saturate_add(soc, a, b, delta=1, options={"core": 1})
"""


def test_mypy_accepts_right_calls_and_refuses_a_wrong_parameter_type(custom_stub, tmp_path):
    (tmp_path / "custom_op_stubs.py").write_text(custom_stub.read_text())
    (tmp_path / "good.py").write_text(textwrap.dedent(GOOD))
    (tmp_path / "bad.py").write_text(textwrap.dedent(BAD))
    res = mypy(tmp_path, "good.py")
    assert res.returncode == 0 and "Success" in res.stdout, res.stdout + res.stderr
    res = mypy(tmp_path, "bad.py")
    assert res.returncode == 1, res.stdout + res.stderr
    assert 'bad.py:10: error: Argument "delta" to "saturate_add" has incompatible type "str"; expected "int"' \
        in res.stdout, res.stdout
    assert 'bad.py:11: error: Unexpected keyword argument "gain" for "saturate_add"' in res.stdout, res.stdout
    assert 'bad.py:12: error: Argument "border" to "gaussian_blur" has incompatible type' in res.stdout, res.stdout
    assert 'bad.py:13: error: No overload variant of "median_blur" matches argument types' in res.stdout, res.stdout
    assert 'bad.py:14: error: Argument "priority" to "saturate_add" has incompatible type "str"; expected "int"' \
        in res.stdout, res.stdout
    assert 'bad.py:15: error: Argument "options" to "saturate_add" has incompatible type' in res.stdout, res.stdout


def test_an_entry_round_trips_through_the_operator_table():
    for entry in [*cv_ops.ENTRIES.values(), *nn_ops.ENTRIES.values(), *framework_ops.ENTRIES.values()]:
        back = OperatorEntry.of_table(entry.describe())
        assert back.describe() == entry.describe()
