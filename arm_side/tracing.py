"""The SDK's part of the SoC trace: stamps of each task's submit, completion and waits.

::

    tracer = tracing.sdk_tracer()          # one per process (shared by its Soc objects)
    tracer.submit(msg_id, op, core=0, priority=0, custom_id=0, nbytes=0)   # just before the TASK is sent
    tracer.complete(msg_id, code=0, core="vdsp0")                         # when its reply arrived
    t0 = tracer.wait_begin(); ...; tracer.wait_end(msg_id, t0)            # around a blocking wait

Each call is a no-op costing one attribute read (and, in ``submit``, a clock read every
call and one ``os.stat`` every 0.25 s) unless tracing is on: ``vdsp trace``, or
``Soc(trace=PATH)`` through :class:`SocTrace`, which turns it on for the whole SoC and writes
the merged Chrome/Perfetto trace to PATH when the Soc closes. Stamps are ``time.time_ns()``
like every other process's (see ``vdsp_board.observability.trace``); the client is known to the
other processes by its DDR owner and pid, which the SDK's trace file header carries.
"""
from __future__ import annotations

import atexit
import os
import threading
from pathlib import Path

from vdsp_board.observability import trace, tracefmt
from vdsp_board.memory import ddr

_lock = threading.Lock()
_tracer: "SdkTracer | None" = None


class SdkTracer:
    def __init__(self, directory: Path | None = None, owner: int | None = None,
                 check_every_s: float = trace.CHECK_EVERY_S) -> None:
        if owner is None:
            try:
                owner = ddr.current_owner().id
            except Exception:
                owner = None
        self.rec = trace.Recorder("client", f"pid{os.getpid()}", directory=directory, owner=owner,
                                  check_every_s=check_every_s)
        self.lock = threading.Lock()
        self.rec.poll(force=True)

    @property
    def on(self) -> bool:
        return self.rec.on

    def poll(self, force: bool = False) -> bool:
        with self.lock:
            return self.rec.poll(force)

    def submit(self, msg_id: int, op: int, *, core: int = 0, priority: int = 0, custom_id: int = 0,
               nbytes: int = 0, ts: int | None = None) -> None:
        """A TASK is about to be sent (call before the send: the relay's stamp follows it)."""
        self.rec.poll()
        if self.rec.on:
            self.rec.emit("submit", (msg_id, op, core, priority, custom_id, nbytes), ts)

    def submit_task(self, msg_id: int, op: int, options, inputs: list, outputs: list) -> None:
        """``submit`` of a TASK with ``options`` and these wire handles; the fields are only
        gathered while tracing is on."""
        rec = self.rec
        rec.poll()
        if rec.on:
            rec.emit("submit", (msg_id, op, int(options.core), options.priority, options.custom_id,
                                sum(h[1] for h in (*inputs, *outputs))), None)

    def complete(self, msg_id: int, *, code: int = 0, core: str = "", exec_us: int = 0, queue_us: int = 0,
                 ts: int | None = None) -> None:
        """The task's reply arrived (``code`` 0: RESULT, else the error's code)."""
        if self.rec.on:
            self.rec.emit("complete", (msg_id, code, core, exec_us, queue_us), ts)

    def wait_begin(self) -> int:
        """The start stamp of a blocking wait (0 while tracing is off)."""
        return trace.now_ns() if self.rec.on else 0

    def wait_end(self, msg_id: int, t0: int) -> None:
        if t0 and self.rec.on:
            self.rec.emit("wait", {"id": msg_id, "t0": t0, "tid": threading.get_native_id()})

    def flush(self) -> None:
        with self.lock:
            self.rec.flush()

    def close(self) -> None:
        with self.lock:
            self.rec.close()


def _close_at_exit() -> None:
    if _tracer is not None:
        _tracer.close()


def sdk_tracer() -> SdkTracer:
    """This process's tracer (created at the first call; its file is closed at exit)."""
    global _tracer
    try:
        directory = trace.trace_dir()
    except Exception:       # no runtime directory: a tracer that is never on
        directory = None
    tracer = _tracer
    if tracer is None or tracer.rec.directory != directory:
        with _lock:
            if _tracer is None or _tracer.rec.directory != directory:
                if _tracer is not None:     # $VDSP_RUNTIME_DIR changed (tests): a tracer for the new one
                    _tracer.close()
                else:
                    atexit.register(_close_at_exit)
                _tracer = SdkTracer(directory)
            tracer = _tracer
    return tracer


class SocTrace:
    """``Soc(trace=PATH)``: tracing on for the whole SoC from :meth:`start` to :meth:`finish`,
    which writes the merged Chrome/Perfetto trace (JSON) to PATH; ``vdsp trace --png OUT
    --from PATH`` draws it. If a session was already active (``vdsp trace`` runs), it is left
    running and PATH gets the part recorded so far."""

    def __init__(self, path, directory: Path | None = None) -> None:
        self.path = Path(path)
        self.directory = directory if directory is not None else trace.trace_dir()
        self.session: dict | None = None
        self.owned = False

    def start(self) -> "SocTrace":
        before = trace.active(self.directory)
        self.session = trace.start(self.directory)
        self.owned = before is None or before.get("session") != self.session["session"]
        sdk_tracer().poll(force=True)
        if self.owned:      # the relay, cores and firmwares look at the switch within about a second
            trace.wait_started(Path(self.session["dir"]))
        return self

    def finish(self) -> dict:
        """Stop (if we started it), merge, write PATH; returns the trace document."""
        if self.session is None:
            return {}
        tracer = sdk_tracer()
        if self.owned:
            trace.stop(self.directory)
            tracer.poll(force=True)         # our own file ends now
            trace.wait_ended(Path(self.session["dir"]))
        else:
            tracer.flush()
        doc = tracefmt.merge(Path(self.session["dir"]), self.path, self.session)
        self.session = None
        return doc

