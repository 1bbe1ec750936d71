"""What a signal's exception must not cut short. A signal's Python handler may raise at any
moment in the main thread (``vdsp bench`` turns SIGTERM into SystemExit, Ctrl-C raises
KeyboardInterrupt): a close cut short leaves sockets open, and so does a socket being made
(pyzmq records a socket in its context, for ``destroy``, only once it is made) — the ZeroMQ
context's ``term()`` then waits for them forever."""
from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal's C module: signal.signal and getsignal without their enums
import contextlib
import signal
import threading
from typing import Any, Callable, Iterator


def each(*steps: Callable[[], object]) -> None:
    """Run every step, the rest too after one raised (an interruption); then raise the first
    exception, if any. One interruption therefore cuts short one step only."""
    first: BaseException | None = None
    for step in steps:
        try:
            step()
        except BaseException as exc:        # noqa: BLE001 (raised again below)
            if first is None:
                first = exc
    if first is not None:
        raise first


_SIGNALS = sorted(int(sig) for sig in signal.valid_signals())     # valid_signals takes 0.2 ms


def _handled() -> list[int]:
    """The signals a Python handler takes (those that may raise)."""
    out = []
    for sig in _SIGNALS:
        try:
            if callable(_signal.getsignal(sig)):    # signal.getsignal's enum of the answer: 1.5-6 µs
                out.append(sig)
        except (ValueError, OSError):
            pass
    return out


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """Run the block with the handlers of signals deferred: each signal that comes meanwhile is
    handled (its handler runs, and may raise) after the block. Swapping handlers, not masking
    signals: a process's signal is delivered to any thread not masking it, and the main thread
    then runs the handler. Two ``sigaction`` calls a signal with a Python handler (13 µs in all
    with Ctrl-C's alone): for rare, short blocks (making and closing a link's sockets). Outside
    the main thread (where no handler runs) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    due: list[tuple[int, Any]] = []
    saved: dict[int, Any] = {}
    try:
        for sig in _handled():
            saved[sig] = _signal.signal(sig, lambda signum, frame: due.append((signum, frame)))
        yield
    finally:
        for sig, handler in saved.items():
            _signal.signal(sig, handler)
        for sig, frame in due:
            handler = saved.get(sig)
            if callable(handler):
                handler(sig, frame)
