"""``vdsp sample nn [NAME ...]``: the NN samples (J5 run_nn_test.sh); ``help`` lists them.

Each sub-sample lives in its own module with ``main(argv) -> int``; this table maps
the names a user types to them. Without a name, every sample runs in turn.
"""
from __future__ import annotations

import importlib
import sys

# name -> module under vdsp_sim.samples. Filled in as the samples land.
SUBSAMPLES: dict[str, str] = {
    "quantize": "nn_ops", "dequantize": "nn_ops", "softmax": "nn_ops", "layout": "nn_ops",
    "yolov3": "nn_ops",
    "pointpillar": "nn_pointcloud", "centerpoint": "nn_pointcloud",
    "mobilenet": "nn_mobilenet",
}


def main(argv: list[str] | None = None) -> int:
    argv = list(argv or [])
    available = {name: mod for name, mod in SUBSAMPLES.items()
                 if importlib.util.find_spec(f"vdsp_sim.samples.{mod}") is not None}
    if argv[:1] in (["help"], ["-h"], ["--help"]):
        print("vdsp sample nn [NAME [ARGS...]]: " + (", ".join(available) or "no NN samples yet"))
        return 0
    if not argv:
        if not available:
            print("vdsp sample nn: no NN samples are installed yet", file=sys.stderr)
            return 2
        return max(importlib.import_module(f"vdsp_sim.samples.{mod}").main([name]) for name, mod in available.items())
    name, rest = argv[0], argv[1:]
    if name not in available:
        print(f"vdsp sample nn: unknown sample {name!r}; samples: {', '.join(available) or 'none yet'}", file=sys.stderr)
        return 2
    return importlib.import_module(f"vdsp_sim.samples.{available[name]}").main([name, *rest])
