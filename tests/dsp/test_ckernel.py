"""C kernels (dsp_side.ckernel), without a SoC: an image with C kernels is built by the real
compiler, verified and loaded as the firmware loads it, and its kernels run on numpy buffers
through the same registry calls the firmware makes. The live path (deploy, call from Python
over shared memory, a crashing kernel) is tests/integration/test_live_ckernel.py."""
from __future__ import annotations

import io
import logging
import os
import re
import signal
import subprocess
import sys
import types
import zipfile
from pathlib import Path

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from protocol import errors, schema
from dsp_side import ckernel, fw_image, signing
from dsp_side.ckernel import build as ckbuild, params as cparams

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "c_kernel"
RULES = ROOT / "tests" / "firmware_src" / "ckernels"

pytestmark = pytest.mark.skipif(bool(__import__("vdsp_sim.ctoolchain", fromlist=["missing"]).missing()),
                                reason="no C compiler")


def _trust(key: Ed25519PrivateKey) -> signing.Trust:
    return signing.Trust({signing.public_raw(key): "test"})


def _ctx() -> types.SimpleNamespace:
    return types.SimpleNamespace(core="vdsp1", msg_id=1, watchdog_ms=30000, state=None,
                                 log=logging.getLogger("vdsp.op.vdsp1"))


def _load(src: Path, tmp: Path, name: str):
    """(header, registry, payload names) of ``src`` built, signed by a test key, loaded."""
    key = Ed25519PrivateKey.generate()
    fw_image.build(src, tmp / name, key=key)
    header, registry = fw_image.load(tmp / name, tmp / f"{name}-work", _trust(key))
    _, payload, _ = fw_image.read(tmp / name, _trust(key))
    names = zipfile.ZipFile(io.BytesIO(payload)).namelist()
    registry.init_all(_ctx())
    return header, registry, names


def _run(registry, op_id: int, inputs: list, outputs: list, **params):
    spec = registry.get(op_id)
    return spec.fn(_ctx(), inputs, outputs, **schema.validate(spec.name, spec.params, params))


