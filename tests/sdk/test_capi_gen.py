"""The C face of the operator contract (arm_side.capi.opsgen; that hb_dsp_ops.h is its current
output: tests/tools/test_regen.py): every stock operator has its id and (with parameters) its struct, the
initializer macros set the contract's defaults (compiled and run), and a struct filled in C
becomes the parameters the typed Python stub of the same operator sends (arm_side.capi.bridge
read through cffi, no SoC)."""
from __future__ import annotations

import math
import re
import shutil
import subprocess

import pytest

from arm_side.capi import DIR, opsgen
from arm_side.stubs import cv, framework, nn, pointcloud
from protocol.contract import cv_ops, framework_ops, nn_ops, pointcloud_ops
from protocol.task_options import TaskOptions
from tests import privilege


def test_every_stock_operator_has_an_id_and_a_struct_of_its_parameters():
    text = opsgen.HEADER.read_text()
    for mod in (framework_ops, cv_ops, nn_ops, pointcloud_ops):
        for op_id, entry in mod.ENTRIES.items():
            op = opsgen.OPERATORS[op_id]
            assert re.search(rf"^#define {op.macro} 0x{op_id:04x}\b", text, re.M), entry.name
            assert bool(op.struct) == bool(entry.params), entry.name
            if entry.params:
                assert f"}} {op.struct};" in text and f"#define {op.init_macro}(param)" in text
                assert [f.param for f in op.fields] == list(entry.params)
    assert opsgen.OPERATORS[0x0809].struct == "hbDSPGaussianBlurParam"


def test_a_parameter_the_c_face_cannot_express_is_refused():
    from protocol.contract.operator import OperatorEntry
    odd = OperatorEntry.declare(0x1400, "custom.blob", {"blob": {"type": "any"}})
    with pytest.raises(ValueError, match="neither an image"):
        opsgen.layout(odd)


def _c_value(kind: str, text: str):
    if text == "NULL":
        return None
    return {"int": int, "float": float, "bool": lambda t: bool(int(t)), "str": str}[kind](text)


def test_the_initializer_macros_set_the_declared_defaults(tmp_path):
    if shutil.which("cc") is None:
        privilege.require("no C compiler")
    body, expect = [], []
    for op in opsgen.OPERATORS.values():
        if not op.struct:
            continue
        v = f"p{op.id:04x}"
        body += [f"  {op.struct} {v};", f"  {op.init_macro}(&{v});"]
        for f in op.fields:
            where = f"{op.struct}.{f.cname}"
            default = f.spec.get("default")
            if f.kind in ("int", "bool"):
                body.append(f'  printf("{where} %lld\\n", (long long){v}.{f.cname});')
                expect.append((where, int(default or 0)))
            elif f.kind == "float":
                body.append(f'  printf("{where} %.17g\\n", {v}.{f.cname});')
                expect.append((where, float(default or 0.0)))
            elif f.kind == "str":
                body.append(f'  printf("{where} %s\\n", {v}.{f.cname} ? {v}.{f.cname} : "NULL");')
                expect.append((where, default))
            elif f.length is not None:
                fmt = "%lld" if f.kind == "int_list" else "%.17g"
                cast = "(long long)" if f.kind == "int_list" else ""
                for i in range(f.length):
                    body.append(f'  printf("{where}[{i}] {fmt}\\n", {cast}{v}.{f.cname}[{i}]);')
                    expect.append((f"{where}[{i}]", default[i] if default else 0))
            elif f.kind in ("int_list", "float_list"):
                body.append(f'  printf("{where} %s %d\\n", {v}.{f.cname} ? "set" : "NULL", {v}.{f.count_name});')
                expect.append((where, "NULL 0"))
            else:       # descriptors start empty: not sent
                field = "format" if f.kind == "image" else "validShape.numDimensions"
                body.append(f'  printf("{where} %d\\n", (int){v}.{f.cname}.{field});')
                expect.append((where, 0))
    (tmp_path / "d.c").write_text("#include <stdio.h>\n#include <hb_dsp.h>\nint main(void) {\n" + "\n".join(body)
                                  + "\n  return 0;\n}\n")
    subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", f"-I{DIR / 'include'}", str(tmp_path / "d.c"),
                    "-o", str(tmp_path / "d")], check=True, timeout=120)
    out = subprocess.run([str(tmp_path / "d")], capture_output=True, text=True, check=True, timeout=30).stdout
    got = dict(line.split(" ", 1) for line in out.splitlines())
    for where, want in expect:
        text = got[where]
        if isinstance(want, float):
            assert math.isclose(float(text), want, rel_tol=1e-15), where
        elif isinstance(want, bool | int) and not isinstance(want, str):
            assert int(float(text)) == int(want), where
        elif want is None:
            assert text == "NULL", where
        else:
            assert text == str(want), where


