"""The CV operators' machinery: one table (:data:`OPERATORS`, one function per contract entry of
``protocol.contract.cv_ops``, shaped by the entry's ``CvForm``) and the call of a function in
either mode. The typed functions are generated from it (``arm_side/cv/functions.py``, by
``python -m vdsp_sim.regen``); ``arm_side.cv`` exports them.

Every function works in two modes, chosen by what it is given:

* **buffers**: ``cv.gaussian_blur(soc, src, dst, ksize=5)`` with :class:`~arm_side.cv.Image`
  descriptors of shared memory; returns the operator's result values (a dict, often empty),
  or the submitted ``Task`` with ``wait=False``.
* **numpy**: ``out = cv.gaussian_blur(soc, pixels, ksize=5)`` with numpy arrays in (and,
  optionally, ``dst=array`` to fill in place, as OpenCV's ``dst=``); the pixels travel
  through pooled shared buffers (``soc.mem.pool``, freed when the Soc closes) and the
  result comes back as a new array. ``threshold`` returns ``(level, dst)`` and ``roi_resize``
  ``(rect, dst)``: result values first, as ``cv2.threshold`` does. The input format is taken
  from the array (2-D uint8 = ``Y``, H x W x 3 uint8 = ``BGR``, 2-D uint16/int16/int32/float32
  = ``U16``/``S16``/``S32``/``F32``) unless ``format=`` names it (``RGB``, ``YUV444``, ``NV12``
  for an (H*3/2) x W array).

Given an :class:`arm_side.AsyncSoc` instead of a ``Soc``, a function returns an awaitable with
the same result; it never waits on the event loop (the pixel copies in and out of the pooled
buffers are plain memory copies on the loop; the DSP's work is awaited).

Parameters have OpenCV's meaning and accept OpenCV's constants (``cv2.BORDER_REFLECT_101``,
``cv2.INTER_AREA``, ``cv2.THRESH_BINARY | cv2.THRESH_OTSU``, ``cv2.MORPH_ELLIPSE``,
``cv2.ROTATE_90_CLOCKWISE``, ``cv2.COLOR_BGR2GRAY``, ``cv2.WARP_INVERSE_MAP`` in a warp's
``interpolation``), OpenCV's keyword names (``borderType``, ``sigmaX``, ``flags`` ...), an int
``ksize`` meaning (k, k), as well as this API's own names (``border="reflect101"``). Misuse
is an ``errors.InvalidArgument`` naming the operator and the parameter. Keywords for every
operator: ``options`` (a ``TaskOptions``) or its fields ``core`` (CORE_ANY, CORE_0, CORE_1),
``priority`` (0..255), ``custom_id``, ``timeout_ms`` (``VDSP_TASK_WAIT_MS``, else 10000, unless given), and ``wait``
(buffers only). Parameter values are checked again on the DSP (InvalidArgument,
-6000001, naming the parameter); submission errors raise as ``Soc.rpc`` does.
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable, Sequence

import numpy as np

from protocol import errors, task_options
from protocol.task_options import DEFAULT, TaskOptions
from protocol.contract import cv_ops as cv
from protocol.contract.operator import OperatorEntry
from protocol.contract import image_formats as formats
from arm_side import task as arm_task
from arm_side.cv import args as a, shapes
from arm_side.cv.image import Image, put_image, read_image
from arm_side.cv.shapes import Ctx, OutFn


def run(soc, op_id: int, inputs: Sequence[tuple[str, Image]], outputs: Sequence[tuple[str, Image]],
        params: dict, *, options: TaskOptions = DEFAULT, wait: bool = True) -> Any:
    """Submit one CV operator: image descriptors go in ``params`` by name, their buffers in order.
    ``wait``: wait for it (``options.timeout_ms``, else ``arm_task.default_wait_ms()``) and return its values."""
    params = dict(params)
    in_bufs: list = []
    out_bufs: list = []
    for bufs, images in ((in_bufs, inputs), (out_bufs, outputs)):
        for name, img in images:
            params[name] = img.desc()
            bufs.extend(img.mems)
    task = soc.rpc(op_id, inputs=in_bufs, outputs=out_bufs, params=params, options=options)
    if not wait:
        return task
    return task.wait(options.timeout_ms if options.timeout_ms is not None else arm_task.default_wait_ms())


# --- the table ---------------------------------------------------------------------------

class _Required:
    def __repr__(self) -> str:
        return "<required>"


REQUIRED: Any = _Required()


@dataclasses.dataclass(frozen=True)
class Param:
    name: str
    default: Any
    convert: a.Converter


@dataclasses.dataclass(frozen=True)
class OpSpec:
    name: str                   # Python name, e.g. gaussian_blur
    wire: str                   # the operator's wire name, e.g. cv.gaussianBlur
    op_id: int
    doc: str
    params: tuple[Param, ...] = ()
    inputs: tuple[str, ...] = ("src",)
    out: OutFn = shapes.RULES["same"].out                    # numpy: the destination's format and size
    extra: tuple[tuple[str, Any], ...] = ()                   # numpy-only keywords and defaults
    cv2_args: tuple[str, ...] | None = None                   # numpy: positional order after src (cv2's)
    result: Callable[[dict, np.ndarray], Any] = lambda values, dst: dst


# OpenCV keyword names -> ours (applied when the operator has the target parameter).
ALIASES = {"borderType": "border", "borderMode": "border", "borderValue": "border_value", "sigmaX": "sigma_x",
           "sigmaY": "sigma_y", "sigmaColor": "sigma_color", "sigmaSpace": "sigma_space",
           "apertureSize": "aperture_size", "L2gradient": "l2_gradient", "blockSize": "block_size",
           "flipCode": "flip_code", "rotateCode": "rotate_code", "kernelX": "kernel_x", "kernelY": "kernel_y",
           "flags": "interpolation", "map1": "map_x", "map2": "map_y"}

# ARM knowledge: how a declared parameter is taken from Python (OpenCV constants and names, an int
# ksize, a 2-D kernel ...), by name, else by its declared type. Defaults are the entries'.
_IMAGES = ("src", "dst", "map_x", "map_y")
_BY_NAME: dict[str, a.Converter] = {
    "border": a.border, "interpolation": a.interpolation, "anchor": a.anchor, "roi": a.rect,
    "pad_value": a.values_per_channel, "type": a.threshold_type, "method": a.threshold_method,
    "shape": a.morph_shape, "rotate_code": a.rotate_code, "code": a.color_code, "kernel": a.kernel2d}
_BY_TYPE: dict[str, a.Converter] = {"int": a.integer, "float": a.real, "bool": a.boolean, "str": a.text,
                                    "float_list": a.floats, "int_list": a.ints}
# ARM-only parameters a declared one is derived from (CvForm.arm_params), with their docstring sentence.
_ARM_PARAMS: dict[str, tuple[Param, str]] = {
    "kernel": (Param("kernel", None, a.morph_kernel),
               "kernel=cv2.getStructuringElement(...) may replace ksize and shape."),
}


def _converter(name: str, spec: dict) -> a.Converter:
    if name == "ksize" and spec["type"] == "int_list":
        return a.ksize
    if name == "matrix":
        return a.matrix(spec["len"] // 3)
    return _BY_NAME.get(name) or _BY_TYPE[spec["type"]]


def _first(key: str) -> Callable[[dict, np.ndarray], Any]:
    return lambda values, dst: (values.get(key), dst)


def _op(entry: OperatorEntry) -> OpSpec:
    """The ARM function of a contract entry: its declared parameters (but the images), with their
    declared defaults (REQUIRED if none), converted as :func:`_converter` says, in the order of
    the entry's form (``CvForm.order``, else the declaration's), then the form's ARM-only
    parameters; numpy mode's destination by the form's rule (``shapes.RULES``)."""
    form = entry.form
    if form is None:
        raise ValueError(f"operator {entry.name}: a CV entry needs its CvForm")
    rule = shapes.RULES[form.shape]
    params = []
    for name in form.order or [n for n in entry.params if n not in _IMAGES]:
        spec = entry.params[name]
        default = spec.get("default", REQUIRED)
        params.append(Param(name, tuple(default) if isinstance(default, list) else default, _converter(name, spec)))
    arm_only = [_ARM_PARAMS[name] for name in form.arm_params]
    doc = " ".join([entry.doc, rule.doc, *(note for _, note in arm_only)]).strip()
    inputs = tuple(n for n in entry.params if n in _IMAGES and n != "dst")
    return OpSpec(entry.function_name, entry.name, entry.id, doc, tuple(params) + tuple(p for p, _ in arm_only),
                  inputs=inputs, out=rule.out, extra=rule.extra, cv2_args=form.cv2_args,
                  result=_first(form.result) if form.result else (lambda values, dst: dst))


#: one function per CV entry, by command id
OPERATORS: tuple[OpSpec, ...] = tuple(_op(cv.ENTRIES[op_id]) for op_id in sorted(cv.ENTRIES))

# The task's options (None: not given; see _control) and the call's own keywords.
CONTROL = (("options", None), *((name, None) for name in task_options.FIELDS), ("wait", True), ("format", None))


# --- one call ------------------------------------------------------------------------------

def _signature(spec: OpSpec, numpy: bool) -> inspect.Signature:
    """Buffers: (soc, inputs..., dst, params...). Numpy: (soc, inputs..., cv2's positional
    parameters...), then everything else (dst included) by keyword, as cv2 takes them."""
    P = inspect.Parameter
    params = [P("soc", P.POSITIONAL_OR_KEYWORD)]
    params += [P(name, P.POSITIONAL_OR_KEYWORD) for name in spec.inputs]
    defaults = {p.name: p.default for p in spec.params}
    defaults.update(dict(CONTROL + spec.extra))
    if numpy:
        order = spec.cv2_args if spec.cv2_args is not None else tuple(p.name for p in spec.params)
        params += [P(name, P.POSITIONAL_OR_KEYWORD, default=defaults[name]) for name in order]
        rest = ["dst"] + [p.name for p in spec.params if p.name not in order]
        params += [P(name, P.KEYWORD_ONLY, default=defaults.get(name)) for name in rest]
        params += [P(name, P.KEYWORD_ONLY, default=default) for name, default in CONTROL + spec.extra
                   if name not in order]
        return inspect.Signature(params)
    params.append(P("dst", P.POSITIONAL_OR_KEYWORD, default=None))
    params += [P(p.name, P.POSITIONAL_OR_KEYWORD, default=p.default) for p in spec.params]
    params += [P(name, P.KEYWORD_ONLY, default=default) for name, default in CONTROL + spec.extra]
    return inspect.Signature(params)


class _Binder:
    """``inspect.Signature.bind`` for one signature, without its cost (a call is ~10 µs, not ~70)."""

    def __init__(self, sig: inspect.Signature) -> None:
        P = inspect.Parameter
        self.sig = sig
        self.positional = [n for n, p in sig.parameters.items() if p.kind == P.POSITIONAL_OR_KEYWORD]
        self.defaults = {n: p.default for n, p in sig.parameters.items() if p.default is not P.empty}
        self.required = [n for n, p in sig.parameters.items() if p.default is P.empty]
        self.names = set(sig.parameters)
        self.must_give = [n for n, d in self.defaults.items() if d is REQUIRED]

    def bind(self, op: str, args: tuple, kw: dict) -> tuple[dict, set[str]]:
        """All arguments by name (defaults filled) and the names given explicitly. Raises InvalidArgument."""
        for alias in [k for k in kw if k in ALIASES]:
            target = ALIASES[alias]
            if target in self.names:
                if target in kw:
                    raise errors.InvalidArgument(f"{op}: parameter {target!r} given twice (as {alias!r} too)")
                kw[target] = kw.pop(alias)
        if len(args) > len(self.positional):
            raise errors.InvalidArgument(f"{op}: too many positional arguments ({len(args)} given, at most "
                                         f"{len(self.positional)}: {', '.join(self.positional)})")
        given = set(self.positional[:len(args)])
        values = self.defaults.copy()
        values.update(zip(self.positional, args))
        for name, value in kw.items():
            if name not in self.names:
                raise errors.InvalidArgument(f"{op}: got an unexpected keyword argument {name!r}")
            if name in given:
                raise errors.InvalidArgument(f"{op}: multiple values for argument {name!r}")
            values[name] = value
            given.add(name)
        for name in self.required:
            if name not in given:
                raise errors.InvalidArgument(f"{op}: missing a required argument: {name!r}")
        for name in self.must_give:
            if values[name] is REQUIRED:
                raise errors.InvalidArgument(f"{op}: parameter {name!r} is required")
        return values, given


def _wire(spec: OpSpec, values: dict, given: set[str]) -> dict:
    """The operator's wire parameters: the defaults (converted once), overridden by what was
    given (two given parameters that set one key must agree)."""
    wire = dict(_DEFAULT_WIRE[spec.name])
    owner: dict[str, str] = {}
    for p in spec.params:
        if p.name not in given or (values[p.name] is None and p.default is None):
            continue
        for key, value in p.convert(spec.name, p.name, values[p.name]).items():
            if key in owner and wire[key] != value:
                raise errors.InvalidArgument(f"{spec.name}: parameters {owner[key]!r} and {p.name!r} disagree "
                                             f"on {key!r}: {wire[key]!r} vs {value!r}")
            wire[key], owner[key] = value, p.name
    return wire


_DEFAULT_WIRE: dict[str, dict] = {}     # operator -> its defaults' wire entries (never mutated)


def _defaults(spec: OpSpec) -> dict:
    wire: dict = {}
    for p in spec.params:
        if p.default is not None and p.default is not REQUIRED:
            for key, value in p.convert(spec.name, p.name, p.default).items():
                wire.setdefault(key, value)
    return wire


def _control(spec: OpSpec, values: dict) -> dict:
    """The task's options (``options=`` and the loose keywords over it; timeout ``VDSP_TASK_WAIT_MS``,
    else 10000 ms, unless given). Raises InvalidArgument naming the operator."""
    if values["timeout_ms"] is not None and not a.is_real(values["timeout_ms"]):
        raise a.fail(spec.name, "timeout_ms", "a number of milliseconds", values["timeout_ms"])
    if not isinstance(values["wait"], bool):
        raise a.fail(spec.name, "wait", "True or False", values["wait"])
    try:
        options = arm_task.task_options(values["options"], {k: v for k in task_options.FIELDS
                                                            if (v := values[k]) is not None},
                                            arm_task.default_wait_ms())
    except errors.VdspError as exc:
        raise type(exc)(f"{spec.name}: {exc.message}") from None
    return {"options": options}


_ASYNC_SOC: list[type] = []


def _is_async(soc: Any) -> bool:
    if not _ASYNC_SOC:
        from arm_side.soc import AsyncSoc    # not at import time: arm_side.soc is above this module
        _ASYNC_SOC.append(AsyncSoc)
    return isinstance(soc, _ASYNC_SOC[0])


def _check_soc(spec: OpSpec, soc: Any) -> None:
    if not (hasattr(soc, "rpc") and hasattr(soc, "mem")):
        raise a.fail(spec.name, "soc", "an arm_side.Soc or AsyncSoc", soc)


def call(spec: OpSpec, binders: tuple[_Binder, _Binder], args: tuple, kw: dict) -> Any:
    """One call of a generated operator function (both modes, sync or async)."""
    first = args[1] if len(args) > 1 else kw.get(spec.inputs[0])
    values, given = binders[isinstance(first, np.ndarray)].bind(spec.name, args, dict(kw))
    soc = values["soc"]
    _check_soc(spec, soc)
    inputs = [values[name] for name in spec.inputs]
    dst = values["dst"]
    wire = _wire(spec, values, given)
    control = _control(spec, values)
    if isinstance(inputs[0], Image):
        extra_given = [name for name, _ in (("format", None),) + spec.extra if name in given]
        for name, value in zip(spec.inputs[1:], inputs[1:]):
            if not isinstance(value, Image):
                raise a.fail(spec.name, name, "a cv.Image when src is one", value)
        if not isinstance(dst, Image):
            raise a.fail(spec.name, "dst", "a cv.Image when src is one (or give numpy arrays for both)", dst)
        if extra_given:
            raise errors.InvalidArgument(f"{spec.name}: {', '.join(extra_given)} apply to numpy input only "
                                         "(with cv.Image buffers, the dst image sets format and size)")
        return _buffers(spec, soc, inputs, dst, wire, control, values["wait"])
    for name, value in zip(spec.inputs, inputs):
        if not isinstance(value, np.ndarray):
            raise a.fail(spec.name, name, "a cv.Image or a numpy array (the same kind as src)", value)
    if dst is not None and not isinstance(dst, np.ndarray):
        raise a.fail(spec.name, "dst", "None or a numpy array for numpy input (pass other parameters "
                                       "by keyword, e.g. ksize=5)", dst)
    if not values["wait"]:
        raise errors.InvalidArgument(f"{spec.name}: wait=False needs cv.Image buffers; numpy input is read back "
                                     "when the task ends (use an AsyncSoc to overlap calls)")
    extra = {name: values[name] for name, _ in (("format", None),) + spec.extra}
    job = _NumpyJob(spec, soc.soc if _is_async(soc) else soc, inputs, dst, wire, control, extra)
    if _is_async(soc):
        return job.run_async()
    return job.run()


def _buffers(spec: OpSpec, soc: Any, inputs: list, dst: Image, wire: dict, control: dict, wait: bool) -> Any:
    named_in = list(zip(spec.inputs, inputs))
    if _is_async(soc):
        from arm_side.aio import AsyncTask
        task = run(soc.soc, spec.op_id, named_in, [("dst", dst)], wire, options=control["options"], wait=False)
        return AsyncTask(task, control["options"].timeout_ms)
    return run(soc, spec.op_id, named_in, [("dst", dst)], wire, wait=wait, **control)


# --- numpy in, numpy out -------------------------------------------------------------------

_BY_DTYPE = {np.dtype(np.uint8): "Y", np.dtype(np.uint16): "U16", np.dtype(np.int16): "S16",
             np.dtype(np.int32): "S32", np.dtype(np.float32): "F32"}


def _format_of(op: str, name: str, arr: np.ndarray, fmt: Any, code: str | None = None) -> tuple[str, int, int]:
    """(format, width, height) of an input array. Raises InvalidArgument naming ``name``."""
    if fmt is None:
        if arr.ndim == 3 and arr.shape[2] == 3 and arr.dtype == np.uint8:
            fmt = code[:3] if code and code[:3] in ("RGB", "BGR") else "BGR"
        elif arr.ndim == 2 and arr.dtype in _BY_DTYPE:
            fmt = _BY_DTYPE[arr.dtype]
        else:
            raise errors.InvalidArgument(
                f"{op}: parameter {name!r} must be a 2-D uint8/uint16/int16/int32/float32 array or an H x W x 3 "
                f"uint8 array (NV12: format='NV12'), got shape {arr.shape} {arr.dtype}")
    if not isinstance(fmt, str) or fmt not in formats.FORMATS:
        raise a.fail(op, "format", f"one of {', '.join(formats.FORMATS)}", fmt)
    if arr.ndim < 2 or arr.size == 0:
        raise errors.InvalidArgument(f"{op}: parameter {name!r} must be an image array, got shape {arr.shape}")
    height = arr.shape[0] * 2 // 3 if fmt in formats.YUV420 else arr.shape[0]
    return fmt, arr.shape[1], height


class _NumpyJob:
    """Pixels in pooled buffers, one task, pixels out; buffers go back to the pool."""

    def __init__(self, spec: OpSpec, soc: Any, arrays: list, dst: np.ndarray | None, wire: dict, control: dict,
                 extra: dict) -> None:
        self.spec, self.soc, self.dst, self.wire, self.control = spec, soc, dst, wire, control
        self.arrays = [np.asarray(x) for x in arrays]
        op = spec.name
        fmt, w, h = _format_of(op, spec.inputs[0], self.arrays[0], extra["format"], wire.get("code"))
        self.in_specs = [(fmt, w, h)] + [_format_of(op, name, arr, None)
                                          for name, arr in zip(spec.inputs[1:], self.arrays[1:])]
        self.out_spec = spec.out(Ctx(op, fmt, w, h, wire, extra, tuple(self.arrays)))
        self.images: list[Image] = []
        self.task: Any = None

    def _image(self, fmt: str, w: int, h: int) -> Image:
        spec = formats.parse("dst", {"format": fmt, "width": w, "height": h})
        pool = self.soc.mem.pool
        mems = []
        try:
            for n in spec.plane_bytes():
                mems.append(pool.acquire(max(n, 1)))
        except BaseException:
            for mem in mems:
                pool.release(mem)
            raise
        img = Image(tuple(mems), spec.format, spec.width, spec.height, spec.stride)
        self.images.append(img)
        return img

    def submit(self) -> None:
        """Copy the inputs into pooled buffers and submit (raises like Soc.rpc)."""
        try:
            ins = []
            for name, arr, (fmt, w, h) in zip(self.spec.inputs, self.arrays, self.in_specs):
                img = self._image(fmt, w, h)
                try:
                    put_image(img, arr)
                except errors.InvalidArgument as exc:
                    raise errors.InvalidArgument(f"{self.spec.name}: parameter {name!r}: {exc.message}") from None
                ins.append((name, img))
            self.out = self._image(*self.out_spec)
            self.task = run(self.soc, self.spec.op_id, ins, [("dst", self.out)], self.wire,
                            options=self.control["options"], wait=False)
        except BaseException:
            self.finish(reuse=True)
            raise

    def collect(self, values: dict) -> Any:
        """Read the result, give the buffers back; what the function returns."""
        try:
            out = read_image(self.out)
        finally:
            self.finish(reuse=True)
        if self.dst is not None:
            if self.dst.shape != out.shape or self.dst.dtype != out.dtype:
                raise errors.InvalidArgument(f"{self.spec.name}: dst array is {self.dst.shape} {self.dst.dtype}, "
                                             f"the result is {out.shape} {out.dtype}")
            self.dst[...] = out
            out = self.dst
        return self.spec.result(values, out)

    def finish(self, reuse: bool) -> None:
        """Buffers back to the pool (reuse), or freed: a task that may still run must not find
        its buffers lent to another call."""
        images, self.images = self.images, []
        for img in images:
            for mem in img.mems:
                if reuse:
                    self.soc.mem.pool.release(mem)
                elif not mem.freed:
                    mem.free()

    def abandon(self) -> None:
        """The wait ended without a result (timeout, cancel): give the task up. Its buffers go
        back to the pool only if it can no longer touch them (it ended, or was cancelled
        before it ran); else they are freed."""
        safe = self.task is None or self.task.done()
        if not safe:
            safe = self.task.release() == "cancelled"
        self.finish(reuse=safe)

    def run(self) -> Any:
        self.submit()
        try:
            values = self.task.wait(self.control["options"].timeout_ms)
        except errors.VdspError as exc:
            if isinstance(exc, errors.TaskTimeout):
                self.abandon()
            else:
                self.finish(reuse=True)     # the task ended: its buffers are free again
            raise
        except BaseException:
            self.abandon()
            raise
        return self.collect(values)

    async def run_async(self) -> Any:
        """``run`` on an AsyncSoc's loop: the copies run on the loop (they are memory copies, not
        waits), the wait is awaited, a timed-out or cancelled task is given up without waiting."""
        import asyncio
        from arm_side.aio import wait_task
        self.submit()
        try:
            values = await wait_task(self.task, self.control["options"].timeout_ms)
        except errors.VdspError as exc:
            if isinstance(exc, errors.TaskTimeout):
                await self.abandon_async()
            else:
                self.finish(reuse=True)
            raise
        except BaseException:   # cancelled: give the task up in a task of its own, without waiting for it
            _ABANDONING.add(giving_up := asyncio.get_running_loop().create_task(self.abandon_async()))
            giving_up.add_done_callback(_ABANDONING.discard)
            raise
        return self.collect(values)

    async def abandon_async(self) -> None:
        """``abandon``, awaited (the release may ask the relay)."""
        from arm_side.aio import release_task
        safe = self.task is None or self.task.done()
        if not safe:
            safe = await release_task(self.task) == "cancelled"
        self.finish(reuse=safe)


_ABANDONING: set = set()     # the tasks giving up cancelled calls (a reference keeps each alive)


# --- the functions -------------------------------------------------------------------------
# The typed functions themselves are generated source (arm_side/cv/functions.py, by
# arm_side.stubgen from OPERATORS and the contract entries); each calls call_named.

SPECS: dict[str, OpSpec] = {spec.name: spec for spec in OPERATORS}
SIGNATURES: dict[str, tuple[inspect.Signature, inspect.Signature]] = {
    spec.name: (_signature(spec, numpy=False), _signature(spec, numpy=True)) for spec in OPERATORS}
_BINDERS: dict[str, tuple[_Binder, _Binder]] = {
    name: (_Binder(sigs[0]), _Binder(sigs[1])) for name, sigs in SIGNATURES.items()}
_DEFAULT_WIRE.update({spec.name: _defaults(spec) for spec in OPERATORS})


def call_named(name: str, args: tuple, kw: dict) -> Any:
    """One call of the CV function ``name`` (both modes, sync or async): what it returns."""
    return call(SPECS[name], _BINDERS[name], args, kw)