def affine_ref(src: np.ndarray, gain: int, bias: int) -> np.ndarray:
    return np.clip(((src.astype(np.int64) * gain + 128) >> 8) + bias, 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    return _load(EXAMPLE, tmp_path_factory.mktemp("ck"), "example")


@pytest.fixture(scope="module")
def rules(tmp_path_factory):
    return _load(RULES, tmp_path_factory.mktemp("ck"), "rules")


def test_the_image_carries_the_compiled_kernels_under_its_signature(example, tmp_path):
    header, registry, names = example
    assert ckernel.LIBRARY in names and "affine_u8.c" in names and "firmware.py" in names
    assert any(op["name"] == "affine_u8" for op in header["operators"])
    # a changed byte of the compiled code is refused (the signed header names the payload's SHA-256)
    key = Ed25519PrivateKey.generate()
    image = tmp_path / "img"
    fw_image.build(EXAMPLE, image, key=key)
    fw_image.read(image, _trust(key))
    data = bytearray(image.read_bytes())
    data[-200] ^= 0xFF
    image.write_bytes(bytes(data))
    with pytest.raises(fw_image.ImageError, match="checksum mismatch"):
        fw_image.read(image, _trust(key))


@pytest.mark.parametrize("n, tile", [(1, 64), (64, 64), (1000, 64), (200_000, 16384), (100_003, 51_000)])
def test_the_example_kernel_matches_numpy(example, n, tile):
    _, registry, _ = example
    rng = np.random.default_rng(n)
    src = rng.integers(0, 256, n, dtype=np.uint8)
    dst = np.zeros(n, np.uint8)
    values = _run(registry, 0x1410, [src], [dst], gain=300, bias=-7, tile=tile)
    np.testing.assert_array_equal(dst, affine_ref(src, 300, -7))
    mapped = ((src.astype(np.int64) * 300 + 128) >> 8) - 7
    assert values == {"clipped": int(((mapped < 0) | (mapped > 255)).sum())}      # the kernel's vdsp_result


def test_the_kernel_logs_in_the_dsp_format(example, caplog):
    _, registry, _ = example
    with caplog.at_level(logging.INFO, logger="vdsp.op.vdsp1"):
        _run(registry, 0x1410, [np.ones(100, np.uint8)], [np.zeros(100, np.uint8)], tile=64)
    record = next(r for r in caplog.records if "affine_u8:" in r.getMessage())
    assert record.getMessage() == "affine_u8: 100 bytes in 2 tiles of 64"
    assert record.filename == "affine_u8.c" and record.levelno == logging.INFO


def test_a_kernel_returning_non_zero_fails_the_task(example):
    _, registry, _ = example
    with pytest.raises(errors.OperatorFailed, match="affine_u8_kernel returned -1"):
        _run(registry, 0x1410, [np.ones(100, np.uint8)], [np.zeros(10, np.uint8)])


def test_over_budget_tcm_names_kernel_bank_and_bytes(example, rules):
    _, registry, _ = example
    with pytest.raises(errors.TcmOverBudget) as exc:     # 2 tiles of 60000 in bank 0: over 103 kB
        _run(registry, 0x1410, [np.ones(100, np.uint8)], [np.zeros(100, np.uint8)], tile=60000)
    assert exc.value.code == -6000272
    assert exc.value.message == ("kernel affine_u8_kernel: TCM bank 0: allocating 60000 bytes for out_ping takes 60032, "
                                 "45440 of the operator's 105472 bytes are free")
    _, rules_reg, _ = rules
    budget = 103 * 1024      # VDSP_TCM_OPERATOR_BYTES
    _run(rules_reg, 0x1421, [], [], bank=1, sizes=[budget])           # the whole budget fits, once per task
    _run(rules_reg, 0x1421, [], [], bank=1, sizes=[budget])           # and is released when the kernel returns
    with pytest.raises(errors.TcmOverBudget, match=f"TCM bank 1: allocating 1 bytes for big takes 64, 0 of the "
                                                   f"operator's {budget} bytes are free"):
        _run(rules_reg, 0x1421, [], [], bank=1, sizes=[budget, 1], name="big")


def test_reading_before_the_dma_wait_gives_stale_bytes(rules, monkeypatch):
    monkeypatch.delenv("VDSP_STRICT_DMA", raising=False)
    _, registry, _ = rules
    first, second = np.arange(256, dtype=np.uint8), np.arange(256, dtype=np.uint8)[::-1].copy()
    out = np.zeros(512, np.uint8)
    _run(registry, 0x1420, [first], [out])
    np.testing.assert_array_equal(out[256:], first)           # after the wait: the input
    before = out[:256].copy()
    assert not np.array_equal(before, first)                  # before it: not yet
    _run(registry, 0x1420, [second], [out])
    np.testing.assert_array_equal(out[:256], first)           # TCM still held the last task's tile
    np.testing.assert_array_equal(out[256:], second)


def test_strict_mode_reports_the_read_before_the_wait(rules, example, monkeypatch):
    monkeypatch.setenv("VDSP_STRICT_DMA", "1")
    _, registry, _ = rules
    out = np.zeros(512, np.uint8)
    with pytest.raises(errors.DmaNotWaited) as exc:
        _run(registry, 0x1420, [np.ones(256, np.uint8)], [out])
    assert exc.value.code == -6000273
    assert exc.value.message == "kernel peek_kernel: TCM buffer peek_tile used before the wait of IDMA transfer 1 " \
                                "that fills it"
    with pytest.raises(errors.DmaNotWaited, match="no_wait_kernel: returned with 1 IDMA transfers not waited for"):
        _run(registry, 0x1424, [np.ones(256, np.uint8)], [])
    _, example_reg, _ = example
    src, dst = np.arange(5000, dtype=np.uint8), np.zeros(5000, np.uint8)   # a kernel that waits passes strict mode
    _run(example_reg, 0x1410, [src], [dst], gain=128, bias=3, tile=1024)
    np.testing.assert_array_equal(dst, affine_ref(src, 128, 3))
    monkeypatch.delenv("VDSP_STRICT_DMA")
    _run(registry, 0x1424, [np.ones(256, np.uint8)], [])     # not strict: the engine finishes it


def test_2d_transfers_move_a_rectangle(rules):
    _, registry, _ = rules
    image = np.random.default_rng(2).integers(0, 256, (40, 30), dtype=np.uint8)
    out = np.zeros(17 * 9, np.uint8)
    _run(registry, 0x1426, [image.reshape(-1)], [out], width=30, roi=[5, 11, 17, 9])
    np.testing.assert_array_equal(out.reshape(9, 17), image[11:20, 5:22])
    with pytest.raises(errors.OperatorFailed, match="IDMA into TCM needs its destination inside one TCM allocation "
                                                    "and its source inside a buffer of the task"):
        _run(registry, 0x1426, [image.reshape(-1)], [out], width=30, roi=[20, 35, 17, 9])   # rows past the image


def test_a_2d_transfer_with_source_pitch_0_repeats_one_row(rules):
    _, registry, _ = rules
    row = np.arange(1, 101, dtype=np.uint8)
    out = np.full(7 * 130, 0xEE, np.uint8)
    _run(registry, 0x142D, [row], [out], rows=7, pitch=130)
    rows = out.reshape(7, 130)
    assert (rows[:, :100] == row).all() and (rows[:, 100:] == 0xEE).all()    # the gaps between rows untouched
    counts = registry.get(0x142D).fn._lib.counters.read()
    assert (counts["dma_transfers"], counts["dma_rows"], counts["dma_bytes"]) == (2, 1 + 7, 100 + 7 * 100)
    for pitch, src_pitch in ((99, 0), (130, 1), (130, 99)):     # rows that overlap, a pitch below the row but 0
        with pytest.raises(errors.OperatorFailed, match=re.escape(f"IDMA 2-D copy with a pitch ({pitch}, {src_pitch}) "
                                                                  "below its row of 100 bytes")):
            _run(registry, 0x142D, [row], [out], rows=7, pitch=pitch, src_pitch=src_pitch)


@pytest.mark.parametrize("row", [np.full(100, 0x3C, np.uint8), np.r_[np.full(99, 7, np.uint8), np.uint8(8)],
                                 np.r_[np.uint8(8), np.full(99, 7, np.uint8)], np.full(1, 9, np.uint8)])
def test_one_row_repeated_into_contiguous_rows_fills_them(rules, row):
    """(A row of one byte into contiguous rows is one memset in the runtime: the same bytes.)"""
    _, registry, _ = rules
    w = len(row)
    out = np.full(7 * w + 5, 0xEE, np.uint8)
    _run(registry, 0x142D, [row], [out], rows=7, pitch=w)
    assert (out[:7 * w].reshape(7, w) == row).all() and (out[7 * w:] == 0xEE).all()


@pytest.mark.parametrize("how, message", [
    ("into_input", "IDMA copies between TCM and the task's buffers: a source inside one TCM allocation and a "
                   "destination inside an output buffer, or the reverse"),
    ("outside_tile", "IDMA into TCM needs its destination inside one TCM allocation"),
    ("bank_2", "kernel misuse_kernel: TCM bank 2 does not exist (banks 0..1)"),
    ("bad_id", "kernel misuse_kernel: no IDMA transfer 7")])
def test_idma_and_tcm_misuse_fails_the_task(rules, how, message):
    _, registry, _ = rules
    with pytest.raises(errors.OperatorFailed, match=re.escape(message)) as exc:
        _run(registry, 0x1427, [np.ones(100, np.uint8)], [np.zeros(100, np.uint8)], how=how)
    assert exc.value.code == -6000270


def test_a_cpp_kernel_reads_its_struct(rules):
    _, registry, names = rules
    assert "sum.cc" in names
    data, out = np.arange(1000, dtype=np.uint8), np.zeros(8, np.uint8)
    _run(registry, 0x1425, [data], [out], scale=0.5)
    assert out.view(np.float64)[0] == 0.5 * int(data.astype(np.int64).sum())


def test_a_kernel_sets_named_results_of_its_task(rules):
    """docs/dsp_kernels.md's row "the task's result": up to 8 names, 1 to 31 characters, a name
    set again takes the new value, values are int64; none left over from the task before."""
    _, registry, _ = rules
    assert _run(registry, 0x142E, [], [], how="ok") == {
        "count": 5, "big_negative": -(1 << 40), "_0123456789abcdefghijklmnopqrst": (1 << 63) - 1}
    assert _run(registry, 0x142E, [], [], how="none") == {}       # none set: none left from the task before


def test_a_bad_result_fails_the_task_and_the_next_one_runs(rules):
    """The same row: a bad name or a ninth fails the task with HB_DSP_OPERATOR_FAILED."""
    _, registry, _ = rules
    identifier = "kernel results_kernel: vdsp_result: a result's name is a C identifier of 1 to 31 characters"
    for how, message in (("bad_name", identifier), ("long_name", identifier),
                         ("too_many", "kernel results_kernel: vdsp_result: more than 8 results (i)")):
        with pytest.raises(errors.OperatorFailed, match=re.escape(message)) as exc:
            _run(registry, 0x142E, [], [], how=how)
        assert exc.value.code == -6000270, how
        assert _run(registry, 0x142E, [], [], how="ok")["count"] == 5


def test_a_failed_task_has_no_result(rules):
    """The same row: "a task that fails (a trap, a non-zero return) has no result"."""
    _, registry, _ = rules
    with pytest.raises(errors.OperatorFailed, match="returned 3"):
        _run(registry, 0x142E, [], [], how="then_fail")
    assert _run(registry, 0x142E, [], [], how="none") == {}


def test_the_params_header_is_the_entrys_struct():
    from examples.c_kernel import firmware as example_fw     # noqa: PLC0415
    text = cparams.header([example_fw.AFFINE_U8])
    assert "} hbDSPAffineU8Param;" in text and "int64_t gain;" in text
    assert "#define HB_DSP_OP_AFFINE_U8 0x1410" in text
    assert 'VDSP_STATIC_ASSERT(sizeof(hbDSPAffineU8Param) == 24, "hbDSPAffineU8Param: size");' in text
    assert "HB_DSP_INITIALIZE_AFFINE_U8_PARAM" in text


def test_the_sample_kernels_struct_name_reads_the_stage_1_parameters(tmp_path):
    """The J5 sample's gen_feature_kernel reads hbDSPPointPillarPreProcessParam: the kernel headers
    give it as the name of pointcloud_encode's struct (the entry's J5 name), and code of the
    sample's kind compiles against it as C++ (its main.cc) with the build's warnings."""
    from protocol.contract import pointcloud_ops     # noqa: PLC0415
    (tmp_path / ckernel.PARAMS_HEADER).write_text(cparams.header([pointcloud_ops.ENCODE]))
    assert "typedef hbDSPPointcloudEncodeParam hbDSPPointPillarPreProcessParam;" in \
        (tmp_path / ckernel.PARAMS_HEADER).read_text()
    src = tmp_path / "sample_kind.cc"
    src.write_text('#include "vdsp_kernel_params.h"\n'
                   "float span(vdsp_task_t const *task) {\n"
                   "  auto const *p = VDSP_PARAM(task, hbDSPPointPillarPreProcessParam);\n"
                   "  float const x = (float)((p->front - p->back) / p->x_scale);\n"
                   "  float const y = (float)((p->left - p->right) / p->y_scale);\n"
                   "  return x * y + (float)(p->top - p->bottom) / (float)p->scale;\n}\n")
    res = subprocess.run(["c++", "-std=c++17", *ckbuild.WARNINGS, f"-I{tmp_path}", f"-I{ckernel.INCLUDE}", "-c",
                          str(src), "-o", str(tmp_path / "sample_kind.o")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr


def test_a_kernel_that_does_not_compile_is_refused_with_the_compilers_message(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "firmware.py").write_text((EXAMPLE / "firmware.py").read_text())
    (tree / "affine_u8.c").write_text((EXAMPLE / "affine_u8.c").read_text().replace(
        "uint32_t tile = (uint32_t)p->tile;", "uint32_t tile = (uint32_t)p->tile; int unused_here;"))
    with pytest.raises(fw_image.ImageError) as exc:
        fw_image.build(tree, tmp_path / "img", key=None)
    assert "affine_u8.c does not compile" in str(exc.value) and "unused_here" in str(exc.value)
    assert not (tmp_path / "img").exists()


def test_the_sources_compile_side_by_side_never_more_compilers_than_cpus(tmp_path, monkeypatch):
    """A library's sources (the runtime's too) compile at once, and an image's levels, at most
    one compiler a CPU of the process (ckbuild._COMPILERS; two here): of one library's three
    compilers, wrapped to log when they start and end, two run together, never three. (Each
    wrapper waits, 10 s at most, until two have started: on a busy host the second may start
    late, and one at a time waits the 10 s in each and fails.)"""
    import threading     # noqa: PLC0415
    log = tmp_path / "compilers.log"
    for name, real in (("cc", "cc"), ("c++", "c++")):
        wrapper = tmp_path / f"wrap-{name}"
        wrapper.write_text(f'#!/bin/sh\necho "+ $(date +%s%N)" >> {log}\ni=0\n'
                           f'while [ "$(grep -c "^+" {log})" -lt 2 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done\n'
                           f'{real} "$@"\nrc=$?\necho "- $(date +%s%N)" >> {log}\nexit $rc\n')
        wrapper.chmod(0o755)
    monkeypatch.setenv("CC", str(tmp_path / "wrap-cc"))
    monkeypatch.setenv("CXX", str(tmp_path / "wrap-c++"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))          # nothing from an earlier build
    monkeypatch.setattr(ckbuild, "_COMPILERS", threading.BoundedSemaphore(2), raising=False)
    monkeypatch.setattr(ckbuild, "levels", lambda sanitize=None: [None])    # one library: its files alone
    fw_image.build(RULES, tmp_path / "img", key=None)
    events = sorted((int(t), 1 if sign == "+" else -1) for sign, t in (line.split() for line in log.read_text().split("\n")
                                                                    if line))
    running, most = 0, 0
    for _, step in events:
        running += step
        most = max(most, running)
    files = len(ckbuild.sources(RULES)) + 1                                 # and the runtime
    assert files == 3 and len(events) == 2 * (files + 1) and most == 2      # (+ the link)


def test_a_file_that_does_not_compile_stops_the_compiles_after_it(tmp_path, monkeypatch):
    """A broken file ends its build at once: the compiles after it in the order its errors are
    raised in (the later files of its level, every file of a later level) are not started, or are
    killed with their compilers, and the error is the first in that order still. Here the file
    after the broken one takes 60 s to compile (its wrapper waits first), in both levels: the build
    fails with the broken file's error and that compile never ends, nor does its wrapper live on.
    (docs/dsp_kernels.md: "as soon as it fails: the build stops the compiles after it (the tree's later
    files, the later levels), and the error it names is still the first in that order".)"""
    import threading     # noqa: PLC0415
    log = tmp_path / "compilers.log"
    wrapper = tmp_path / "wrap-cc"
    wrapper.write_text(f'#!/bin/sh\ncase "$*" in *b_slow.c*) echo "+ $$" >> {log}; sleep 60;; esac\n'
                       f'cc "$@"\nrc=$?\ncase "$*" in *b_slow.c*) echo "- $$" >> {log};; esac\nexit $rc\n')
    wrapper.chmod(0o755)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "firmware.py").write_text((EXAMPLE / "firmware.py").read_text())
    (tree / "affine_u8.c").write_text((EXAMPLE / "affine_u8.c").read_text().replace(
        "uint32_t tile = (uint32_t)p->tile;", "uint32_t tile = (uint32_t)p->tile; int unused_here;"))
    (tree / "b_slow.c").write_text("int b_slow(int x);\nint b_slow(int x) { return x + 1; }\n")
    monkeypatch.setenv("CC", str(wrapper))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))          # nothing from an earlier build
    monkeypatch.setattr(ckbuild, "_COMPILERS", threading.BoundedSemaphore(8), raising=False)    # all at once
    monkeypatch.setattr(ckbuild, "levels", lambda sanitize=None: ["x86-64", "x86-64-v3"])
    with pytest.raises(fw_image.ImageError) as exc:
        fw_image.build(tree, tmp_path / "img", key=None)
    assert "affine_u8.c does not compile" in str(exc.value) and "unused_here" in str(exc.value)
    lines = log.read_text().split() if log.exists() else []
    started = [int(pid) for sign, pid in zip(lines[::2], lines[1::2]) if sign == "+"]
    assert "-" not in lines[::2], lines              # no slow compile ended
    for pid in started:                             # and no wrapper was left behind
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def _group_alive(pgid: int) -> list[int]:
    """The processes of process group ``pgid`` not yet exited (zombies aside)."""
    alive = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_bytes().rpartition(b")")[2].split()
        except (OSError, ValueError):
            continue
        if int(fields[2]) == pgid and fields[0] != b"Z":
            alive.append(int(entry.name))
    return alive


