"""PROTOCOL.md §7.5 (image descriptors of the CV operators) against the contract, the descriptor
parser and the firmware: the images each operator has, the descriptor's fields and limits, the
formats and their buffers, the minimum buffer sizes, and the worked TASK body, which a SoC in this
process (``vdsp_sim.soc.loopback``) runs as printed (with handles of its own)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import msgpack
import numpy as np
import pytest

from arm_side import Soc
from protocol import errors, messages, wire
from protocol.contract import cv_ops, image_formats
from vdsp_sim.soc.loopback import LoopbackTransport

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)


def section() -> str:
    text = (ROOT / "PROTOCOL.md").read_text()
    start = text.index("### 7.5 Image descriptors (CV operators)")
    return text[start:text.index("\n---\n", start)]


def table(header: str) -> list[list[str]]:
    """The cells of the rows of the markdown table whose header line starts with ``header``."""
    lines = section().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[at + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def names(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_the_image_table_names_every_cv_operator_and_exactly_its_descriptor_parameters():
    rows = table("| Id | Operator | Input images")
    assert [int(names(r[0])[0], 16) for r in rows] == sorted(cv_ops.ENTRIES)
    for id_cell, op_cell, in_cell, out_cell in rows:
        entry = cv_ops.ENTRIES[int(names(id_cell)[0], 16)]
        ins, outs = names(in_cell), names(out_cell)
        assert names(op_cell) == [entry.name]
        # the doc's rule: the parameters of type `any` are exactly the image descriptors
        declared = [n for n, spec in entry.params.items() if spec["type"] == "any"]
        assert sorted(ins + outs) == sorted(declared), entry.name
        assert [n for n in declared if n in ins] == ins, entry.name      # the declared order
        # one buffer at least per image, two at most (NV12_SEPARATE) -- the operator table's ranges
        (in_lo, in_hi), (out_lo, out_hi) = entry.describe()["inputs"], entry.describe()["outputs"]
        assert in_lo == len(ins) and in_hi in (len(ins), 2 * len(ins)), entry.name
        assert out_lo == len(outs) and out_hi in (len(outs), 2 * len(outs)), entry.name


def _desc(**fields) -> dict:
    return {"format": "Y", "width": 8, "height": 4, "stride": 16, "roi": [1, 1, 6, 2], **fields}


def test_the_descriptor_fields_are_the_ones_the_parser_takes():
    rows = table("| Key | Type | Req |")
    keys = [names(r[0])[0] for r in rows]
    assert keys == ["format", "width", "height", "stride", "roi"]
    full = _desc()
    assert set(full) == set(keys)
    image_formats.parse("src", full)
    for key, _type, req, _meaning in rows:
        key = names(key)[0]
        without = {k: v for k, v in full.items() if k != key}
        if req == "yes":
            with pytest.raises(errors.InvalidArgument, match=key):
                image_formats.parse("src", without)
        else:
            assert req == ""
            image_formats.parse("src", without)
    with pytest.raises(errors.InvalidArgument, match="unknown descriptor key"):
        image_formats.parse("src", _desc(planes=2))


def test_the_documented_limits_and_defaults_are_the_parser_s():
    meaning = {names(r[0])[0]: r[3] for r in table("| Key | Type | Req |")}
    side = int(re.search(r"1…(\d+)", meaning["width"]).group(1))
    assert side == int(re.search(r"1…(\d+)", meaning["height"]).group(1))
    stride_max = int(re.search(r"at most (\d+)", meaning["stride"]).group(1))
    for key in ("width", "height"):
        image_formats.parse("src", {"format": "Y", "width": 1, "height": 1, key: side})
        with pytest.raises(errors.InvalidArgument, match=key):
            image_formats.parse("src", {"format": "Y", "width": 1, "height": 1, key: side + 1})
        with pytest.raises(errors.InvalidArgument, match=key):
            image_formats.parse("src", {"format": "Y", "width": 1, "height": 1, key: 0})
    image_formats.parse("src", {"format": "Y", "width": 1, "height": 1, "stride": stride_max})
    with pytest.raises(errors.InvalidArgument, match="stride"):
        image_formats.parse("src", {"format": "Y", "width": 1, "height": 1, "stride": stride_max + 1})
    with pytest.raises(errors.InvalidArgument, match="stride"):      # a multiple of the element size
        image_formats.parse("src", {"format": "S16", "width": 3, "height": 1, "stride": 7})
    img = image_formats.parse("src", {"format": "RGB", "width": 5, "height": 3})
    assert img.stride == 5 * 3 and img.roi == (0, 0, 4, 2)           # no padding; the whole image
    # inclusive ROI: [0, 0, width-1, height-1] is the whole image, one more is outside
    assert image_formats.parse("src", _desc(roi=[0, 0, 7, 3])).size == (8, 4)
    with pytest.raises(errors.InvalidArgument, match="roi"):
        image_formats.parse("src", _desc(roi=[0, 0, 8, 3]))
    # 4:2:0: even sizes, ROI from even to odd coordinates
    nv12 = {"format": "NV12", "width": 8, "height": 4}
    image_formats.parse("src", {**nv12, "roi": [2, 0, 5, 3]})
    for roi in ([1, 0, 5, 3], [2, 0, 4, 3]):
        with pytest.raises(errors.InvalidArgument, match="roi"):
            image_formats.parse("src", {**nv12, "roi": roi})
    with pytest.raises(errors.InvalidArgument, match="even"):
        image_formats.parse("src", {**nv12, "width": 7})


ELEMENTS = {"u8": np.uint8, "u16": np.uint16, "s16": np.int16, "s32": np.int32, "f32": np.float32}


def test_the_formats_table_gives_each_format_s_channels_element_and_buffers():
    rows = table("| Format | Channels | Element | Buffers |")
    assert [names(r[0])[0] for r in rows] == list(image_formats.FORMATS)
    for fmt_cell, channels, element, buffers, _layout in rows:
        img = image_formats.parse("src", {"format": names(fmt_cell)[0], "width": 4, "height": 2})
        assert (img.channels, img.dtype, img.buffers) == (int(channels), np.dtype(ELEMENTS[element]),
                                                          int(buffers)), img.format


def test_the_minimum_buffer_sizes_are_the_ones_the_firmware_checks():
    formulas: dict[str, list[str]] = {}
    for fmt_cell, _buffer, formula in table("| Format | Buffer | Minimum bytes |"):
        fmt = names(fmt_cell)[0] if fmt_cell.startswith("`") else "packed"
        expr = formula.replace("`", "").replace("×", "*").replace("−", "-").replace("/", "//")
        formulas.setdefault(fmt, []).append(expr.replace("element size", "element_size"))
    assert set(formulas) == {"packed", "NV12", "NV12_SEPARATE"}
    for fmt in image_formats.FORMATS:
        for width, height, pad in ((2, 2, 0), (6, 4, 3), (640, 480, 128)):
            img = image_formats.parse("src", {"format": fmt, "width": width, "height": height})
            img = image_formats.parse("src", {"format": fmt, "width": width, "height": height,
                                              "stride": img.stride + pad * img.dtype.itemsize})
            env = {"width": width, "height": height, "stride": img.stride, "channels": img.channels,
                   "element_size": img.dtype.itemsize}
            documented = [eval(e, {"__builtins__": {}}, env) for e in formulas.get(fmt, formulas["packed"])]
            assert documented == img.plane_bytes(), (fmt, width, height, img.stride)


def example() -> tuple[dict, bytes]:
    """The worked example's body as printed in Python notation, and its printed msgpack bytes."""
    text = section()
    literal, hexdump = FENCE.findall(text[text.index("**Example.**"):])[:2]
    return ast.literal_eval(literal), bytes.fromhex(hexdump)


