"""A SoC process's fast exit (vdsp_board.processes.proc.fast_exit): what a normal exit does for it, no teardown."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from vdsp_sim import cli

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent("""
    import atexit, sys, threading, time
    from vdsp_board.processes import proc
    out = sys.argv[1]

    def note(what):
        with open(out, "a") as fh:
            fh.write(what + "\\n")

    class Torn:
        def __del__(self):
            note("torn down")

    kept = Torn()                                   # collected only by the interpreter's teardown
    atexit.register(note, "atexit ran")
    def late():
        time.sleep(0.3)
        note("thread finished")
    threading.Thread(target=late).start()           # not a daemon: a normal exit waits for it
    sys.stdout.write("buffered, no newline")
    proc.fast_exit(3)
""")


def test_fast_exit_joins_threads_runs_atexit_flushes_and_skips_the_teardown(tmp_path):
    out = tmp_path / "notes"
    done = subprocess.run([sys.executable, "-c", CHILD, str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 3, done.stderr
    assert done.stdout == "buffered, no newline"
    assert out.read_text().splitlines() == ["thread finished", "atexit ran"]     # no "torn down"


def test_only_the_core_command_ends_with_a_fast_exit():
    assert cli._fast_exit(["core", "--name", "vdsp0"])
    assert not cli._fast_exit(["up", "-d"])
    assert not cli._fast_exit([])
    assert not cli._fast_exit(["no-such-command"])
