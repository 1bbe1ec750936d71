"""The IVP subset (<xtensa/tie/xt_ivpn.h>): every intrinsic, compiled into a C program (as C11 and
as C++17, -Wall -Wextra -Werror, with the kernel runtime) by the real compiler and run, against a
numpy reference of its own; a gather beyond the 64 kB window, as a program and as a kernel's
task; an intrinsic outside the subset as a compile error that names it."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import types
import logging
from pathlib import Path

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from protocol import errors, schema
from dsp_side import ckernel, fw_image, signing

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / "tests" / "ivp" / "ivp_driver.c"
WINDOW_TREE = ROOT / "tests" / "firmware_src" / "ivp"
FLAGS = ["-O2", "-Wall", "-Wextra", "-Werror", f"-I{ckernel.INCLUDE}"]
LANGS = {"c": ("CC", "cc", ["-std=c11"]), "c++": ("CXX", "c++", ["-x", "c++", "-std=c++17"])}
HOW = "is not in the vdsp-sim IVP subset"

pytestmark = pytest.mark.skipif(bool(__import__("vdsp_sim.ctoolchain", fromlist=["missing"]).missing()),
                                reason="no C compiler")


def _compiler(lang: str) -> list[str]:
    var, default, _ = LANGS[lang]
    return shlex.split(os.environ.get(var) or default)


def _compile(lang: str, source: Path, out: Path, level: str | None = None) -> subprocess.CompletedProcess:
    _, _, std = LANGS[lang]
    obj = out.with_suffix(".o")
    flags = [*FLAGS, *(ckernel.LEVELS[level][0] if level else ())]     # as the kernel library is built for it
    done = subprocess.run([*_compiler(lang), *std, *flags, "-c", str(source), "-o", str(obj)],
                          capture_output=True, text=True, timeout=300)
    if done.returncode:
        return done
    rt = out.with_suffix(".rt.o")
    subprocess.run([*_compiler("c"), "-std=c11", *flags, "-c", str(ckernel.RUNTIME), "-o", str(rt)], check=True,
                   timeout=300)
    return subprocess.run([*_compiler(lang), str(obj), str(rt), "-o", str(out)], capture_output=True, text=True,
                          timeout=300)


# as C at every x86-64 level this CPU runs (the kernel library is built for each, with vectors as
# wide as the level's: each intrinsic's emulation has a body per width), and as C++ at the widest
# (its converting constructors); elsewhere at the compiler's own target
_LEVELS = ckernel.cpu_levels() if ckernel.x86_64() else [None]
BUILDS = [("c", level) for level in _LEVELS] + [("c++", _LEVELS[-1])]


@pytest.fixture(scope="module", params=BUILDS, ids=[f"{lang}-{level or 'native'}" for lang, level in BUILDS])
def driver(request, tmp_path_factory):
    """run(op, *arrays) -> the driver's output bytes, for the driver built as C or as C++, for
    each x86-64 level."""
    exe = tmp_path_factory.mktemp("ivp") / "ivp_driver"
    built = _compile(request.param[0], DRIVER, exe, request.param[1])
    assert built.returncode == 0, built.stderr

    def run(op: str, *parts, ok: bool = True):
        data = b"".join(np.ascontiguousarray(p).tobytes() for p in parts)
        done = subprocess.run([str(exe), op], input=data, capture_output=True, timeout=60)
        if ok:
            assert done.returncode == 0, done.stderr.decode()
            return done.stdout
        return done
    return run


RNG = np.random.default_rng(41)
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3.4e38, 1.0, -1.0], np.float32)


def _floats(n: int = 16) -> np.ndarray:
    out = (RNG.standard_normal(n) * 10.0 ** RNG.integers(-6, 7, n)).astype(np.float32)
    out[RNG.integers(0, n, 3)] = RNG.choice(SPECIAL, 3)
    return out


def _same_floats(got: np.ndarray, want: np.ndarray) -> bool:
    """bit-identical, but for the payload of NaNs (a NaN must stay a NaN)"""
    nan = np.isnan(want)
    return bool((np.isnan(got) == nan).all() and (got.view(np.uint32)[~nan] == want.view(np.uint32)[~nan]).all())


def _i32(data: bytes) -> np.ndarray:
    return np.frombuffer(data, np.int32)


# --- gather and scatter -----------------------------------------------------------------------
def test_gathera_2xf32_gets_the_float_at_each_byte_offset(driver):
    mem = RNG.standard_normal(16384).astype(np.float32)
    offsets = (RNG.integers(0, 16384, 16) * 4).astype(np.uint32)
    offsets[:2] = [0, 65532]                   # the first and the last float of the window
    got = np.frombuffer(driver("gather_f32", mem, offsets), np.float32)
    assert (got.view(np.uint32) == mem.view(np.uint32)[offsets // 4]).all()


def test_gatheran_2x32_gets_the_int32_at_each_byte_offset(driver):
    mem = RNG.integers(-2**31, 2**31, 16384).astype(np.int32)
    offsets = (RNG.integers(0, 16384, 16) * 4).astype(np.uint32)
    offsets[:2] = [0, 65532]                   # the first and the last word of the window
    assert (_i32(driver("gather_i32", mem, offsets)) == mem[offsets // 4]).all()


def test_gatheranx8s_d2nx8_l_puts_the_bytes_in_the_low_half(driver):
    mem = RNG.integers(-128, 128, 65536).astype(np.int8)
    offsets = RNG.integers(0, 65536, 32).astype(np.uint16)
    offsets[0] = 65535
    got = np.frombuffer(driver("gather8", mem, np.zeros(64, np.int8), offsets)[:64], np.int8)
    assert (got[:32] == mem[offsets]).all() and (got[32:] == 0).all()


def test_gatherd2nx8_h_fills_the_high_half_and_keeps_the_low(driver):
    mem = RNG.integers(-128, 128, 65536).astype(np.int8)
    v = RNG.integers(-128, 128, 64).astype(np.int8)
    offsets = RNG.integers(0, 65536, 32).astype(np.uint16)
    got = np.frombuffer(driver("gather8", mem, v, offsets)[64:], np.int8)
    assert (got[:32] == v[:32]).all() and (got[32:] == mem[offsets]).all()


def test_scattern_2x32_stores_each_lane_at_its_byte_offset_the_last_lane_winning(driver):
    mem = RNG.integers(0, 256, 65536).astype(np.uint8)
    values = RNG.integers(-2**31, 2**31, 16).astype(np.int32)
    offsets = (RNG.integers(0, 16384, 16) * 4).astype(np.uint32)
    offsets[3] = offsets[9] = 65532             # two lanes, one place: lane 9 is the one left
    want = mem.copy().view(np.int32)
    for lane in range(16):
        want[offsets[lane] // 4] = values[lane]
    got = np.frombuffer(driver("scatter", mem, values, offsets), np.int32)
    assert (got == want).all() and got[65532 // 4] == values[9]


def test_scattern_2x32_to_consecutive_words_stores_them_in_order(driver):
    """The emulation's one-copy path (offsets 4 apart from lane 0) writes what lane-by-lane stores do."""
    mem = RNG.integers(0, 256, 65536).astype(np.uint8)
    values = RNG.integers(-2**31, 2**31, 16).astype(np.int32)
    for first in (0, 4, 65536 - 64):
        offsets = (first + 4 * np.arange(16)).astype(np.uint32)
        want = mem.copy()
        want[first:first + 64] = values.view(np.uint8)
        assert np.frombuffer(driver("scatter", mem, values, offsets), np.uint8).tobytes() == want.tobytes()


