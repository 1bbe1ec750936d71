"""Per-layer times (HB_DNN_PROFILER_LOG_PATH): counted per model and layer, written as JSON.

``<dir>/profiler.json`` (opened without following a symlink, mode 0600) is rewritten when a
packed handle is released and when the runtime closes::

    {"runtime": "1.0.0_(onnxruntime 1.32.0)", "enable_dsp": true,
     "models": {"mobilenetv1_224x224_nv12": {
         "inferences": {"count": 10, "avg_us": 9000.0, "min_us": ..., "max_us": ...},
         "layers": {"prob": {"type": "Softmax", "where": {"vdsp0": 6, "vdsp1": 4}, "count": 10,
                             "avg_us": 600.0, "min_us": ..., "max_us": ..., "rpc_avg_us": 590.0,
                             "dsp_avg_us": 120.0}, ...}}}}
"""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path

FILE_NAME = "profiler.json"


class _Stat:
    __slots__ = ("count", "total", "lo", "hi")

    def __init__(self) -> None:
        self.count, self.total, self.lo, self.hi = 0, 0.0, float("inf"), 0.0

    def add(self, us: float) -> None:
        self.count += 1
        self.total += us
        self.lo, self.hi = min(self.lo, us), max(self.hi, us)

    def plain(self) -> dict:
        if not self.count:
            return {"count": 0}
        return {"count": self.count, "avg_us": round(self.total / self.count, 1), "min_us": round(self.lo, 1),
                "max_us": round(self.hi, 1)}


class Profiler:
    def __init__(self, directory: Path | None, header: dict) -> None:
        self.directory, self.header = directory, header
        self._lock = threading.Lock()
        self._models: dict[str, dict] = {}

    def record(self, model: str, latency_us: float, layers: list) -> None:
        """One inference: its latency and its ``LayerRun`` s."""
        if self.directory is None:
            return
        with self._lock:
            m = self._models.setdefault(model, {"inferences": _Stat(), "layers": {}})
            m["inferences"].add(latency_us)
            for run in layers:
                entry = m["layers"].setdefault(run.name, {"type": run.type, "where": {}, "time": _Stat(),
                                                          "rpc": _Stat(), "dsp": _Stat()})
                entry["where"][run.where] = entry["where"].get(run.where, 0) + 1
                entry["time"].add(run.wall_us)
                if run.rpc_us:
                    entry["rpc"].add(run.rpc_us)
                    entry["dsp"].add(run.exec_us)

    def snapshot(self) -> dict:
        with self._lock:
            models = {}
            for name, m in self._models.items():
                layers = {}
                for lname, e in m["layers"].items():
                    layers[lname] = {"type": e["type"], "where": dict(e["where"]), **e["time"].plain()}
                    if e["rpc"].count:
                        layers[lname]["rpc_avg_us"] = round(e["rpc"].total / e["rpc"].count, 1)
                        layers[lname]["dsp_avg_us"] = round(e["dsp"].total / e["dsp"].count, 1)
                models[name] = {"inferences": m["inferences"].plain(), "layers": layers}
        return {**self.header, "models": models}

    def write(self) -> Path | None:
        """Rewrite the JSON file; its path, or None without a directory."""
        if self.directory is None:
            return None
        path = self.directory / FILE_NAME
        data = json.dumps(self.snapshot(), indent=1).encode()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        return path
