"""One output for every benchmark: tables in one style on stdout, one JSON schema with
``--json FILE``, and one exit rule.

Text: a few lines about the run, then each table as a Markdown pipe table with its columns
padded (readable in a terminal, pasteable into docs), then the targets table
(``| target | value | wanted | verdict | detail |``) and a ``N of M targets met`` line.

JSON (``"schema": "vdsp-bench/1"``)::

    {"schema": "vdsp-bench/1", "benchmark": "rpc", "version": "0.1.0",
     "created": "2026-11-23T22:40:00Z", "args": {...the command line's options...},
     "host": {"cpus": 2, "python": "3.11.2", "platform": "...", "loadavg": [..]},
     "notes": ["..."],
     "tables": [{"title": "...", "columns": ["...", ...], "rows": [[cell, ...], ...]}],
     "verdicts": [{"name": "...", "value": 1.42, "target": "<= 1.5", "passed": true, "detail": "..."}],
     "passed": true,            # null when the benchmark has no targets
     "details": {...}}          # the benchmark's own figures (per-round values and the like)

Table cells are numbers (not rounded), strings or null. Exit status: 0 when the run
completes (PASS or MISS), 1 on an error, 3 with ``--fail-on-miss`` when a target is missed:
the CI mode.
"""
from __future__ import annotations

import datetime
import json
import math
import os
import platform
import sys
from pathlib import Path
from typing import Any

SCHEMA = "vdsp-bench/1"
Cell = Any     # str | int | float | bool | None


def cell_text(value: Cell) -> str:
    """How a cell shows: integers as they are, floats to 3 significant digits at most (no
    exponent), None as '-'."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        size = abs(value)
        return f"{value:.0f}" if size >= 100 else f"{value:.1f}" if size >= 10 else f"{value:.2f}" \
            if size >= 0.1 or size == 0 else f"{value:.3f}"
    return str(value)


def markdown_table(columns: list[str], rows: list[list[Cell]]) -> list[str]:
    """A pipe table whose columns are padded to one width; numeric columns right-aligned."""
    text = [[cell_text(c).replace("|", "\\|") for c in row] for row in rows]    # a '|' in a cell is escaped
    numeric = [all(isinstance(row[i], (int, float)) or row[i] is None for row in rows) and bool(rows)
               for i in range(len(columns))]
    width = [max([len(columns[i])] + [len(r[i]) for r in text]) for i in range(len(columns))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.rjust(width[i]) if numeric[i] else c.ljust(width[i])
                                 for i, c in enumerate(cells)) + " |"
    rule = "|" + "|".join(("-" * (width[i] + 1) + ":") if numeric[i] else "-" * (width[i] + 2)
                          for i in range(len(columns))) + "|"
    return [line(columns), rule] + [line(r) for r in text]


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "item"):          # numpy scalars
        return _jsonable(value.item())
    return str(value)


_LOAD_AT_START: tuple[float, float, float] | None = None


def mark_start() -> None:
    """Record the host's load average as the benchmark's "before" (``python -m
    vdsp_sim.benchmarks`` calls it before the benchmark runs; a Report is made at the end)."""
    global _LOAD_AT_START
    _LOAD_AT_START = os.getloadavg()


class Report:
    """Collect a benchmark's notes, tables and targets; ``finish`` prints and writes them."""

    def __init__(self, benchmark: str, args: Any = None) -> None:
        self.benchmark = benchmark
        self.args = dict(vars(args)) if args is not None and hasattr(args, "__dict__") else dict(args or {})
        self.notes: list[str] = []
        self.tables: list[dict] = []
        self.verdicts: list[dict] = []
        # the load when the benchmark started (mark_start), else now: a report is made after the run
        self.load_before = _LOAD_AT_START if _LOAD_AT_START is not None else os.getloadavg()

    def note(self, text: str) -> None:
        self.notes.append(text)

    def table(self, title: str, columns: list[str], rows: list[list[Cell]]) -> None:
        assert all(len(r) == len(columns) for r in rows), (title, columns)
        self.tables.append({"title": title, "columns": list(columns), "rows": [list(r) for r in rows]})

    def target(self, name: str, value: float | None, op: str, bound: float, detail: str = "") -> bool:
        """A target ``value op bound`` (op ``<=`` or ``>=``); returns whether it is met. A value of
        None is a run that could not measure it (``detail`` says why): not met, shown as NO FIGURE."""
        if value is None:
            passed = False
        else:
            passed = bool(value <= bound) if op == "<=" else bool(value >= bound)
        self.verdicts.append({"name": name, "value": value, "target": f"{op} {bound:g}", "passed": passed,
                              "detail": detail})
        return passed

    @property
    def passed(self) -> bool | None:
        return all(v["passed"] for v in self.verdicts) if self.verdicts else None

    def render(self) -> str:
        after = os.getloadavg()
        lines = [f"vdsp bench {self.benchmark}",
                 f"  {os.cpu_count()} CPUs, load average {self.load_before[0]:.2f} before, {after[0]:.2f} after "
                 "(1 minute)"] + [f"  {n}" for n in self.notes]
        for t in self.tables:
            lines += ["", f"{t['title']}:", ""] + markdown_table(t["columns"], t["rows"])
        if self.verdicts:
            rows = [[v["name"], v["value"], v["target"],
                     "PASS" if v["passed"] else "MISS" if v["value"] is not None else "NO FIGURE", v["detail"] or ""]
                    for v in self.verdicts]
            met = sum(v["passed"] for v in self.verdicts)
            lines += ["", "targets:", ""] + markdown_table(["target", "value", "wanted", "verdict", "detail"], rows)
            lines += ["", f"{met} of {len(self.verdicts)} targets met"]
        return "\n".join(lines)

    def as_json(self, details: Any = None) -> dict:
        return _jsonable({
            "schema": SCHEMA, "benchmark": self.benchmark, "version": _version(),
            "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "args": {k: v for k, v in self.args.items() if k not in ("json", "role", "dir")},
            "host": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                     "loadavg_before": list(self.load_before), "loadavg_after": list(os.getloadavg())},
            "notes": self.notes, "tables": self.tables, "verdicts": self.verdicts, "passed": self.passed,
            "details": details if details is not None else {},
        })

    def finish(self, json_path: str | None = None, fail_on_miss: bool = False, details: Any = None) -> int:
        """Print the report, write the JSON if asked; the exit status (3: a missed target
        with ``fail_on_miss``)."""
        print(self.render(), flush=True)
        if json_path:
            Path(json_path).write_text(json.dumps(self.as_json(details), indent=1) + "\n")
            print(f"figures written to {json_path}", file=sys.stderr, flush=True)
        return 3 if fail_on_miss and self.passed is False else 0


def _version() -> str:
    from vdsp_board.config.version import __version__
    return __version__
