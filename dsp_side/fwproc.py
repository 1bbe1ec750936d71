"""Starting, watching and ending the firmware process of a core.

The firmware of an image built with ``--sanitize=address`` (its header's ``sanitize``) starts
as a fresh interpreter (not a fork of the core's starter) with the compiler's AddressSanitizer
runtime in ``LD_PRELOAD`` (ASan must be the process's first library, before the interpreter's)
and ``ASAN_OPTIONS``: no leak check (the interpreter's own allocations would be reported), and
exit status ``ASAN_EXIT`` at the first report, which the crash reports as ``AddressSanitizer
report``. No ``libasan`` for the core's compiler: the boot fails saying so.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from dsp_side.firmware import CRASH_EXIT
from dsp_side.signing import Signer
from dsp_side.watchdog import WatchdogWord
from vdsp_board.processes.starter import Starter

log = logging.getLogger("vdsp.core")
UNLOAD_GRACE_S = 2.0    # a stopped firmware's destroy hooks get this long before SIGKILL
ASAN_EXIT = 86          # the exit status of a firmware that AddressSanitizer stopped (ASAN_OPTIONS exitcode)
ASAN_OPTIONS = f"detect_leaks=0:abort_on_error=0:exitcode={ASAN_EXIT}:print_summary=1"


class FirmwareProcess:
    """One run of a core's firmware. ``fd`` (its stdout) becomes readable with the
    READY line, and at EOF when the process dies."""

    def __init__(self, core: str, endpoint: str, rt: Path, image_path: Path, *, watchdog_ms: int,
                 signer: Signer, starter: Starter, sanitize: str | None = None) -> None:
        """``signer``: who signed the image, as the core verified it; the firmware process
        verifies the image again against exactly that key (or, for an unsigned image the core
        allowed, against none) before it unpacks or runs anything. ``starter``: the core's
        starter, which starts the process (``vdsp_board.processes.starter``). ``sanitize``: the image's
        header's (``"address"``: started with ASan, see the module). Raises OSError when it
        cannot (``StarterGone`` once the starter is gone; no ASan runtime for an ASan image)."""
        self.core, self.endpoint, self.image_path, self.signer = core, endpoint, image_path, signer
        self.asan = sanitize == "address"
        env = _child_env()
        if self.asan:
            env = _asan_env(env)        # OSError when the compiler has no libasan
        self.workdir = rt / f"{core}.fw"
        self.watchdog_path = str(rt / f"{core}.watchdog")
        self.crash_path = rt / f"{core}.crash.json"
        self.watchdog = WatchdogWord(self.watchdog_path, create=True)
        try:
            self.crash_path.unlink()
        except FileNotFoundError:
            pass
        argv = ["--core", core, "--endpoint", endpoint,
                "--watchdog-file", self.watchdog_path, "--crash-file", str(self.crash_path),
                "--image", str(image_path), "--workdir", str(self.workdir), "--watchdog-ms", str(watchdog_ms),
                *(["--allow-unsigned"] if signer.unsigned else ["--signer", signer.public_b64])]
        try:
            self.proc = starter.start("firmware", argv, env=env, pipe_stdout=True, fresh=self.asan)
        except OSError:
            self.watchdog.close()
            raise
        assert self.proc.stdout is not None     # pipe_stdout
        self.fd = self.proc.stdout.fileno()
        self.started = time.monotonic()
        self.info: dict | None = None
        self._buf = b""
        self.kill_reason: str | None = None
        self.refusal: str | None = None     # why the firmware process refused the image, if it did
        self.failure: str | None = None     # why it could not serve (bind its endpoint), if so

    @property
    def pid(self) -> int:
        return self.proc.pid

    def on_readable(self) -> str:
        """Consume stdout: ``"ready"`` once the READY line is in, ``"dead"`` at EOF, else ``""``.
        A ``{"refused": MESSAGE}`` line instead of READY (the image failed verification) sets
        ``refusal``, a ``{"failed": MESSAGE}`` line (it cannot serve) sets ``failure``; the process
        then exits."""
        chunk = os.read(self.fd, 65536)
        if not chunk:
            return "dead"
        self._buf += chunk
        if self.info is None and self.refusal is None and self.failure is None and b"\n" in self._buf:
            line, _, self._buf = self._buf.partition(b"\n")
            try:
                info = json.loads(line)
            except ValueError:
                self.kill("bad-ready")
                return ""
            if isinstance(info, dict) and "refused" in info:
                self.refusal = str(info["refused"])[:2000]
                return ""
            if isinstance(info, dict) and "failed" in info:
                self.failure = str(info["failed"])[:2000]
                return ""
            self.info = info
            return "ready"
        return ""

    def watchdog_state(self, now_ns: int) -> tuple[float, int, float]:
        """(seconds since last beat, msg_id of the running task or 0, seconds it has run)."""
        beat, msg_id, start = self.watchdog.read()
        return (now_ns - beat) / 1e9, msg_id, ((now_ns - start) / 1e9 if start else 0.0)

    def kill(self, reason: str) -> None:
        """SIGKILL (idempotent); ``reason`` is reported as the crash type."""
        if self.kill_reason is None:
            self.kill_reason = reason
        self.proc.kill()

    def reap(self, timeout: float = 5.0) -> str:
        """Wait for the process; the crash type: exception, watchdog, killed, exit-N."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        if self.kill_reason:
            return self.kill_reason
        if code == CRASH_EXIT:
            return "exception"
        if code == ASAN_EXIT and self.asan:
            return "AddressSanitizer report"
        if code < 0:
            return f"killed by {signal.Signals(-code).name}"
        return f"exit {code}"

    def crash_report(self) -> dict | None:
        try:
            return json.loads(self.crash_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def stop(self) -> None:
        """Unload and wait (a requested stop, not a crash): SIGUSR1 lets the firmware run its
        operators' destroy hooks and exit; after UNLOAD_GRACE_S it is killed."""
        self.kill_reason = self.kill_reason or "stopped"
        try:
            self.proc.send_signal(signal.SIGUSR1)
            self.proc.wait(UNLOAD_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        self.proc.kill()
        self.reap(timeout=3.0)
        self.close()

    def close(self) -> None:
        self.watchdog.close()
        shutil.rmtree(self.workdir, ignore_errors=True)
        for path in (self.watchdog_path, self.crash_path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass


def _child_env() -> dict:
    """The firmware imports the project's packages: make sure they are importable (as a fresh
    interpreter, ``VDSP_FW_TEMPLATE=0``)."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        env["PYTHONPATH"] = os.pathsep.join([root, *paths])
    return env


def _asan_env(env: dict) -> dict:
    """``env`` with ASan's runtime preloaded and its options (see the module). Raises OSError
    when the compiler has no ASan runtime."""
    from dsp_side.ckernel import build as ckbuild      # noqa: PLC0415 (runs the compiler: ASan images only)
    try:
        runtime = ckbuild.asan_runtime()
    except ckbuild.CompileError as exc:
        raise OSError(f"the image was built with --sanitize=address: {exc}") from None
    preload = [p for p in env.get("LD_PRELOAD", "").split() if p]
    return {**env, "LD_PRELOAD": " ".join([runtime, *preload]),
            "ASAN_OPTIONS": ":".join(o for o in (ASAN_OPTIONS, env.get("ASAN_OPTIONS", "")) if o)}