@pytest.mark.parametrize("op, offset, name, what", [
    ("gather_f32", 65533, "IVP_GATHERAN_2XF32", "lane 5: byte offset 65533 (4 bytes) is beyond the 65536-byte"),
    ("gather_f32", 1 << 20, "IVP_GATHERAN_2XF32", "lane 5: byte offset 1048576 (4 bytes) is beyond"),
    ("gather_f32", 6, "IVP_GATHERAN_2XF32", "lane 5: byte offset 6 is not a multiple of the element's 4 bytes"),
    ("gather_f32", 0xFFFFFFFC, "IVP_GATHERAN_2XF32", "lane 5: byte offset 4294967292 (4 bytes) is beyond"),  # -4
    ("gather_i32", 65534, "IVP_GATHERAN_2X32", "lane 5: byte offset 65534 (4 bytes) is beyond the 65536-byte"),
    ("gather_i32", 2, "IVP_GATHERAN_2X32", "lane 5: byte offset 2 is not a multiple of the element's 4 bytes"),
    ("scatter", 65536, "IVP_SCATTERN_2X32", "lane 5: byte offset 65536 (4 bytes) is beyond the 65536-byte"),
    ("scatter", 0xFFFFFFFC, "IVP_SCATTERN_2X32", "lane 5: byte offset 4294967292 (4 bytes) is beyond"),
    ("scatter", 2, "IVP_SCATTERN_2X32", "lane 5: byte offset 2 is not a multiple of the element's 4 bytes")])
