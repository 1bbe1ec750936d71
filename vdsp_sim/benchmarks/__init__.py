"""The benchmarks ``vdsp bench NAME`` runs: one module ``bench_NAME`` each, installed with the
distribution (``vdsp bench`` works outside a checkout). Each prints its figures as tables in
one style and writes the same JSON schema with ``--json FILE`` (``vdsp_sim.benchmarks.report``);
``--fail-on-miss`` (where a benchmark has targets) is the CI mode: exit status 3 on a miss.

Nothing heavy is imported here: ``vdsp bench --help`` reads the modules' docstrings only.
"""
from __future__ import annotations

import ast
import importlib.util
import pkgutil
from pathlib import Path

# The order 'vdsp bench' runs and lists them in; a new bench_*.py module is listed after these.
ORDER = ("rpc", "cv", "nn", "dnn", "pointcloud", "transport", "perf")


def names() -> list[str]:
    found = {m.name[len("bench_"):] for m in pkgutil.iter_modules([str(Path(__file__).parent)])
             if m.name.startswith("bench_")}
    return [n for n in ORDER if n in found] + sorted(found - set(ORDER))


def summary(name: str) -> str:
    """The first paragraph of ``bench_NAME``'s docstring, on one line, without importing it."""
    spec = importlib.util.find_spec(f"vdsp_sim.benchmarks.bench_{name}")
    if spec is None or spec.origin is None:
        return ""
    doc = ast.get_docstring(ast.parse(Path(spec.origin).read_text())) or ""
    text = " ".join(doc.split("\n\n")[0].split())
    return text[:-1] + "." if text.endswith(":") else text