class Recorder:
    """A Submitter that keeps what a typed stub submits."""

    def __init__(self) -> None:
        self.params: dict = {}

    def rpc(self, cmd, inputs=(), outputs=(), params=None, *, options=None, **task):
        TaskOptions.of(options, **task)
        self.params = params
        return "task"


@pytest.fixture(scope="module")
def ffi():
    cffi = pytest.importorskip("cffi")
    ffi = cffi.FFI()
    types = re.sub(r'extern "Python"[^;]*;', "", (DIR / "capi.cdef").read_text())   # the types only
    ffi.cdef(types + opsgen.cdef())
    return ffi


def test_a_struct_filled_in_c_sends_what_the_typed_stub_sends(ffi):
    from arm_side.capi.bridge import Bridge
    bridge = Bridge(ffi)
    rec = Recorder()

    blur = ffi.new("hbDSPGaussianBlurParam *")
    blur.src.format, blur.src.width, blur.src.height, blur.src.stride = opsgen.IMAGE_FORMATS["Y"], 64, 48, 80
    blur.dst.format, blur.dst.width, blur.dst.height = opsgen.IMAGE_FORMATS["Y"], 64, 48
    blur.dst.hasRoi, blur.dst.roi.left, blur.dst.roi.top, blur.dst.roi.right, blur.dst.roi.bottom = 1, 2, 3, 40, 30
    blur.ksize = [7, 3]
    blur.sigma_x, blur.sigma_y = 1.25, 0.5
    border = ffi.new("char[]", b"replicate")
    blur.border = border
    cv.gaussian_blur(rec, (1, 1), (2, 1), src={"format": "Y", "width": 64, "height": 48, "stride": 80},
                     dst={"format": "Y", "width": 64, "height": 48, "roi": [2, 3, 40, 30]}, ksize=(7, 3),
                     sigma_x=1.25, sigma_y=0.5, border="replicate")
    assert bridge.struct_params(opsgen.OPERATORS[0x0809], blur) == rec.params

    fill = ffi.new("hbDSPFillParam *")
    fill.value, fill.size = 9, -1
    framework.fill(rec, (1, 1), value=9)
    assert bridge.struct_params(opsgen.OPERATORS[0x0002], fill) == rec.params

    resize = ffi.new("hbDSPRoiResizeParam *")          # a list of variable length, and one not sent
    resize.src.format, resize.src.width, resize.src.height = opsgen.IMAGE_FORMATS["Y"], 32, 32
    resize.dst.format, resize.dst.width, resize.dst.height = opsgen.IMAGE_FORMATS["Y"], 16, 16
    resize.roi = [0, 0, 15, 15]
    cv.roi_resize(rec, [(1, 1)], [(2, 1)], src={"format": "Y", "width": 32, "height": 32},
                  dst={"format": "Y", "width": 16, "height": 16}, roi=[0, 0, 15, 15], keep_aspect=False,
                  interpolation="linear")
    interp = ffi.new("char[]", b"linear")
    resize.interpolation = interp
    assert bridge.struct_params(opsgen.OPERATORS[0x080f], resize) == rec.params
    pad = ffi.new("int64_t[]", [7])
    resize.pad_value, resize.pad_value_count = pad, 1
    assert bridge.struct_params(opsgen.OPERATORS[0x080f], resize)["pad_value"] == [7]

    encode = ffi.new("hbDSPPointcloudEncodeParam *")
    values = dict(dim=4, num_points=10, back=0.0, front=69.12, right=-39.68, left=39.68, bottom=-3.0, top=1.0,
                  lower=0.0, upper=1.0, x_scale=0.16, y_scale=0.16, scale=1 / 128)
    for name, value in values.items():
        setattr(encode, name, value)
    pointcloud.pointcloud_encode(rec, (1, 1), [(2, 1), (3, 1)], **values)
    assert bridge.struct_params(opsgen.OPERATORS[0x0600], encode) == rec.params

    softmax = ffi.new("hbDSPSoftmaxParam *")            # tensor descriptors as hbDNNTensorProperties
    from arm_side.nn import DataType, Layout, dense
    props = dense((1, 10), DataType.F32, Layout.NONE)
    keep: list = []
    bridge.props_to_c(props, softmax.input, keep)
    bridge.props_to_c(props, softmax.output, keep)
    softmax.axis = -1
    nn.softmax(rec, (1, 1), (2, 1), input=props.to_wire(), output=props.to_wire())
    assert bridge.struct_params(opsgen.OPERATORS[0x0402], softmax) == rec.params