def test_ctrl_c_during_a_build_stops_its_compilers(tmp_path):
    """Each compile runs in a process group of its own (the way to stop a compiler with its cc1
    and as), so the terminal's SIGINT reaches only the building process: it stops them itself."""
    from tests.conftest import wait_until     # noqa: PLC0415
    log = tmp_path / "compilers.log"
    wrapper = tmp_path / "wrap-cc"
    wrapper.write_text(f'#!/bin/sh\ncase "$*" in *b_slow.c*) echo "+ $$" >> {log}; sleep 60;; esac\nexec cc "$@"\n')
    wrapper.chmod(0o755)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "firmware.py").write_text((EXAMPLE / "firmware.py").read_text())
    (tree / "affine_u8.c").write_text((EXAMPLE / "affine_u8.c").read_text())
    (tree / "b_slow.c").write_text("int b_slow(int x);\nint b_slow(int x) { return x + 1; }\n")
    # Ctrl-C as a terminal's user gets it (a pytest-xdist worker ignores SIGINT, and its children inherit that)
    code = (f"import signal, sys; sys.path.insert(0, {str(ROOT)!r}); from pathlib import Path\n"
            "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
            "from dsp_side import fw_image\nfrom dsp_side.ckernel import build\n"
            "build.levels = lambda sanitize=None: ['x86-64']\n"      # one level: the runtime compiled once, not thrice
            f"fw_image.build(Path({str(tree)!r}), Path({str(tmp_path / 'img')!r}), key=None)\n")
    env = dict(os.environ, CC=str(wrapper), XDG_CACHE_HOME=str(tmp_path / "cache"))
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: log.exists() and log.read_text().strip(), 60), "the slow compile did not start"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode != 0 and "KeyboardInterrupt" in err
    pgids = [int(line.split()[1]) for line in log.read_text().splitlines()]
    assert wait_until(lambda: not any(_group_alive(pgid) for pgid in pgids), 10), [_group_alive(p) for p in pgids]


