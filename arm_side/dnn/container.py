"""The model container: what ``initialize_from_files`` / ``initialize_from_ddr`` read.

One file (or buffer) holds one or more models::

    offset 0   8 bytes   magic b"VDNNMDL\\0"
    offset 8   u32 LE    format version (1)
    offset 12  u32 LE    manifest length M (at most 1 MiB)
    offset 16  M bytes   manifest, UTF-8 JSON
    16 + M     ...       blobs, each at manifest["blobs"][name]["offset"] from here

The manifest::

    {"models": [{"name": "mobilenetv1_224x224_nv12",
                 "inputs": ["data"], "outputs": ["prob"],
                 "tensors": {"data": {"dtype": "NV12", "layout": "NCHW", "valid_shape": [1, 3, 224, 224], ...},
                             "logits_q": {"dtype": "S32", ..., "quant": {"type": "SCALE", "scale": [...], "axis": 1}},
                             ...},
                 "layers": [{"name": "bpu_subgraph0", "type": "BPU", "graph": "mobilenet.bpu0",
                             "inputs": ["data"], "outputs": ["logits_q"]},
                            {"name": "logits", "type": "Dequantize", "inputs": ["logits_q"], "outputs": ["logits"]},
                            {"name": "prob", "type": "Softmax", "inputs": ["logits"], "outputs": ["prob"],
                             "attrs": {"axis": 1}}]}],
     "blobs": {"mobilenet.bpu0": {"offset": 0, "size": 123456, "sha256": "..."}}}

A ``BPU`` layer is an ONNX graph (a blob) run by the in-process BPU; every other layer type
is run by the layer its creator makes (built in: Quantize, Dequantize, Softmax; or one
registered with ``register_layer_creator``). Layers run in the order listed; each reads
tensors that are model inputs or outputs of earlier layers, and each tensor is written once.

Everything is checked before use: sizes and counts are bounded, names are short plain
words, blob ranges lie inside the data and match their SHA-256. A malformed container is
InvalidModel (-6000002), another format version IncompatibleModel (-6000014), more than
``MAX_MODELS`` models ModelNumberExceedLimit (-6000003).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import stat
import struct
from pathlib import Path

from protocol import errors
from arm_side.dnn import props as tprops

MAGIC = b"VDNNMDL\0"
FORMAT_VERSION = 1
HEADER = struct.Struct("<8sII")
MAX_FILE_BYTES = 256 << 20
MAX_MANIFEST_BYTES = 1 << 20
MAX_MODELS = 32
MAX_LAYERS = 64
MAX_TENSORS = 256
MAX_BLOBS = 64
MAX_ATTRS_BYTES = 4096
BPU = "BPU"
_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}\Z")


@dataclasses.dataclass(frozen=True)
class LayerSpec:
    name: str
    type: str
    inputs: tuple
    outputs: tuple
    attrs: dict
    graph: bytes | None = None      # BPU layers: the ONNX graph


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    name: str
    inputs: tuple
    outputs: tuple
    tensors: dict       # name -> TensorProperties | ImageProperties
    layers: tuple


def _name(value, what: str) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise errors.InvalidModel(f"{what} must be 1..128 characters of A-Z a-z 0-9 _ . -, got {str(value)[:60]!r}")
    return value


def _names(value, what: str, lo: int, hi: int) -> tuple:
    if not isinstance(value, list) or not lo <= len(value) <= hi:
        raise errors.InvalidModel(f"{what} must be a list of {lo}..{hi} names")
    return tuple(_name(v, f"{what}[{i}]") for i, v in enumerate(value))


# --- writing -----------------------------------------------------------------------------------

def _wire(value):
    return value.to_wire() if hasattr(value, "to_wire") else value


def pack(models: list[dict], blobs: dict[str, bytes]) -> bytes:
    """A container of ``models`` (manifest entries; tensor properties may be objects) and
    ``blobs``. Raises InvalidModel when the result would not read back."""
    offset, table, parts = 0, {}, []
    for name, data in blobs.items():
        data = bytes(data)
        table[name] = {"offset": offset, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        parts.append(data)
        offset += len(data)
    plain = [{**m, "tensors": {k: _wire(v) for k, v in m["tensors"].items()}} for m in models]
    manifest = json.dumps({"models": plain, "blobs": table}, sort_keys=True).encode()
    data = HEADER.pack(MAGIC, FORMAT_VERSION, len(manifest)) + manifest + b"".join(parts)
    unpack(data, "pack()")      # what we write must read back
    return data


def write(path: Path, models: list[dict], blobs: dict[str, bytes]) -> int:
    """Write a container file (atomically, mode 0644). Returns its size."""
    data = pack(models, blobs)
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return len(data)


# --- reading -----------------------------------------------------------------------------------

def read_file(path) -> bytes:
    """The bytes of a model file, opened without following a symlink; a regular file of at
    most MAX_FILE_BYTES. Raises FileNotFound (missing, symlink, not a file), InvalidModel (size)."""
    if not isinstance(path, (str, os.PathLike)) or len(os.fspath(path)) > 4096 or "\0" in os.fspath(path):
        raise errors.InvalidArgument(f"model file name must be a path, got {str(path)[:80]!r}")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        why = "is a symlink" if exc.errno == 40 else exc.strerror
        raise errors.FileNotFound(f"cannot open model file {path}: {why}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise errors.FileNotFound(f"model file {path} is not a regular file")
        if st.st_size > MAX_FILE_BYTES:
            raise errors.InvalidModel(f"model file {path} has {st.st_size} bytes, more than {MAX_FILE_BYTES}")
        chunks, left = [], st.st_size
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def unpack(data, where: str) -> list[ModelSpec]:
    """The models of a container. Raises InvalidModel, IncompatibleModel, ModelNumberExceedLimit."""
    data = memoryview(data).cast("B")
    if len(data) > MAX_FILE_BYTES:
        raise errors.InvalidModel(f"{where}: {len(data)} bytes, more than {MAX_FILE_BYTES}")
    if len(data) < HEADER.size or bytes(data[:8]) != MAGIC:
        raise errors.InvalidModel(f"{where}: not a model container (no {MAGIC!r} magic)")
    _, version, mlen = HEADER.unpack_from(data)
    if version != FORMAT_VERSION:
        raise errors.IncompatibleModel(f"{where}: container format {version}, this runtime reads {FORMAT_VERSION}")
    if mlen > MAX_MANIFEST_BYTES or HEADER.size + mlen > len(data):
        raise errors.InvalidModel(f"{where}: manifest length {mlen} is out of range")
    try:
        manifest = json.loads(bytes(data[HEADER.size:HEADER.size + mlen]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise errors.InvalidModel(f"{where}: manifest is not UTF-8 JSON: {exc}") from None
    if not isinstance(manifest, dict):
        raise errors.InvalidModel(f"{where}: manifest must be a map")
    blobs = _blobs(manifest.get("blobs", {}), data[HEADER.size + mlen:], where)
    models = manifest.get("models")
    if not isinstance(models, list) or not models:
        raise errors.InvalidModel(f"{where}: manifest needs a non-empty list 'models'")
    if len(models) > MAX_MODELS:
        raise errors.ModelNumberExceedLimit(f"{where}: {len(models)} models, at most {MAX_MODELS}")
    out = [_model(m, blobs, f"{where}: models[{i}]") for i, m in enumerate(models)]
    names = [m.name for m in out]
    if len(set(names)) != len(names):
        raise errors.InvalidModel(f"{where}: model names repeat: {names}")
    return out


def _blobs(table, area: memoryview, where: str) -> dict[str, bytes]:
    if not isinstance(table, dict) or len(table) > MAX_BLOBS:
        raise errors.InvalidModel(f"{where}: 'blobs' must be a map of at most {MAX_BLOBS} entries")
    out = {}
    for name, entry in table.items():
        what = f"{where}: blob {_name(name, 'blob name')}"
        if not isinstance(entry, dict):
            raise errors.InvalidModel(f"{what} must be a map")
        off, size, digest = entry.get("offset"), entry.get("size"), entry.get("sha256")
        if not (isinstance(off, int) and isinstance(size, int) and not isinstance(off, bool)
                and not isinstance(size, bool) and off >= 0 and size >= 0 and off + size <= len(area)):
            raise errors.InvalidModel(f"{what}: range {off!r}+{size!r} is outside the {len(area)} bytes of blobs")
        blob = bytes(area[off:off + size])
        if hashlib.sha256(blob).hexdigest() != digest:
            raise errors.InvalidModel(f"{what}: SHA-256 mismatch")
        out[name] = blob
    return out


def _model(raw, blobs: dict, what: str) -> ModelSpec:
    if not isinstance(raw, dict):
        raise errors.InvalidModel(f"{what} must be a map")
    name = _name(raw.get("name"), f"{what}.name")
    what = f"{what} ({name})"
    tensors_raw = raw.get("tensors")
    if not isinstance(tensors_raw, dict) or not 1 <= len(tensors_raw) <= MAX_TENSORS:
        raise errors.InvalidModel(f"{what}.tensors must be a map of 1..{MAX_TENSORS} tensors")
    tensors = {_name(k, f"{what} tensor name"): tprops.from_manifest(v, f"{what} tensor {k}")
               for k, v in tensors_raw.items()}
    inputs = _names(raw.get("inputs"), f"{what}.inputs", 1, 16)
    outputs = _names(raw.get("outputs"), f"{what}.outputs", 1, 16)
    layers_raw = raw.get("layers")
    if not isinstance(layers_raw, list) or not 1 <= len(layers_raw) <= MAX_LAYERS:
        raise errors.InvalidModel(f"{what}.layers must be a list of 1..{MAX_LAYERS} layers")
    written = set(inputs)
    for t in (*inputs, *outputs):
        if t not in tensors:
            raise errors.InvalidModel(f"{what}: tensor {t} has no properties in 'tensors'")
    if set(inputs) & set(outputs) or len(set(inputs)) != len(inputs) or len(set(outputs)) != len(outputs):
        raise errors.InvalidModel(f"{what}: inputs and outputs must be distinct tensors")
    layers = []
    for i, lr in enumerate(layers_raw):
        layer = _layer(lr, blobs, f"{what}.layers[{i}]")
        for t in layer.inputs:
            if t not in written:
                raise errors.InvalidModel(f"{what}: layer {layer.name} reads {t} before any layer writes it")
        for t in layer.outputs:
            if t not in tensors:
                raise errors.InvalidModel(f"{what}: layer {layer.name} writes {t}, which has no properties")
            if t in written:
                raise errors.InvalidModel(f"{what}: tensor {t} is written twice (by layer {layer.name})")
            written.add(t)
        layers.append(layer)
    if len({la.name for la in layers}) != len(layers):
        raise errors.InvalidModel(f"{what}: layer names repeat")
    for t in outputs:
        if t not in written:
            raise errors.InvalidModel(f"{what}: no layer writes the output {t}")
    for t, p in tensors.items():
        if isinstance(p, tprops.ImageProperties) and t not in inputs:
            raise errors.InvalidModel(f"{what}: an NV12 tensor ({t}) can only be a model input")
    return ModelSpec(name, inputs, outputs, tensors, tuple(layers))


def _layer(raw, blobs: dict, what: str) -> LayerSpec:
    if not isinstance(raw, dict):
        raise errors.InvalidModel(f"{what} must be a map")
    name = _name(raw.get("name"), f"{what}.name")
    ltype = _name(raw.get("type"), f"{what}.type")
    attrs = raw.get("attrs", {})
    if not isinstance(attrs, dict) or len(json.dumps(attrs)) > MAX_ATTRS_BYTES:
        raise errors.InvalidModel(f"{what}.attrs must be a map of at most {MAX_ATTRS_BYTES} bytes of JSON")
    graph = None
    if ltype == BPU:
        key = raw.get("graph")
        if key not in blobs:
            raise errors.InvalidModel(f"{what}: BPU layer {name} names graph {str(key)[:60]!r}, which is not a blob")
        graph = blobs[key]
    return LayerSpec(name, ltype, _names(raw.get("inputs"), f"{what}.inputs", 1, 16),
                     _names(raw.get("outputs"), f"{what}.outputs", 1, 16), attrs, graph)