def test_an_offset_beyond_the_window_or_misaligned_aborts_naming_the_intrinsic(driver, op, offset, name, what):
    offsets = np.zeros(16, np.uint32)
    offsets[5] = offset
    mem = np.zeros(65536, np.uint8)
    parts = [mem, offsets] if op.startswith("gather") else [mem, np.zeros(16, np.int32), offsets]
    done = driver(op, *parts, ok=False)
    assert done.returncode != 0 and not done.stdout
    assert f"vdsp: {name}: {what}" in done.stderr.decode()


CTX = types.SimpleNamespace(core="vdsp1", msg_id=1, watchdog_ms=30000, state=None, log=logging.getLogger("vdsp.op.vdsp1"))


@pytest.fixture(scope="module")
def ivp_image(tmp_path_factory):
    """The registry of tests/firmware_src/ivp built into a signed image and loaded, as the firmware does."""
    tmp, key = tmp_path_factory.mktemp("ivp-img"), Ed25519PrivateKey.generate()
    fw_image.build(WINDOW_TREE, tmp / "img", key=key)
    _, registry = fw_image.load(tmp / "img", tmp / "work", signing.Trust({signing.public_raw(key): "t"}))
    registry.init_all(CTX)
    return registry


def _call(registry, op_id: int, inputs: list, outputs: list, **params):
    spec = registry.get(op_id)
    return spec.fn(CTX, inputs, outputs, **schema.validate(spec.name, spec.params, params))


def test_a_kernels_gather_beyond_the_window_fails_its_task_naming_kernel_and_intrinsic(ivp_image):
    data = np.arange(16384, dtype=np.float32)   # buffers are bytes, as the firmware passes shared memory
    out = np.zeros(16, np.float32)
    _call(ivp_image, 0x1440, [data.view(np.uint8)], [out.view(np.uint8)], offset=65532)
    assert (out == data[-1]).all()
    with pytest.raises(errors.OperatorFailed) as exc:
        _call(ivp_image, 0x1440, [data.view(np.uint8)], [out.view(np.uint8)], offset=65536)
    assert exc.value.code == -6000270
    assert ("kernel ivp_window_kernel: IVP_GATHERAN_2XF32: lane 0: byte offset 65536 (4 bytes) is beyond the "
            "65536-byte gather/scatter window of its base") in exc.value.message


# --- arithmetic ---------------------------------------------------------------------------------
def test_subn_2xf32_subtracts_in_single_precision(driver):
    a, b = _floats(), _floats()
    with np.errstate(all="ignore"):
        want = a - b
    assert _same_floats(np.frombuffer(driver("sub", a, b), np.float32), want)


def test_divn_2xf32_divides_correctly_rounded(driver):
    a, b = _floats(), _floats()
    b[0], a[1], b[1] = 0.0, 0.0, 0.0           # x / 0 and 0 / 0
    with np.errstate(all="ignore"):
        want = a / b
    assert _same_floats(np.frombuffer(driver("div", a, b), np.float32), want)


