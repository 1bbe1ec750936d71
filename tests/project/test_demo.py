"""The README's main command, ``./demo.sh``, as a user types it: it runs the samples against a SoC
of its own and leaves nothing behind (no process, no runtime directory, no DDR file)."""
from __future__ import annotations

import glob
import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _env(tmp: Path, shm: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VDSP_")}
    # TMPDIR: where mktemp makes the demo's runtime directory; the DDR directory a private one
    # only so that this test can see it emptied (a user's is /dev/shm)
    env.update(TMPDIR=str(tmp), VDSP_SHM_DIR=str(shm))
    return env


def _processes_naming(path: str) -> list[str]:
    """Processes whose command line or environment names ``path``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                environ = fh.read()
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmdline = fh.read()
        except OSError:
            continue
        if path.encode() in environ or path.encode() in cmdline:
            found.append(pid + ": " + cmdline.replace(b"\0", b" ").decode(errors="replace"))
    return found


# The length of the runtime directory demo.sh makes ($TMPDIR/vdsp-demo.XXXXXX): as long as pytest's
# tmp path made it for a user named 'vdspbar' (issue 35), where vdsp0.fw.sock had 108 characters,
# one past the limit of a unix socket path, and 'vdsp up -d' waited for good.
DEMO_RT_LENGTH = 94


def _long_tmp(base: Path) -> Path:
    """A TMPDIR under ``base`` (a short directory: pytest's tmp path under a normal user's long
    TMPDIR may be past DEMO_RT_LENGTH already) for which demo.sh's runtime dir has DEMO_RT_LENGTH
    characters."""
    pad = DEMO_RT_LENGTH - len(str(base / "t")) - len("/vdsp-demo.XXXXXX")
    assert pad >= 0, f"{base} is too long for this test"
    return base / ("t" + "m" * pad)


def _run(base: Path, script: Path) -> tuple[subprocess.CompletedProcess, Path, Path, set]:
    tmp, shm = _long_tmp(base), base / "shm"
    tmp.mkdir()
    shm.mkdir()
    before = set(glob.glob("/tmp/vdsp-demo.*"))
    proc = subprocess.run(["bash", str(script)], env=_env(tmp, shm), capture_output=True, text=True, timeout=300)
    left = set(glob.glob("/tmp/vdsp-demo.*")) - before
    # 'vdsp up -d' says where the sockets of a runtime dir this long went: that directory must be gone too
    sockets = re.search(r"; sockets in (\S+) \(the runtime dir's path is too long", proc.stdout)
    assert sockets, proc.stdout[-4000:]
    return proc, tmp, shm, left | ({sockets[1]} if os.path.lexists(sockets[1]) else set())


def test_demo_runs_the_samples_and_leaves_nothing_behind(short_dir):
    proc, tmp, shm, new_in_tmp = _run(short_dir, ROOT / "demo.sh")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "8 of 8 NN samples passed" in out, out[-4000:]
    assert "write contact sheet output/cv_contact_sheet.png success" in out, out[-4000:]
    assert not new_in_tmp, f"demo.sh left {sorted(new_in_tmp)}"
    assert sorted(os.listdir(tmp)) == [], "demo.sh left its runtime directory"
    assert sorted(os.listdir(shm)) == [], "demo.sh left DDR files"
    assert _processes_naming(str(tmp)) == []


def test_a_failing_demo_keeps_its_logs_and_says_where(tmp_path, short_dir):
    """When a sample fails, the runtime directory (the SoC's logs) stays, and the last line says where."""
    script = tmp_path / "demo-fails.sh"
    text = (ROOT / "demo.sh").read_text()
    assert "vdsp sample smoke\n" in text
    # the same script, from the checkout, with a sample that fails after the SoC is up
    script.write_text(text.replace('cd "$(dirname "$0")"', f'cd "{ROOT}"')
                      .replace("vdsp sample smoke\n", "vdsp sample smoke\nfalse\n"))
    proc, tmp, shm, _ = _run(short_dir, script)
    assert proc.returncode != 0
    kept = os.listdir(tmp)
    assert len(kept) == 1 and kept[0].startswith("vdsp-demo."), kept
    logs = tmp / kept[0] / "log"
    assert (logs / "relay.log").is_file()
    assert str(logs) in proc.stderr.strip().splitlines()[-1], proc.stderr[-2000:]
    assert sorted(os.listdir(shm)) == [], "the SoC was stopped: no DDR file is left"
    assert _processes_naming(str(tmp)) == []