def test_without_a_c_compiler_the_set_up_says_so_and_goes_on(tmp_path):
    """scripts/venv.sh's step: no compiler is a note and exit 0 (--strict: 1); nothing is written."""
    import os
    import sys
    from vdsp_sim import capi_build
    env = dict(os.environ, CC=str(tmp_path / "no-such-cc"))
    before = capi_build.library().stat().st_mtime_ns if capi_build.library().exists() else None
    for argv, status in (([], 0), (["--strict"], 1)):
        res = subprocess.run([sys.executable, "-m", "vdsp_sim.capi_build", *argv], env=env, capture_output=True,
                             text=True, timeout=120)
        assert res.returncode == status, res.stderr
        assert "no C API library (libvdsp_hb): no C compiler" in res.stderr and "works without it" in res.stderr
    after = capi_build.library().stat().st_mtime_ns if capi_build.library().exists() else None
    assert after == before
    res = subprocess.run([sys.executable, "-m", "vdsp_sim.cli", "capi"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 1 and "cannot be built here: no C compiler" in res.stdout, res.stdout


def test_a_library_whose_python_cannot_start_the_sdk_returns_a_code(tmp_path, monkeypatch):
    """Built for an environment that is gone: every function returns HB_DNN_API_USE_ERROR and
    says why on stderr, hbDNNGetErrorDesc still answers, nothing crashes."""
    from vdsp_sim import capi_build
    if capi_build.missing():
        privilege.require(f"no C build here: {capi_build.missing()}")
    monkeypatch.setattr(capi_build, "prefix", lambda: tmp_path / "prefix")
    monkeypatch.setattr(capi_build, "python", lambda: str(tmp_path / "gone" / "bin" / "python3"))
    assert capi_build.build(log=lambda msg: None) == ""
    lib = tmp_path / "prefix" / "lib"
    (tmp_path / "p.c").write_text("""#include <stdio.h>
#include <hb_dsp.h>
int main(void) {
  hbSysMem mem;
  hbDSPTask_t task = NULL;
  printf("%d %d %d\\n", hbSysAllocMem(&mem, 64), hbDSPRpcV2(&task, NULL, NULL, HB_DSP_OP_PING, NULL),
         hbDNNReleaseTask(NULL));
  printf("%s\\n", hbDNNGetErrorDesc(HB_DNN_API_USE_ERROR));
  return 0;
}
""")
    subprocess.run(["cc", "-Wall", "-Werror", f"-I{DIR / 'include'}", str(tmp_path / "p.c"), f"-L{lib}",
                    f"-Wl,-rpath,{lib}", "-lvdsp_hb", "-o", str(tmp_path / "p")], check=True, timeout=120)
    res = subprocess.run([str(tmp_path / "p")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    codes, desc = res.stdout.splitlines()
    assert codes == " ".join(["-6000015"] * 3)
    assert desc.startswith("HB_DNN_API_USE_ERROR: libvdsp_hb could not start its embedded Python SDK")
    assert "did not start" in res.stderr, res.stderr