def test_a_scalar_operand_is_broadcast(driver):
    a, s, k = _floats(), np.float32(2.5), np.int32(-7)
    out = driver("broadcast", a, np.array([s]), np.array([k]))
    with np.errstate(all="ignore"):
        assert _same_floats(np.frombuffer(out[:64], np.float32), a - s)
        assert _same_floats(np.frombuffer(out[64:128], np.float32), a / s)
    assert (np.frombuffer(out[128:144], np.uint8) == ~(a > s)).all()
    assert (_i32(out[144:]) == k).all()


@pytest.mark.parametrize("q", [0, 1, 16, 31])
def test_truncn_2xf32_truncates_toward_zero_with_q_fraction_bits_saturating(driver, q):
    a = _floats()
    a[:4] = [2.9, -2.9, 3e9, -3e9]
    x = a.astype(np.float64) * 2.0 ** q
    with np.errstate(invalid="ignore"):
        want = np.where(np.isnan(x), 0, np.clip(np.trunc(np.nan_to_num(x)), -2**31, 2**31 - 1)).astype(np.int64)
    assert (_i32(driver("trunc", a, np.array([q], np.int32))) == want).all()


@pytest.mark.parametrize("q", [0, 31])
def test_truncn_2xf32_at_the_edges_of_int32_nan_and_infinities(driver, q):
    """The lanes where a host's own truncation differs from the semantics: NaN (0), both
    infinities and every product outside int32 (saturated, either sign), -2^31 itself, and the
    largest float below 2^31 (exact)."""
    big = np.float32(2147483520.0)              # the largest float32 below 2^31
    a = np.array([np.nan, -np.nan, np.inf, -np.inf, 2.0**31, -2.0**31, big, -big, 3e38, -3e38, -0.0, 0.5,
                  -0.5, 1.0, -1.0, 2.0**-31], np.float32)
    x = a.astype(np.float64) * 2.0 ** q
    with np.errstate(invalid="ignore"):
        want = np.where(np.isnan(x), 0, np.clip(np.trunc(np.nan_to_num(x)), -2**31, 2**31 - 1)).astype(np.int64)
    assert want[4] == 2**31 - 1 and want[5] == -2**31 and want[0] == 0
    assert (_i32(driver("trunc", a, np.array([q], np.int32))) == want).all()


def test_truncn_2xf32_refuses_fraction_bits_outside_0_to_31(driver):
    done = driver("trunc", _floats(), np.array([32], np.int32), ok=False)
    assert done.returncode != 0 and "vdsp: IVP_TRUNCN_2XF32: fraction bits 32 outside 0..31" in done.stderr.decode()


def test_slln_2x32_shifts_each_lane_by_its_amount(driver):
    a = RNG.integers(-2**31, 2**31, 16).astype(np.int32)
    s = np.array([0, 1, 16, 31, 32, 40, -1, -16, -31, -32, -40, 3, 5, 7, 8, 24], np.int32)
    want = []
    for x, k in zip(a.astype(np.int64) & 0xFFFFFFFF, s):
        k = int(k)
        want.append(0 if abs(k) >= 32 else (int(x) << k) & 0xFFFFFFFF if k >= 0 else int(x) >> -k)
    assert (_i32(driver("sll", a, s)).view(np.uint32) == np.array(want, np.uint32)).all()


@pytest.mark.parametrize("k", [0, 1, 16, 31, 32, -1, -31])
def test_slln_2x32_by_one_amount_in_every_lane_is_the_per_lane_shift(driver, k):
    """A broadcast amount (the emulation's vectorised path) gives what the per-lane rule gives."""
    a = RNG.integers(-2**31, 2**31, 16).astype(np.int32)
    x = a.astype(np.int64) & 0xFFFFFFFF
    want = np.zeros(16, np.int64) if abs(k) >= 32 else (x << k) & 0xFFFFFFFF if k >= 0 else x >> -k
    assert (_i32(driver("sll", a, np.full(16, k, np.int32))).view(np.uint32) == want.astype(np.uint32)).all()