def test_a_missing_kernel_function_refuses_the_image(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "firmware.py").write_text((EXAMPLE / "firmware.py").read_text().replace('"affine_u8_kernel"', '"nope"'))
    (tree / "affine_u8.c").write_text((EXAMPLE / "affine_u8.c").read_text())
    fw_image.build(tree, tmp_path / "img", key=None)
    _, registry = fw_image.load(tmp_path / "img", tmp_path / "work", signing.Trust({}, allow_unsigned=True))
    with pytest.raises(errors.OperatorFailed, match="the kernel library has no function 'nope'"):
        registry.init_all(_ctx())


@pytest.mark.parametrize("op, signal", [(0x1422, "SIGSEGV"), (0x1423, "SIGABRT")])
def test_a_crashing_kernel_kills_its_process_by_the_signal(tmp_path, op, signal):
    """What the firmware process does on a kernel's segfault or abort: it dies of the signal
    (the core's crash handling is the live test's)."""
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); from pathlib import Path; import numpy as np\n"
            "from tests.dsp.test_ckernel import _load, _run, RULES\n"
            f"_, reg, _ = _load(RULES, Path({str(tmp_path)!r}), 'x')\n"
            f"_run(reg, {op}, [], [])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    import signal as sig
    assert out.returncode == -getattr(sig, signal), out.stderr