def test_the_worked_example_s_bytes_are_the_printed_body_and_what_the_reference_encoder_sends():
    body, raw = example()
    assert msgpack.unpackb(raw, raw=False, strict_map_key=False) == body
    assert list(body) == ["inputs", "outputs", "params", "owner"]
    frames = wire.encode(messages.task(8, 0x080E, inputs=body["inputs"], outputs=body["outputs"],
                                       params=body["params"], owner=body["owner"]))
    assert frames[1] == raw and len(raw) == 216
    assert frames[0] == bytes.fromhex("56 44 02 10 0e 08 00 00 08") + bytes(15)
    # the buffers hold exactly the minimum of their plane
    src = image_formats.parse("src", body["params"]["src"])
    dst = image_formats.parse("dst", body["params"]["dst"])
    assert [h[1] for h in body["inputs"]] == src.plane_bytes() == [307200, 153600]
    assert [h[1] for h in body["outputs"]] == dst.plane_bytes() == [138176]


def test_the_worked_example_runs_on_a_firmware_and_one_byte_less_is_refused(shm):
    body, _ = example()
    params = body["params"]
    loop = LoopbackTransport("relay")
    try:
        with Soc(transport=loop) as soc:
            y, uv = (soc.mem.alloc(h[1]) for h in body["inputs"])
            dst = soc.mem.alloc(body["outputs"][0][1])
            # a frame of one colour outside the region and another inside: the result is the inside's
            ya = y.array()[:480 * 640].reshape(480, 640)
            uva = uv.array()[:240 * 640].reshape(240, 640)
            ya[:], uva[:] = 7, 7
            ya[120:360, 160:480], uva[60:180, 160:480] = 200, 90
            dst.array()[:] = 0xEE
            task = soc.rpc(0x080E, [y, uv], [dst], params=params)
            assert task.wait(10_000) == {}
            out = dst.array()
            out_y = np.lib.stride_tricks.as_strided(out, (240, 384), (384, 1))
            out_uv = np.lib.stride_tricks.as_strided(out[240 * 384:], (119, 384), (384, 1))
            assert (out_y[:, :320] == 200).all() and (out_y[:, 320:] == 0xEE).all()
            assert (out_uv[:, :320] == 90).all() and (out_uv[:, 320:] == 0xEE).all()
            assert (out[240 * 384 + 119 * 384:] == 90).all()          # the last UV row, 320 bytes
            short = soc.mem.alloc(body["outputs"][0][1] - 1)
            with pytest.raises(errors.InvalidArgument, match="too small"):
                soc.rpc(0x080E, [y, uv], [short], params=params).wait(10_000)
            with pytest.raises(errors.InvalidArgument, match="buffers"):   # Y and UV are two buffers
                soc.rpc(0x080E, [y], [dst], params=params).wait(10_000)
    finally:
        loop.close()