def test_addn_2x32_wraps_modulo_2_to_the_32(driver):
    a = RNG.integers(-2**31, 2**31, 16).astype(np.int32)
    b = RNG.integers(-2**31, 2**31, 16).astype(np.int32)
    a[0], b[0] = 2**31 - 1, 1
    want = ((a.astype(np.int64) + b) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
    got = _i32(driver("add", a, b))
    assert (got == want).all() and got[0] == -2**31


def test_firintn_2xf32_rounds_to_integral_floats_ties_to_even(driver):
    a = _floats()
    a[:12] = [0.5, 1.5, 2.5, -0.5, -2.5, -0.3, -0.0, 8388607.5, -8388609.0, 127.5, -128.5, 1e-45]
    got = np.frombuffer(driver("firint", a), np.float32)
    assert _same_floats(got, np.rint(a))            # NaN stays NaN, infinities and zeros are kept
    assert got[:7].tolist() == [0.0, 2.0, 2.0, -0.0, -2.0, -0.0, -0.0] and np.signbit(got[[3, 5, 6]]).all()


def test_firintn_2xf32_keeps_every_nan_infinity_and_large_float_bit_for_bit(driver):
    """Every level gives the same words: a NaN (signalling or quiet, either sign, any payload), an
    infinity and a float from 2^23 on come out with their bits unchanged."""
    bits = np.array([0x7FA00001, 0xFF800123, 0x7FC00000, 0xFFC12345, 0x7F800000, 0xFF800000, 0x4B000001,
                     0xCB7FFFFF, 0x7F7FFFFF, 0x4B000000, 0x4AFFFFFF, 0x80000000, 0x00000001, 0x3F000000,
                     0xBF000000, 0x3FC00000], np.uint32)
    got = np.frombuffer(driver("firint", bits.view(np.float32)), np.uint32)
    assert (got[:10] == bits[:10]).all()
    # 8388607.5, -0, 1e-45, 0.5, -0.5, 1.5 rounded
    assert got[10:].tolist() == [0x4B000000, 0x80000000, 0, 0, 0x80000000, 0x40000000]


@pytest.mark.parametrize("op", ["max", "min"])
def test_maxn_minn_2x32_pick_the_greater_or_smaller_signed_lane(driver, op):
    a = RNG.integers(-2**31, 2**31, 16).astype(np.int32)
    b = RNG.integers(-2**31, 2**31, 16).astype(np.int32)
    a[:3], b[:3] = [-2**31, 2**31 - 1, -1], [2**31 - 1, -2**31, 1]        # signed, not unsigned
    assert (_i32(driver(op, a, b)) == (np.maximum(a, b) if op == "max" else np.minimum(a, b))).all()


# --- predicates and selection -------------------------------------------------------------------
def test_ulen_2xf32_is_less_equal_or_unordered(driver):
    a, b = _floats(), _floats()
    a[0], b[0] = np.nan, 1.0
    a[1], b[1] = 1.0, np.nan
    a[2] = b[2] = 3.0
    got = np.frombuffer(driver("ule", a, b), np.uint8)
    want = [bool(np.isnan(x) or np.isnan(y) or x <= y) for x, y in zip(a, b)]
    assert got.tolist() == [int(w) for w in want] and got[:3].tolist() == [1, 1, 1]


def test_orbn_2_ors_the_predicates(driver):
    a, b = RNG.integers(0, 2, 16).astype(np.uint8), RNG.integers(0, 2, 16).astype(np.uint8)
    assert (np.frombuffer(driver("orb", a, b), np.uint8) == (a | b)).all()


def test_movn_2x32t_takes_the_first_operand_where_true(driver):
    a = RNG.integers(-2**31, 2**31, 16).astype(np.int32)
    b = RNG.integers(-2**31, 2**31, 16).astype(np.int32)
    t = RNG.integers(0, 2, 16).astype(np.uint8)
    out = driver("movt", a, b, t)
    assert (_i32(out[:64]) == np.where(t == 1, a, b)).all()
    assert (_i32(out[64:]) == np.where(t == 1, -1, b)).all()


def _interleave(hi: np.ndarray, lo: np.ndarray, dtype, odd: int) -> np.ndarray:
    h, l_ = hi.view(dtype), lo.view(dtype)
    return np.stack([l_[odd::2], h[odd::2]], axis=1).reshape(-1).view(np.int32)


def test_seln_2x32i_interleaves_even_or_odd_bytes_or_halfwords(driver):
    hi = RNG.integers(-2**31, 2**31, 16).astype(np.int32)
    lo = RNG.integers(-2**31, 2**31, 16).astype(np.int32)
    out = driver("sel", hi, lo)
    assert (_i32(out[0:64]) == _interleave(hi, lo, np.uint8, 0)).all()
    assert (_i32(out[64:128]) == _interleave(hi, lo, np.uint8, 1)).all()
    assert (_i32(out[128:192]) == _interleave(hi, lo, np.uint16, 0)).all()
    assert (_i32(out[192:256]) == _interleave(hi, lo, np.uint16, 1)).all()


def test_seln_2x32i_packs_four_int8_lanes_into_one_word_as_the_sample_does(driver):
    x, y, z, r = (RNG.integers(-128, 128, 16).astype(np.int32) for _ in range(4))
    xy = _i32(driver("sel", y, x)[0:64])       # 8B_INTERLEAVE_1_EVEN (y, x)
    zr = _i32(driver("sel", r, z)[0:64])
    xyzr = _i32(driver("sel", zr, xy)[128:192])  # INTERLEAVE_1_EVEN (zr, xy)
    packed = np.stack([x, y, z, r], axis=1).astype(np.int8).reshape(-1).view(np.int32)
    assert (xyzr == packed).all()


def test_seln_2x32i_refuses_a_selector_outside_the_subset(driver):
    done = driver("sel_bad", ok=False)
    assert done.returncode != 0 and "vdsp: IVP_SELN_2X32I: selector 0x7f is not in the subset" in done.stderr.decode()


def test_seln_2x32_takes_lane_i_from_word_sel_i_of_lo_then_hi(driver):
    hi, lo = RNG.integers(-2**31, 2**31, 16).astype(np.int32), RNG.integers(-2**31, 2**31, 16).astype(np.int32)
    sel = RNG.integers(0, 32, 16).astype(np.int32)
    sel[:4] = [0, 15, 16, 31]                                   # the first and last word of each
    both = np.concatenate([lo, hi])
    assert (_i32(driver("selv", hi, lo, sel)) == both[sel]).all()
    big = sel + np.array([32, 64, -32, 1 << 20] * 4, np.int32)  # the bits above the low 5 are ignored
    assert (_i32(driver("selv", hi, lo, big)) == both[sel]).all()


KNOWN_SELECTORS = np.array([[3, 0, 15, 7, 7, 1, 2, 14, 8, 9, 10, 4, 5, 6, 11, 12],
                  [16, 31, 17, 30, 18, 29, 19, 28, 20, 27, 21, 26, 22, 25, 23, 24],
                  [31, 0, 16, 15, 40, 65, -1, 1 << 20, 9, 25, 8, 24, 3, 19, 12, 28],
                  [0, 1, 18, 3, 4, 21, 6, 7, 24, 9, 10, 27, 12, 13, 30, 15]], np.int32)  # ivp_driver.c's


def test_seln_2x32_by_selectors_the_compiler_knows_selects_as_by_any(driver):
    """A selector that is a constant of the kernel (a table, as stage 1's) takes the emulation's
    own path on some levels (AVX2: the compiler's shuffles): the same words, the bits above the
    low 5 ignored."""
    hi, lo = RNG.integers(-2**31, 2**31, 16).astype(np.int32), RNG.integers(-2**31, 2**31, 16).astype(np.int32)
    both = np.concatenate([lo, hi])
    got = _i32(driver("selk", hi, lo)).reshape(4, 16)
    assert (got == both[KNOWN_SELECTORS & 31]).all()
    for k in (0, 2):                                            # as the same selector read at run time
        assert (got[k] == _i32(driver("selv", hi, lo, KNOWN_SELECTORS[k]))).all()


def test_seln_2x32_takes_the_values_of_16_points_out_of_five_vectors_as_stage_1_does(driver):
    words = RNG.integers(-2**31, 2**31, 80).astype(np.int32)       # 16 points of 5 values
    v = words.reshape(5, 16)
    for c in range(5):                                          # value c: word 5i + c, by 4 selections
        w = 5 * np.arange(16) + c
        src, lane = w // 16, w % 16
        acc = _i32(driver("selv", v[1], v[0], np.where(src == 1, 16 + lane, lane).astype(np.int32)))
        for k in range(2, 5):
            acc = _i32(driver("selv", v[k], acc, np.where(src == k, 16 + lane, np.arange(16)).astype(np.int32)))
        assert (acc == words[w]).all()


def test_dseln_2x32i_deinterleaves_the_even_and_the_odd_bytes_of_lo_then_hi(driver):
    hi = RNG.integers(-2**31, 2**31, 16).astype(np.int32)
    lo = RNG.integers(-2**31, 2**31, 16).astype(np.int32)
    out = np.frombuffer(driver("dsel", hi, lo), np.uint8)
    both = np.concatenate([lo.view(np.uint8), hi.view(np.uint8)])      # lo's 64 bytes first
    assert (out[:64] == both[1::2]).all()                               # hi_out: the odd bytes
    assert (out[64:] == both[0::2]).all()                               # lo_out: the even bytes


def test_dseln_2x32i_twice_gives_byte_j_of_64_consecutive_words(driver):
    words = RNG.integers(-2**31, 2**31, 64).astype(np.int32)
    v = [words[16 * k:16 * k + 16] for k in range(4)]
    o01, e01 = np.split(np.frombuffer(driver("dsel", v[1], v[0]), np.int32), 2)
    o23, e23 = np.split(np.frombuffer(driver("dsel", v[3], v[2]), np.int32), 2)
    b2, b0 = np.split(np.frombuffer(driver("dsel", e23, e01), np.uint8), 2)
    b3, b1 = np.split(np.frombuffer(driver("dsel", o23, o01), np.uint8), 2)
    assert (np.stack([b0, b1, b2, b3]) == words.view(np.uint8).reshape(64, 4).T).all()


def test_dseln_2x32i_refuses_a_selector_outside_the_subset(driver):
    done = driver("dsel_bad", ok=False)
    assert done.returncode != 0 and "vdsp: IVP_DSELN_2X32I: selector 0x7f is not in the subset" in done.stderr.decode()


# --- aligning stores ------------------------------------------------------------------------------
@pytest.mark.parametrize("at", [0, 5, 63])
@pytest.mark.parametrize("count", [0, 1, 3])
@pytest.mark.parametrize("flush", [0, 1])
def test_sa2nx8_ip_stores_64_bytes_a_step_and_the_flush_writes_the_rest(driver, at, count, flush):
    data = RNG.integers(0, 256, 64 * count).astype(np.uint8)
    got = np.frombuffer(driver("store", np.array([at, count, flush], np.int32), data), np.uint8)
    want = np.full(64 * (count + 2), 0xEE, np.uint8)
    end = at + 64 * count if flush else (at + 64 * count) // 64 * 64   # unflushed: up to the last boundary
    want[at:max(end, at)] = data[:max(end, at) - at]
    assert (got == want).all()


@pytest.mark.parametrize("at", [0, 5, 63])
@pytest.mark.parametrize("count", [0, 1, 3])
def test_svn_2x32_ip_stores_64_bytes_at_the_aligned_address_below_and_advances(driver, at, count):
    data = RNG.integers(-2**31, 2**31, 16 * count).astype(np.int32)
    got = np.frombuffer(driver("sv", np.array([at, count], np.int32), data), np.uint8)
    want = np.full(64 * (count + 2), 0xEE, np.uint8)
    for i in range(count):                      # store i lands at (at + 64 i) rounded down to 64
        want[64 * i:64 * i + 64] = data[16 * i:16 * i + 16].view(np.uint8)
    assert (got == want).all()


@pytest.mark.parametrize("at", [0, 5, 63])
@pytest.mark.parametrize("count", [0, 1, 3])
def test_lvn_2x32_ip_loads_64_bytes_from_the_aligned_address_below_and_advances(driver, at, count):
    space = RNG.integers(0, 256, 64 * (count + 1)).astype(np.uint8)
    got = np.frombuffer(driver("lv", np.array([at, count], np.int32), space), np.uint8)
    assert (got == space[:64 * count]).all()    # load i reads (at + 64 i) rounded down to 64


# --- outside the subset ---------------------------------------------------------------------------
KNOWN = "#include <xtensa/tie/xt_ivpn.h>\nint f(xb_vecN_2xf32 a, xb_vecN_2xf32 b);\n" \
        "int f(xb_vecN_2xf32 a, xb_vecN_2xf32 b) { xb_vecN_2xf32 c = IVP_MULN_2XF32(a, b); return (int)c.s[0]; }\n"
UNKNOWN = "#include <xtensa/tie/xt_ivpn.h>\nint f(xb_vecN_2x32v a);\n" \
          "int f(xb_vecN_2x32v a) { xb_vecN_2x32v c = IVP_FROBN_2X32(a); return c.s[0]; }\n"


@pytest.mark.parametrize("lang", sorted(LANGS))
def test_an_intrinsic_of_the_isa_outside_the_subset_is_a_compile_error_naming_it(tmp_path, lang):
    src = tmp_path / "k.c"
    src.write_text(KNOWN)
    done = _compile(lang, src, tmp_path / "k")
    assert done.returncode != 0
    assert f"IVP_MULN_2XF32 {HOW}: add it to dsp_side/ckernel/include/xtensa/tie/xt_ivpn.h" in done.stderr


@pytest.mark.parametrize("suffix", [".c", ".cc"])
def test_an_unknown_intrinsic_is_refused_by_the_build_naming_it_and_how_to_add_it(tmp_path, suffix):
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "firmware.py").write_text((WINDOW_TREE / "firmware.py").read_text())
    (tree / "window.cc").write_text((WINDOW_TREE / "window.cc").read_text())
    (tree / f"frob{suffix}").write_text(UNKNOWN)
    with pytest.raises(fw_image.ImageError) as exc:
        fw_image.build(tree, tmp_path / "img", key=None)
    text = str(exc.value)
    assert f"frob{suffix} does not compile" in text and re.search(r"IVP_FROBN_2X32\W+ was not declared|"
                                                                  r"implicit declaration of function\W+IVP_FROBN", text)
    assert f"IVP_FROBN_2X32 {HOW} (<xtensa/tie/xt_ivpn.h>): add it to" in text


@pytest.mark.parametrize("std", ["-std=c99", "-std=c11", "-std=c++11", "-std=c++17"])
def test_the_header_compiles_alone_in_c_and_cpp(tmp_path, std):
    """In every standard it claims, -Wall -Wextra -Werror; an alignment register set up but unused is no warning."""
    src = tmp_path / "only.c"
    src.write_text("#include <xtensa/tie/xt_ivpn.h>\nint width(void);\n"      # a valign set up, unused, as in the sample
                   "int width(void) { valign a = IVP_ZALIGN(); return XCHAL_IVPN_SIMD_WIDTH; }\n")
    lang = "c++" if "++" in std else "c"
    done = subprocess.run([*_compiler(lang), *(["-x", "c++"] if lang == "c++" else []), std, *FLAGS, "-c", str(src),
                           "-o", str(tmp_path / "only.o")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
