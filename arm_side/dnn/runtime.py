"""The model runtime: the hbDNN API on the ARM side of the simulated SoC.

    from arm_side import Soc, dnn
    with Soc() as soc, dnn.Runtime(soc) as rt:          # HB_DNN_* variables are read here
        pack = rt.initialize_from_files(["mobilenetv1_224x224_nv12.vdnn"])
        model = rt.model_handle(pack, rt.model_name_list(pack)[0])
        props = rt.input_tensor_properties(model, 0)
        ...
        task = rt.infer([out], [inp], model, dnn.InferCtrlParam(priority=0))
        rt.wait_task_done(task, 0)      # <= 0 waits for ever
        rt.release_task(task)

BPU layers run on onnxruntime in this process (``bpu.py``); the other layers are made by
their creators (``layers.py``) and run on vdsp0/vdsp1 by RPC or on the ARM side. Every
function raises a ``protocol.errors`` error with the manual's code instead of returning it:
a handle that is not one (or was released) is InvalidPackedDnnHandle (-6000004),
InvalidDnnHandle (-6000005) or InvalidTaskHandle (-6000011); properties a caller may not
change are InvalidArgument (-6000001); a 33rd task alive TaskNumExceedLimit (-6000009).
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from arm_side.dnn.ortload import onnxruntime

from protocol import errors
from arm_side import nn
from arm_side.memory import Mem
from arm_side.dnn import container, plugin, profiler, props as tprops
from arm_side.dnn.bpu import BpuGraph
from arm_side.dnn.config import Config
from arm_side.dnn.dnnlog import DnnLog
from arm_side.dnn.layers import Creators, LayerContext
from arm_side.dnn.tasks import MAX_BATCH, MAX_TASKS, BpuScheduler, InferCtrlParam, Inference, LayerRun, TaskHandle

VERSION = "1.0.0"
DEFAULT_TIMEOUT_MS = 60000      # one RPC of a DSP layer


def version() -> str:
    """hbDNNGetVersion."""
    return f"{VERSION}_(onnxruntime {onnxruntime.__version__})"


class PackedHandle:
    """hbPackedDNNHandle_t: the models of one initialize call."""

    def __init__(self, runtime: "Runtime", models: dict) -> None:
        self.runtime, self.models, self.released = runtime, models, False

    def __repr__(self) -> str:
        return f"PackedHandle({list(self.models)}{', released' if self.released else ''})"


class _Layer:
    __slots__ = ("spec", "graph", "impl")

    def __init__(self, spec, graph, impl) -> None:
        self.spec, self.graph, self.impl = spec, graph, impl


class ModelHandle:
    """hbDNNHandle_t: one model of a pack."""

    def __init__(self, pack: PackedHandle, spec: container.ModelSpec, layers: list) -> None:
        self.pack, self.spec, self.layers = pack, spec, layers
        self.name = spec.name
        self._scratch: list[dict] = []      # free sets of intermediate tensors
        self._all_scratch: list[dict] = []
        self._lock = threading.Lock()
        self.placement: dict[str, str] = {}     # layer -> where it last ran (logged on change)

    def acquire_scratch(self, soc) -> dict:
        """Intermediate tensors for one running inference (cached DDR, reused)."""
        with self._lock:
            if self._scratch:
                return self._scratch.pop()
        inner = [t for t in self.spec.tensors if t not in self.spec.inputs and t not in self.spec.outputs]
        made = {t: soc.mem.alloc_cached(self.spec.tensors[t].aligned_byte_size) for t in inner}
        with self._lock:
            self._all_scratch.append(made)
        return made

    def release_scratch(self, scratch: dict) -> None:
        with self._lock:
            self._scratch.append(scratch)

    def free(self) -> None:
        with self._lock:
            sets, self._all_scratch, self._scratch = self._all_scratch, [], []
        for s in sets:
            for mem in s.values():
                if not mem.freed:
                    mem.free()

    def __repr__(self) -> str:
        return f"ModelHandle({self.name}{', released' if self.pack.released else ''})"


class Runtime:
    """The hbDNN API of one process (or of one configuration of it: each Runtime reads the
    HB_DNN_* variables once, and keyword arguments override them)."""

    def __init__(self, soc, *, enable_dsp: bool | None = None, log_level: int | None = None,
                 plugin_path: str | Path | None = None, profiler_path: str | Path | None = None,
                 environ: dict | None = None, log_stream=None, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> None:
        """Raises InvalidArgument / FileNotFound for bad HB_DNN_* values or plugins."""
        self.config = Config.from_env(environ, enable_dsp=enable_dsp, log_level=log_level,
                                      plugin_path=plugin_path, profiler_path=profiler_path)
        self.soc, self.timeout_ms = soc, timeout_ms
        self.log = DnnLog(self.config.log_level, log_stream)
        self.creators = Creators(self.log)
        self._plugins = plugin.load(self.config.plugin_path) if self.config.plugin_path else {}
        for name, creators in self._plugins.items():
            self.log.info("Plugin", "plugin %s: layers %s", name, ", ".join(sorted(creators)))
        self._lock = threading.RLock()
        self._packs: list[PackedHandle] = []
        self._tasks: list[TaskHandle] = []
        self._closed = False
        self.profiler = profiler.Profiler(self.config.profiler_path,
                                          {"runtime": version(), "enable_dsp": self.config.enable_dsp})
        self.scheduler = BpuScheduler(self._run_inference, cores=2)
        self.log.always("Util", "Run Quantize and Dequantize on %s", "DSP" if self.config.enable_dsp else "ARM")
        self.log.always("Util", "Runtime version = %s", version())

    # --- version, plugins, layer creators ----------------------------------------------------------
    version = staticmethod(version)

    @staticmethod
    def error_desc(code: int) -> str:
        """hbDNNGetErrorDesc."""
        return errors.describe(code)

    def plugin_creators(self) -> dict[str, Callable]:
        """The layer creators of the plugins in HB_DNN_PLUGIN_PATH (a later plugin's wins)."""
        out = {}
        for creators in self._plugins.values():
            out.update(creators)
        return out

    def register_layer_creator(self, layer_type: str, creator: Callable) -> None:
        """hbDNNRegisterLayerCreator: models loaded from now on make ``layer_type`` layers with
        ``creator``. Raises InvalidArgument."""
        with self._lock:
            self.creators.register(layer_type, creator)

    def unregister_layer_creator(self, layer_type: str) -> None:
        """hbDNNUnregisterLayerCreator. Raises InvalidArgument if none is registered for it."""
        with self._lock:
            self.creators.unregister(layer_type)

    # --- loading ---------------------------------------------------------------------------------
    def initialize_from_files(self, paths: Sequence[str | Path]) -> PackedHandle:
        """hbDNNInitializeFromFiles. Raises FileNotFound, InvalidModel, IncompatibleModel,
        ModelNumberExceedLimit, InvalidArgument."""
        paths = self._list(paths, "model file names")
        return self._initialize([(container.read_file(p), str(p)) for p in paths])

    def initialize_from_ddr(self, buffers: Sequence) -> PackedHandle:
        """hbDNNInitializeFromDDR: models from memory (bytes-like objects or Mems, read by the CPU).
        Raises like ``initialize_from_files``."""
        items = []
        for i, buf in enumerate(self._list(buffers, "model buffers")):
            if isinstance(buf, Mem):
                buf = buf.read()
            try:
                items.append((memoryview(buf).cast("B"), f"model buffer {i}"))
            except TypeError:
                raise errors.InvalidArgument(f"model buffer {i} is {type(buf).__name__}, not bytes-like") from None
        return self._initialize(items)

    @staticmethod
    def _list(values, what: str) -> list:
        if isinstance(values, (str, bytes, Path)) or not isinstance(values, (list, tuple)):
            raise errors.InvalidArgument(f"{what} must be a list")
        if not 1 <= len(values) <= container.MAX_MODELS:
            raise errors.ModelNumberExceedLimit(f"{len(values)} {what}: give 1..{container.MAX_MODELS}")
        return list(values)

    def _initialize(self, items: list) -> PackedHandle:
        self._check_open()
        specs = []
        for data, where in items:
            specs += container.unpack(data, where)
        if len(specs) > container.MAX_MODELS:
            raise errors.ModelNumberExceedLimit(f"{len(specs)} models, at most {container.MAX_MODELS} per handle")
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise errors.InvalidModel(f"model names repeat across the files: {names}")
        pack = PackedHandle(self, {})
        with self._lock:
            for spec in specs:
                pack.models[spec.name] = ModelHandle(pack, spec, self._build(spec))
            self._packs.append(pack)
        for name, model in pack.models.items():
            kinds = ", ".join(f"{la.spec.name} ({la.spec.type}, {self.creators.source(la.spec.type) or 'BPU'})"
                              for la in model.layers)
            self.log.info("Model", "model %s loaded: %s", name, kinds)
        return pack

    def _build(self, spec: container.ModelSpec) -> list:
        layers = []
        for ls in spec.layers:
            ins = [spec.tensors[t] for t in ls.inputs]
            outs = [spec.tensors[t] for t in ls.outputs]
            if ls.type == container.BPU:
                graph = BpuGraph(ls.name, ls.graph, dict(zip(ls.inputs, ins)), dict(zip(ls.outputs, outs)))
                layers.append(_Layer(ls, graph, None))
            else:
                layers.append(_Layer(ls, None, self.creators.make(ls.type, ls.name, ls.attrs, ins, outs)))
        return layers

    def release(self, pack: PackedHandle) -> None:
        """hbDNNRelease. Raises InvalidPackedDnnHandle, ModelIsRunning (tasks of its models
        not released)."""
        with self._lock:
            p = self._pack(pack)
            busy = [t for t in self._tasks if any(i.model.pack is p for i in t.inferences)]
            if busy:
                raise errors.ModelIsRunning(f"{len(busy)} task(s) of this pack's models are not released "
                                            "(release_task them first)")
            p.released = True
            self._packs.remove(p)
        for model in p.models.values():
            model.free()
        self._write_profile()

    # --- model information -------------------------------------------------------------------------
    def model_name_list(self, pack: PackedHandle) -> list[str]:
        """hbDNNGetModelNameList. Raises InvalidPackedDnnHandle."""
        return list(self._pack(pack).models)

    def model_handle(self, pack: PackedHandle, name: str) -> ModelHandle:
        """hbDNNGetModelHandle. Raises InvalidPackedDnnHandle, InvalidArgument (no such model)."""
        p = self._pack(pack)
        if not isinstance(name, str) or name not in p.models:
            raise errors.InvalidArgument(f"no model {str(name)[:80]!r} in this pack; models: {list(p.models)}")
        return p.models[name]

    def input_count(self, model: ModelHandle) -> int:
        """hbDNNGetInputCount. Raises InvalidDnnHandle."""
        return len(self._model(model).spec.inputs)

    def output_count(self, model: ModelHandle) -> int:
        """hbDNNGetOutputCount. Raises InvalidDnnHandle."""
        return len(self._model(model).spec.outputs)

    def input_name(self, model: ModelHandle, index: int) -> str:
        """hbDNNGetInputName. Raises InvalidDnnHandle, InvalidArgument (index)."""
        return self._io(model, index, "inputs")

    def output_name(self, model: ModelHandle, index: int) -> str:
        """hbDNNGetOutputName. Raises InvalidDnnHandle, InvalidArgument (index)."""
        return self._io(model, index, "outputs")

    def input_tensor_properties(self, model: ModelHandle, index: int):
        """hbDNNGetInputTensorProperties. Raises InvalidDnnHandle, InvalidArgument (index)."""
        return self._model(model).spec.tensors[self._io(model, index, "inputs")]

    def output_tensor_properties(self, model: ModelHandle, index: int):
        """hbDNNGetOutputTensorProperties. Raises InvalidDnnHandle, InvalidArgument (index)."""
        return self._model(model).spec.tensors[self._io(model, index, "outputs")]

    def _io(self, model: ModelHandle, index: int, kind: str) -> str:
        names = getattr(self._model(model).spec, kind)
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(names):
            raise errors.InvalidArgument(f"{kind[:-1]} index {index!r} is out of range 0..{len(names) - 1}")
        return names[index]

    # --- inference ---------------------------------------------------------------------------------
    def infer(self, outputs: Sequence[nn.Tensor], inputs: Sequence[nn.Tensor], model: ModelHandle,
              ctrl: InferCtrlParam | None = None, task: TaskHandle | None = None) -> TaskHandle:
        """hbDNNInfer: queue one inference and return its task handle at once.

        ``task`` None makes a new handle; to batch small inferences under one handle, pass
        ``more=True`` in every ``ctrl`` but the last and the handle the first call returned.
        Raises InvalidDnnHandle, InvalidTaskHandle, InvalidArgument (tensors, ctrl),
        TaskNumExceedLimit (32 handles alive), TaskBatchSizeExceedLimit (255 under one handle),
        ApiUseError (``task`` is not open for more).
        """
        m = self._model(model)
        ctrl = InferCtrlParam() if ctrl is None else ctrl
        if not isinstance(ctrl, InferCtrlParam):
            raise errors.InvalidArgument(f"inferCtrlParam must be an InferCtrlParam, got {type(ctrl).__name__}")
        ctrl.check()
        ins = self._tensors(inputs, m, "inputs", "input")
        outs = self._tensors(outputs, m, "outputs", "output")
        with self._lock:
            self._check_open()
            if task is None:
                if len(self._tasks) >= MAX_TASKS:
                    raise errors.TaskNumExceedLimit(f"{MAX_TASKS} task handles are alive: release_task some first")
                t = TaskHandle(self)
                self._tasks.append(t)
            else:
                t = self._task(task)
                if not t.open:
                    raise errors.ApiUseError("this task handle takes no more inferences (its last infer did not "
                                             "set more): pass task=None for a new one")
                if len(t.inferences) >= MAX_BATCH:
                    raise errors.TaskBatchSizeExceedLimit(f"at most {MAX_BATCH} inferences under one task handle")
            inf = Inference(t, m, ins, outs, ctrl, self.scheduler.seq())
            t.inferences.append(inf)
            t.pending += 1
            t.open = bool(ctrl.more)
        self.scheduler.put(inf)
        return t

    def _tensors(self, given, model: ModelHandle, kind: str, what: str) -> list:
        names = getattr(model.spec, kind)
        if not isinstance(given, (list, tuple)) or len(given) != len(names):
            raise errors.InvalidArgument(f"the model has {len(names)} {kind}, got "
                                         f"{len(given) if isinstance(given, (list, tuple)) else type(given).__name__}")
        out = []
        for i, (t, name) in enumerate(zip(given, names)):
            where = f"{what}[{i}] ({name})"
            if not isinstance(t, nn.Tensor) or not isinstance(t.mem, Mem):
                raise errors.InvalidArgument(f"{where} must be an nn.Tensor of a Mem of this SoC")
            if t.mem.freed:
                raise errors.InvalidArgument(f"{where}: its memory was freed")
            tprops.check_given(model.spec.tensors[name], t.props, t.mem, where)
            out.append(t)
        return out

    def wait_task_done(self, task: TaskHandle, timeout_ms: float = 0) -> None:
        """hbDNNWaitTaskDone: ``timeout_ms`` > 0 waits that long, <= 0 for ever.

        Raises InvalidTaskHandle, ApiUseError (the handle is still open for ``more``),
        TaskTimeout (the task goes on), or the error the task ended with.
        """
        t = self._task(task)
        if t.open:
            raise errors.ApiUseError("the task handle is still open: its last infer set more, so it cannot end")
        if not t._done.wait(None if timeout_ms <= 0 else timeout_ms / 1000):
            raise errors.TaskTimeout(f"task not done after {timeout_ms} ms")
        if t.released:
            raise errors.InvalidTaskHandle("the task was released while waiting")
        if t.error is not None:
            raise t.error

    def release_task(self, task: TaskHandle) -> None:
        """hbDNNReleaseTask: a queued inference never runs; a running one stops at its next layer.
        Raises InvalidTaskHandle."""
        with self._lock:
            t = self._task(task)
            t.released = True
            self._tasks.remove(t)
        self.scheduler.drop(t)
        t._done.set()       # wakes waiters, who then see it released

    def set_task_done_callback(self, task: TaskHandle, callback: Callable, userdata: Any = None) -> None:
        """hbDNNSetTaskDoneCb: ``callback(task, status, userdata)`` when the task ends (status 0
        or the error code), from a BPU core thread, or at once if it has ended. Raises
        InvalidTaskHandle, InvalidArgument (not callable)."""
        if not callable(callback):
            raise errors.InvalidArgument(f"callback must be callable, got {type(callback).__name__}")
        with self._lock:
            t = self._task(task)
            if not t.done:
                t.callbacks.append((callback, userdata))
                return
        self._call(callback, t, userdata)

    def _call(self, callback: Callable, t: TaskHandle, userdata: Any) -> None:
        try:
            callback(t, t.status, userdata)
        except Exception as exc:   # a user's callback must not stop a BPU core
            self.log.error("Task", "task done callback raised %s: %s", type(exc).__name__, exc)

    # --- running (BPU core threads) -------------------------------------------------------------------
    def _run_inference(self, inf: Inference, core: int) -> None:
        t0 = time.perf_counter()
        error = None
        if not inf.task.released:
            try:
                self._layers(inf, core)
            except errors.VdspError as exc:
                error = exc
            except Exception as exc:    # a layer's bug fails the task, not the runtime
                error = errors.RunTaskFailed(f"{type(exc).__name__}: {exc}")
            if error is not None and not inf.task.released:
                self.log.error("Task", "model %s: inference failed: %s", inf.model.name, error)
        inf.latency_us = (time.perf_counter() - t0) * 1e6
        if error is None and not inf.task.released:
            self.profiler.record(inf.model.name, inf.latency_us, inf.layers)
        self._end(inf, error)

    def _layers(self, inf: Inference, core: int) -> None:
        m, soc = inf.model, self.soc
        scratch = m.acquire_scratch(soc)
        try:
            tensors = {name: t for name, t in zip(m.spec.inputs, inf.inputs)}
            tensors.update({name: t for name, t in zip(m.spec.outputs, inf.outputs)})
            tensors.update({name: nn.Tensor(mem, m.spec.tensors[name]) for name, mem in scratch.items()})
            for layer in m.layers:
                if inf.task.released:
                    raise errors.TaskCancelled("task released")
                spec = layer.spec
                ins, outs = [tensors[n] for n in spec.inputs], [tensors[n] for n in spec.outputs]
                l0 = time.perf_counter()
                if layer.graph is not None:
                    layer.graph.run(soc.mem, ins, outs)
                    run = LayerRun(spec.name, spec.type, f"BPU{core}", 0.0)
                else:
                    ctx = LayerContext(soc, self.config.enable_dsp, inf.ctrl.priority, inf.ctrl.custom_id,
                                       self.timeout_ms)
                    layer.impl.forward(ctx, ins, outs)
                    where = "+".join(sorted({r.core for r in ctx.records})) or "ARM"
                    run = LayerRun(spec.name, spec.type, where, 0.0, sum(r.wall_us for r in ctx.records),
                                   sum(r.exec_us for r in ctx.records))
                run.wall_us = (time.perf_counter() - l0) * 1e6
                inf.layers.append(run)
                self._placed(m, run)
        finally:
            m.release_scratch(scratch)

    def _placed(self, m: ModelHandle, run: LayerRun) -> None:
        side = "DSP" if run.where.startswith("vdsp") else run.where
        key = "BPU" if side.startswith("BPU") else side
        if m.placement.get(run.name) != key:
            m.placement[run.name] = key
            self.log.always("Layer", "model %s: layer %s (%s) runs on %s", m.name, run.name, run.type,
                            f"DSP ({run.where})" if side == "DSP" else "BPU" if key == "BPU" else "ARM")
        self.log.info("Layer", "layer %s (%s) ran on %s: %.3f ms%s", run.name, run.type, run.where,
                      run.wall_us / 1e3, f" (rpc {run.rpc_us / 1e3:.3f} ms, dsp {run.exec_us / 1e3:.3f} ms)"
                      if run.rpc_us else "")

    def _end(self, inf: Inference, error: errors.VdspError | None) -> None:
        t = inf.task
        with self._lock:
            t.pending -= 1
            if error is not None and t.error is None:
                t.error = error
            if t.pending or t.open or t.done:
                return
            t.status = 0 if t.error is None else t.error.code
            t.done_at = time.perf_counter()
            callbacks, t.callbacks = t.callbacks, []
            t._done.set()
        if not t.released:
            for callback, userdata in callbacks:
                self._call(callback, t, userdata)

    # --- handles ---------------------------------------------------------------------------------
    def _pack(self, pack) -> PackedHandle:
        if not isinstance(pack, PackedHandle) or pack.runtime is not self or pack.released:
            raise errors.InvalidPackedDnnHandle(f"{pack!r:.80} is not a packed handle of this runtime "
                                                "(or it was released)")
        return pack

    def _model(self, model) -> ModelHandle:
        if not isinstance(model, ModelHandle) or model.pack.runtime is not self or model.pack.released:
            raise errors.InvalidDnnHandle(f"{model!r:.80} is not a model handle of this runtime "
                                          "(or its pack was released)")
        return model

    def _task(self, task) -> TaskHandle:
        if not isinstance(task, TaskHandle) or task.runtime is not self or task.released:
            raise errors.InvalidTaskHandle(f"{task!r:.80} is not a task handle of this runtime (or it was released)")
        return task

    def _check_open(self) -> None:
        if self._closed:
            raise errors.ApiUseError("the runtime was closed")

    # --- lifetime --------------------------------------------------------------------------------
    def _write_profile(self) -> None:
        try:
            path = self.profiler.write()
        except OSError as exc:
            self.log.error("Profiler", "cannot write %s: %s", self.config.profiler_path, exc)
            return
        if path is not None:
            self.log.info("Profiler", "per-layer times written to %s", path)

    def close(self) -> None:
        """Release every task and pack, stop the BPU cores, write the profile."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            tasks, self._tasks = list(self._tasks), []
            packs, self._packs = list(self._packs), []
        for t in tasks:
            t.released = True
            t._done.set()
        self.scheduler.close()
        for p in packs:
            p.released = True
            for model in p.models.values():
                model.free()
        self._write_profile()
        self.log.close()

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
