"""What a user sees of the command lines before anything runs: --version, help with defaults
and a text for every option, no reST markup, every benchmark described, a quiet exit when the
reader of the output goes away, and VDSP_LOG_LEVEL's numbers as the DSP logger reads them."""
from __future__ import annotations

import argparse
import importlib.metadata
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import arm_side
import vdsp_sim
from vdsp_sim import benchmarks, cli
from vdsp_sim.benchmarks import report
from vdsp_board.observability import log as soclog

ROOT = Path(__file__).resolve().parents[2]
VDSP = [sys.executable, "-m", "vdsp_sim.cli"]
RELAY = [sys.executable, "-m", "relay_server.main"]
CORE = [sys.executable, "-m", "dsp_side.core_main"]
REST = ("``", ":mod:", ":func:", ":class:", ":meth:", ":data:")


def run(argv: list[str], tmp_path: Path, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, VDSP_RUNTIME_DIR=str(tmp_path))
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=ROOT, **kw)


def test_one_version_everywhere(tmp_path):
    version = importlib.metadata.version("vdsp-sim")
    assert vdsp_sim.__version__ == arm_side.__version__ == version
    for argv, prog in ((VDSP, "vdsp"), (RELAY, "dsp_relay_server"), (VDSP + ["core"], "vdsp core"),
                       (CORE, "vdsp core")):
        res = run(argv + ["--version"], tmp_path)
        assert res.returncode == 0 and res.stdout.strip() == f"{prog} (vdsp-sim) {version}", (argv, res)


def _parsers(ap: argparse.ArgumentParser, path: str):
    yield path, ap
    for action in ap._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def test_every_option_has_a_help_text_and_defaults_show():
    from relay_server.main import parser as relay_parser
    missing = [f"{path} {action.option_strings or action.dest}"
               for root, name in ((cli.parser(), "vdsp"), (relay_parser(), "dsp_relay_server"))
               for path, ap in _parsers(root, name) for action in ap._actions
               if not action.help and not isinstance(action, argparse._SubParsersAction)]
    assert missing == []
    up = cli.parser()._subparsers._group_actions[0].choices["up"].format_help()
    up = " ".join(up.split())     # argparse wraps at the terminal's width
    assert "(default: $VDSP_START_TIMEOUT, else 60)" in up and "(default: 30000)" in up
    down = cli.parser()._subparsers._group_actions[0].choices["down"].format_help()
    assert "SIGTERM" in down and "(default: 15.0)" in down


@pytest.mark.parametrize("argv", [[], ["up"], ["down"], ["status"], ["core"], ["sample"], ["bench"], ["deploy"],
                                  ["firmware", "build"], ["sysfs", "echo"], ["health"], ["loadtest"], ["fuzz"],
                                  ["keys"], ["sample", "smoke"], ["sample", "cv"], ["sample", "nn", "quantize"],
                                  ["sample", "nn", "pointpillar"], ["sample", "nn", "mobilenet"]])