def test_lifecycle_hooks_run_beside_a_c_kernel(tmp_path):
    """``init`` runs after the library is loaded, ``prepare`` before compute, as for Python kernels."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "affine_u8.c").write_text((EXAMPLE / "affine_u8.c").read_text())
    (tree / "firmware.py").write_text((EXAMPLE / "firmware.py").read_text().replace(
        'ckernel.bind(registry, AFFINE_U8, "affine_u8_kernel", __file__)',
        'ckernel.bind(registry, AFFINE_U8, "affine_u8_kernel", __file__, init=init, prepare=prepare)') + '''

def init(ctx):
    ctx.state.priv = {"prepared": 0}


def prepare(ctx, inputs, outputs, gain, bias, tile):
    ctx.state.priv["prepared"] += 1
''')
    _, registry, _ = _load(tree, tmp_path, "hooks")
    spec, ctx = registry.get(0x1410), _ctx()
    src, dst = np.arange(256, dtype=np.uint8), np.zeros(256, np.uint8)
    for _ in range(2):
        params = schema.validate(spec.name, spec.params, {"gain": 512})
        registry.prepare(spec, ctx, [src], [dst], params)
        spec.fn(ctx, [src], [dst], **params)
    assert registry.state(0x1410).priv == {"prepared": 1}
    np.testing.assert_array_equal(dst, affine_ref(src, 512, 0))


# --- bank conflicts --------------------------------------------------------------------------------
def _noting_ctx() -> tuple[types.SimpleNamespace, list]:
    notes: list = []
    ctx = _ctx()
    ctx.note = lambda kind, fields: notes.append((kind, fields))
    return ctx, notes


@pytest.mark.parametrize("strict", ["0", "1"])
def test_ping_and_pong_in_one_bank_are_a_bank_conflict_in_the_log_and_the_trace(rules, caplog, monkeypatch,
                                                                                  strict):
    monkeypatch.setenv("VDSP_STRICT_DMA", strict)
    _, registry, _ = rules
    spec = registry.get(0x142A)
    src = np.random.default_rng(5).integers(0, 256, 10 * 1024, dtype=np.uint8)
    for pong_bank in (1, 0):
        ctx, notes = _noting_ctx()
        dst = np.zeros_like(src)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="vdsp.op.vdsp1"):
            spec.fn(ctx, [src], [dst], **schema.validate(spec.name, spec.params, {"pong_bank": pong_bank}))
        np.testing.assert_array_equal(dst, src)
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        if pong_bank == 1:          # ping in bank 0, pong in bank 1: what the J5 sample asks
            assert notes == [] and warnings == []
            continue
        first = "TCM bank 0: IDMA transfer 2 moves pong while the kernel computes on ping (transfer 1 waited)"
        # one per tile: each wait for a tile finds the other buffer of bank 0 being filled or drained
        assert notes == [("bank_conflict", {"kernel": "pingpong_kernel", "count": 10, "first": first})]
        assert warnings == [f"kernel pingpong_kernel: 10 TCM bank conflicts (ping-pong buffers in one bank); "
                            f"the first: {first}"]


def test_the_example_kernel_has_no_bank_conflict(example, caplog):
    _, registry, _ = example
    spec = registry.get(0x1410)
    ctx, notes = _noting_ctx()
    src, dst = np.arange(100_000, dtype=np.uint8), np.zeros(100_000, np.uint8)
    with caplog.at_level(logging.WARNING, logger="vdsp.op.vdsp1"):
        spec.fn(ctx, [src], [dst], **schema.validate(spec.name, spec.params, {"tile": 4096}))
    assert notes == [] and not caplog.records


# --- guard pages ----------------------------------------------------------------------------------
@pytest.fixture
def mapped(tmp_path):
    """``mapped(size)``: a uint8 array over a file mapped as the firmware maps DDR (a PROT_NONE
    page after it)."""
    from vdsp_board.memory import ddr      # noqa: PLC0415
    maps = []

    def make(size: int, fill: int = 0) -> np.ndarray:
        path = tmp_path / f"seg{len(maps)}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            os.ftruncate(fd, size)
            mm = ddr.map_shared(fd, size, guard=True)
        finally:
            os.close(fd)
        maps.append(mm)
        arr = np.frombuffer(memoryview(mm)[:size], np.uint8)
        arr[:] = fill
        return arr
    yield make


def _scribble(registry, src, dst, where: str, offset: int) -> None:
    _run(registry, 0x142B, [src], [dst], where=where, offset=offset)


@pytest.mark.parametrize("where, offset, size, message", [
    ("output", 4096, 4096, "wrote output 0 at +4096, past its end (a buffer of 4096 bytes)"),
    ("output", 4100, 4000, "wrote output 0 at +4100, past its end (a buffer of 4000 bytes)"),
    ("input", 10, 4096, "wrote input 0 at +10 (a buffer of 4096 bytes): inputs are read-only"),
    ("input", 8192, 8192, "wrote input 0 at +8192, past its end (a buffer of 8192 bytes)"),
    ("tcm", 4096, 4096, "wrote TCM bank 1 at scratch +4096, outside its TCM allocations (scratch: 64 bytes)")])
def test_a_write_outside_the_buffers_is_caught_by_a_guard_page_naming_kernel_and_buffer(rules, mapped, monkeypatch,
                                                                                       where, offset, size, message):
    """(Inputs are read-only in strict mode: VDSP_STRICT_DMA.)"""
    monkeypatch.setenv("VDSP_STRICT_DMA", "1" if where == "input" else "0")
    _, registry, _ = rules
    src, dst = mapped(size, 7), mapped(size)
    with pytest.raises(errors.KernelMemoryFault) as exc:
        _scribble(registry, src, dst, where, offset)
    assert exc.value.code == -6000274
    assert exc.value.message == f"kernel scribble_kernel: {message}"
    assert (src == 7).all() and (dst == 0).all()
    src[:] = 9                      # the guards are gone with the task: the buffers are writable again
    _run(registry, 0x142A, [src], [dst])
    assert (dst == 9).all()
    _run(registry, 0x1421, [], [], bank=1, sizes=[4096, 8192])    # and all of TCM is the next task's


def test_what_the_page_granularity_does_not_catch(rules, mapped, monkeypatch):
    """Bytes past a buffer's end inside its last page, a write to an input outside strict mode,
    and anything with the guards off."""
    monkeypatch.setenv("VDSP_STRICT_DMA", "0")
    _, registry, _ = rules
    src, dst = mapped(4000, 7), mapped(4000)
    _scribble(registry, src, dst, "output", 4000)           # the segment's page holds 96 more bytes
    _scribble(registry, src, dst, "tcm", 64)                 # the rest of the allocation's page
    _scribble(registry, src, dst, "input", 10)
    assert src[10] == 0x5A
    monkeypatch.setenv("VDSP_STRICT_DMA", "1")
    monkeypatch.setenv("VDSP_KERNEL_GUARD", "0")
    _scribble(registry, src, dst, "input", 11)
    _scribble(registry, src, dst, "tcm", 4096)
    assert src[11] == 0x5A


def test_tcm_the_last_task_allocated_is_guarded_until_this_task_allocates_it(rules, monkeypatch):
    """The pages a task opened may stay read-write between tasks (under the bank's protection
    key, on a host with them): the next task still faults on them until it allocates them, and
    writes its own allocation before any transfer. Holds docs/dsp_kernels.md's "Guard pages": "the
    next task's thread is allowed the key only once its own allocations are those pages"."""
    monkeypatch.setenv("VDSP_STRICT_DMA", "0")
    _, registry, _ = rules
    src, dst = np.zeros(4096, np.uint8), np.zeros(4096, np.uint8)
    for _ in range(2):
        _run(registry, 0x1421, [], [], bank=1, sizes=[32768])          # 8 pages of bank 1
        with pytest.raises(errors.KernelMemoryFault, match=r"wrote TCM bank 1 at scratch \+4096, outside its TCM "
                                                           r"allocations \(scratch: 64 bytes\)"):
            _scribble(registry, src, dst, "tcm", 4096)
        _run(registry, 0x1421, [], [], bank=1, sizes=[32768])
        _scribble(registry, src, dst, "tcm", 32)                         # in its own allocation


def test_a_packed_parameter_struct_is_reused_only_for_the_same_bytes():
    """(The parameter struct of a task whose values are the last task's is the last struct.)"""
    from protocol.contract import pointcloud_ops     # noqa: PLC0415
    op = cparams.c_layout(pointcloud_ops.ENCODE)
    packer = cparams.Packer(op, cparams.struct_type(op))
    values = {f.param: 0.5 for f in op.fields if f.kind == "float"} | {"dim": 4, "num_points": 10}
    first = packer.pack(dict(values))
    assert packer.pack(dict(values)) is first
    for change in ({"dim": 5}, {"back": 1}, {"back": 0.0}):
        struct = packer.pack(values | change)
        assert bytes(struct) == bytes(cparams.pack(op, type(struct), values | change)[0])
    zero, negative = bytes(packer.pack(values | {"back": 0.0})), bytes(packer.pack(values | {"back": -0.0}))
    assert zero != negative         # equal values, different bytes: packed again


def test_a_heap_input_is_never_made_read_only(rules, monkeypatch):
    """An input that does not own its pages (a numpy array on the heap, not a DDR mapping) is
    not protected, even in strict mode: its pages hold other objects."""
    monkeypatch.setenv("VDSP_STRICT_DMA", "1")
    _, registry, _ = rules
    src, dst = np.full(100, 7, np.uint8), np.zeros(100, np.uint8)
    _scribble(registry, src, dst, "input", 3)
    assert src[3] == 0x5A