def test_help_has_no_rest_markup(argv, tmp_path):
    res = run(VDSP + argv + ["--help"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert not [m for m in REST if m in res.stdout], res.stdout
    if argv == ["sample"]:     # the remainder shows as what it is, not as 'rest'
        assert "rest" not in res.stdout.split() and "ARGS" in res.stdout


def test_every_command_of_the_tree_has_help(capsys):
    """One argparse tree: every command and subcommand answers --help (exit 0, its own usage line,
    no reST markup), and each command is a module of vdsp_sim.commands."""
    from vdsp_sim import commands
    paths = [path for path, _ in _parsers(cli.parser(), "vdsp")]
    assert {p.split()[1] for p in paths if len(p.split()) > 1} == set(commands.NAMES)
    assert {"vdsp keys init", "vdsp firmware stubs", "vdsp sysfs echo", "vdsp trace", "vdsp loadtest"} <= set(paths)
    for path in paths:
        with pytest.raises(SystemExit) as exc:
            cli._main(path.split()[1:] + ["--help"])
        out = capsys.readouterr().out
        assert exc.value.code == 0, path
        first = "usage: " + path if path != "vdsp bench" else "usage: vdsp bench [NAME ...]"
        assert out.startswith(first), (path, out[:200])
        assert not [m for m in REST if m in out], (path, out)


def test_no_command_argument_overwrites_the_dispatch():
    """A subcommand's argument named 'command' (vdsp trace's did) replaced the name of the command
    being run in the namespace, and 'run' would replace its function."""
    clashes = [f"{path} {action.dest}" for path, ap in _parsers(cli.parser(), "vdsp") if path != "vdsp"
               for action in ap._actions if action.dest in ("command", "run")]
    assert clashes == []


def test_relay_help_has_no_rest_markup_and_says_what_each_option_does(tmp_path):
    res = run(RELAY + ["--help"], tmp_path)
    assert res.returncode == 0 and not [m for m in REST if m in res.stdout]
    assert "TaskNumExceedLimit" in res.stdout and "heartbeats" in res.stdout and "(default: 500)" in res.stdout


def test_bench_help_describes_every_benchmark_and_the_ci_mode(tmp_path):
    files = sorted(p.stem[len("bench_"):] for p in Path(benchmarks.__file__).parent.glob("bench_*.py"))
    assert sorted(benchmarks.names()) == files and {"rpc", "cv", "nn", "dnn", "pointcloud", "transport"} <= set(files)
    res = run(VDSP + ["bench", "--help"], tmp_path)
    assert res.returncode == 0
    lines = res.stdout.splitlines()
    for name in files:   # a line per benchmark: its name, then what it measures
        row = next((line for line in lines if line.split()[:1] == [name]), None)
        assert row is not None and len(row.split()) > 4, (name, res.stdout)
    assert "--fail-on-miss" in res.stdout and "exits 3" in res.stdout and "vdsp-bench/1" in res.stdout
    assert not [m for m in REST if m in res.stdout]
    res = run(VDSP + ["bench", "nosuch"], tmp_path)
    assert res.returncode == 2 and "no benchmark 'nosuch'" in res.stderr


def test_bench_cv_help_names_the_command_a_user_typed(tmp_path):
    res = run(VDSP + ["bench", "cv", "--help"], tmp_path)
    assert res.returncode == 0 and res.stdout.startswith("usage: vdsp bench cv"), res.stdout[:200]
    assert "bench_cv.py" not in res.stdout and not [m for m in REST if m in res.stdout]


@pytest.mark.parametrize("name", [n for n in benchmarks.names() if n != "cv"])
def test_every_benchmark_help(name, capsys, monkeypatch):
    from vdsp_sim.benchmarks import __main__ as runner
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    with pytest.raises(SystemExit) as exc:
        runner.main([name, "--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0 and out.startswith(f"usage: vdsp bench {name}"), out[:200]
    assert "--json" in out and "vdsp-bench/1" in re.sub(r"-\s+", "-", out)     # help wraps after a hyphen
    assert not [m for m in REST if m in out]


def test_a_closed_pipe_ends_a_command_quietly(tmp_path):
    """``vdsp status --json | head -1``: the reader is gone before the command writes; it exits 141
    as a piped tool does (argparse's own help printing may swallow the error and exit 0)."""
    for argv in (VDSP + ["status", "--json"], VDSP + ["--help"], VDSP + ["bench", "--help"]):
        read, write = os.pipe()
        os.close(read)          # as head does once it has its line
        try:
            res = subprocess.run(argv, stdout=write, stderr=subprocess.PIPE, text=True, timeout=60, cwd=ROOT,
                                 env=dict(os.environ, VDSP_RUNTIME_DIR=str(tmp_path)))
        finally:
            os.close(write)
        assert "Traceback" not in res.stderr and "BrokenPipe" not in res.stderr, (argv, res.stderr)
        assert "Exception ignored" not in res.stderr, (argv, res.stderr)
        assert res.returncode in ((0, 141) if argv[-1] == "--help" else (141,)), (argv, res.returncode)


def test_log_level_numbers_are_the_dsp_loggers():
    assert [soclog.level(str(n)) for n in range(6)] == [logging.CRITICAL, logging.ERROR, logging.WARNING,
                                                        logging.INFO, logging.DEBUG, logging.DEBUG]
    assert soclog.level("warning") == logging.WARNING and soclog.level("") == logging.INFO
    code = ("from vdsp_board.observability import log; import logging; log.setup('dsp'); l = logging.getLogger('x'); "
            "l.debug('the debug line'); l.info('the info line'); l.warning('the warning line')")
    shown = {}
    for value in ("3", "2", "4"):
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT,
                             env=dict(os.environ, VDSP_LOG_LEVEL=value))
        shown[value] = [w for w in ("debug", "info", "warning") if f"the {w} line" in res.stderr]
    assert shown == {"3": ["info", "warning"], "2": ["warning"], "4": ["debug", "info", "warning"]}


def test_report_prints_one_table_style_and_writes_one_schema(tmp_path, capsys):
    rep = report.Report("demo", argparse.Namespace(quick=True, json=str(tmp_path / "r.json")))
    rep.note("one run")
    rep.table("latency", ["configuration", "p50 µs", "tasks/s"], [["a | b", 312.4, 13903.0], ["c", 1.5, None]])
    assert rep.target("ratio one", 1.42, "<=", 1.5) and not rep.target("ratio two", 0.43, ">=", 0.7)
    assert rep.finish(str(tmp_path / "r.json"), fail_on_miss=False) == 0
    out = capsys.readouterr().out
    assert "| configuration | p50 µs | tasks/s |" in out and "| a \\| b        |    312 |   13903 |" in out
    assert "| c             |   1.50 |       - |" in out
    assert "| ratio two |  0.43 | >= 0.7 | MISS    |" in out and "1 of 2 targets met" in out
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["schema"] == "vdsp-bench/1" and doc["benchmark"] == "demo" and doc["version"] == vdsp_sim.__version__
    assert doc["tables"][0]["rows"][0] == ["a | b", 312.4, 13903.0] and doc["passed"] is False
    assert doc["args"] == {"quick": True}
    assert [v["passed"] for v in doc["verdicts"]] == [True, False]
    assert rep.finish(None, fail_on_miss=True) == 3      # the CI mode