# --- the ASan image --------------------------------------------------------------------------------
def test_an_asan_build_says_so_in_its_signed_header_and_a_bad_sanitizer_is_refused(tmp_path):
    key = Ed25519PrivateKey.generate()
    header = fw_image.build(EXAMPLE, tmp_path / "asan", key=key, sanitize="address")
    assert header["sanitize"] == "address"
    assert fw_image.read(tmp_path / "asan", _trust(key))[0]["sanitize"] == "address"
    assert fw_image.build(EXAMPLE, tmp_path / "ub", key=key, sanitize=True)["sanitize"] == "undefined"
    assert "sanitize" not in fw_image.build(EXAMPLE, tmp_path / "plain", key=key)
    with pytest.raises(fw_image.ImageError, match="no sanitizer 'thread'"):
        fw_image.build(EXAMPLE, tmp_path / "tsan", key=key, sanitize="thread")
    with pytest.raises(fw_image.ImageError, match="field 'sanitize' must be one of undefined, address, got .thread."):
        fw_image._check_header({**header, "sanitize": "thread"}, "img")


def test_the_cli_takes_sanitize_bare_or_named():
    from vdsp_sim import firmware_cli      # noqa: PLC0415
    import argparse                        # noqa: PLC0415
    assert firmware_cli._sanitizer("address") == "address"
    with pytest.raises(argparse.ArgumentTypeError, match="'src' is no sanitizer"):
        firmware_cli._sanitizer("src")


def test_an_asan_firmware_is_refused_a_start_without_the_runtime(monkeypatch):
    """No libasan for the core's compiler: the firmware does not start (the boot fails saying why)."""
    from dsp_side import fwproc            # noqa: PLC0415
    env = fwproc._asan_env({"LD_PRELOAD": "/x/other.so", "ASAN_OPTIONS": "verbosity=1"})
    assert env["LD_PRELOAD"].split() == [ckbuild.asan_runtime(), "/x/other.so"]
    assert env["ASAN_OPTIONS"] == f"{fwproc.ASAN_OPTIONS}:verbosity=1" and "detect_leaks=0" in env["ASAN_OPTIONS"]
    monkeypatch.setenv("CC", "false")
    with pytest.raises(OSError, match="built with --sanitize=address: false has no AddressSanitizer runtime"):
        fwproc._asan_env({})
