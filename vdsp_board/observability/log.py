"""Log formats: DSP-side processes log like the J5 DSP firmware, ARM samples like glog.

DSP format: ``[I][DSP][core.py:120][[11-21][18:03:56:987:065]] message`` (level
letters A always, E error, W warning, I info, D debug). The model runtime's (``arm_side.dnn``):
``[A][DNN][runtime.py:80][Util](2024-02-04,18:03:57.223.18) message``. ARM format (glog):
``I1121 18:03:56.987065 27751 sample.py:25] message``.

``VDSP_LOG_LEVEL`` sets the level of every process (default info). It takes a name (``debug``,
``info``, ``warning``, ``error``) or the DSP logger's number, the ``level:3`` of the firmware's
"Init logger, level:3" line: a number shows the lines whose letter comes at or before it in
A E W I D, so 0 always-lines only, 1 errors, 2 warnings, 3 info (the default), 4 (or more)
debug. It is not a Python logging level (``VDSP_LOG_LEVEL=3`` is info, not everything).
``HB_DNN_LOG_LEVEL`` (``arm_side.dnn.dnnlog``) is the model runtime's own setting, with the
BPU SDK's numbering (1 debug ... 5 fatal, 0 none).
"""
from __future__ import annotations

import logging
import os
import stat
import sys
import time
import warnings

from vdsp_board.config import settings

_LETTER = {logging.DEBUG: "D", logging.INFO: "I", logging.WARNING: "W", logging.ERROR: "E",
           logging.CRITICAL: "A"}


class DspFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        t = time.localtime(record.created)
        us = int((record.created % 1) * 1_000_000)
        stamp = f"[{t.tm_mon:02d}-{t.tm_mday:02d}][{time.strftime('%H:%M:%S', t)}:{us // 1000:03d}:{us % 1000:03d}]"
        line = f"[{_LETTER.get(record.levelno, 'I')}][DSP][{record.filename}:{record.lineno}][{stamp}] {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class DnnFormatter(logging.Formatter):
    """The model runtime's lines, like the J5 DNN library's:
    ``[W][DNN][layers.py:25][Layer](2024-02-04,18:03:57.54.947) layer Softmax has been registered.``
    The module tag is the record's ``dnn_module`` (``extra={"dnn_module": "Layer"}``); level
    letters D, I, W, E, F (fatal) and A (always, level ``ALWAYS``)."""

    def format(self, record: logging.LogRecord) -> str:
        t = time.localtime(record.created)
        us = int((record.created % 1) * 1_000_000)
        letter = "A" if record.levelno >= ALWAYS else "F" if record.levelno >= logging.CRITICAL else \
            _LETTER.get(record.levelno, "I")
        stamp = f"{time.strftime('%Y-%m-%d,%H:%M:%S', t)}.{us // 1000}.{us % 1000}"
        module = getattr(record, "dnn_module", "Util")
        return f"[{letter}][DNN][{record.filename}:{record.lineno}][{module}]({stamp}) {record.getMessage()}"


ALWAYS = logging.CRITICAL + 10   # the DNN library's "A" lines: shown at every level but 0 (none)


class GlogFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        t = time.localtime(record.created)
        us = int((record.created % 1) * 1_000_000)
        letter = "IWEF"[min(3, max(0, (record.levelno - 20) // 10))]
        return (f"{letter}{t.tm_mon:02d}{t.tm_mday:02d} {time.strftime('%H:%M:%S', t)}.{us:06d} "
                f"{record.process} {record.filename}:{record.lineno}] {record.getMessage()}")


# VDSP_LOG_LEVEL as a number: the DSP logger's A=0 E=1 W=2 I=3 D=4 (see the module docstring)
DSP_LEVELS = {0: logging.CRITICAL, 1: logging.ERROR, 2: logging.WARNING, 3: logging.INFO, 4: logging.DEBUG}
_NAMES = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "warn": logging.WARNING,
          "error": logging.ERROR, "critical": logging.CRITICAL, "fatal": logging.CRITICAL}


def level(value: str | None = None) -> int:
    """The Python logging level for ``VDSP_LOG_LEVEL`` (or ``value``): a name or a DSP logger
    number (0 always-lines only ... 3 info ... 4 debug); info when unset or not understood."""
    text = (settings.current().log_level if value is None else value).strip().lower()
    if text.isdigit():
        return DSP_LEVELS[min(int(text), 4)]
    return _NAMES.get(text, logging.INFO)


def setup(kind: str = "dsp", stream=None) -> logging.Logger:
    """Configure the root logger once for this process; ``kind`` is ``dsp`` or ``arm``."""
    root = logging.getLogger()
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(DspFormatter() if kind == "dsp" else GlogFormatter())
    root.handlers[:] = [handler]
    root.setLevel(level())
    warnings.showwarning = _warning_line
    return root


def _warning_line(message, category, filename, lineno, file=None, line=None) -> None:
    """A Python warning (numpy's overflow in a kernel fed extreme values, a deprecation) as one
    line of the process's log format, at its source's file:line and subject to its level — not
    the warnings module's two raw lines (the path, then the source line) on stderr."""
    logger = logging.getLogger("py.warnings")
    if logger.isEnabledFor(logging.WARNING):
        logger.handle(logger.makeRecord(logger.name, logging.WARNING, filename, lineno, "%s: %s",
                                        (category.__name__, message), None))


class RateLimited:
    """Warnings about one peer at most once per ``interval_s``; the next says how many were held back.

    A flood of bad input must not become a flood of log lines (one line per peer per interval).
    Keys are forgotten after ``interval_s`` of silence, so the table stays small.
    """

    def __init__(self, logger: logging.Logger, interval_s: float = 10.0, level: int = logging.WARNING) -> None:
        self.logger, self.interval_s, self.level = logger, interval_s, level
        self._last: dict[object, tuple[float, int]] = {}   # key -> (time of last line, suppressed since)

    def warn(self, key: object, fmt: str, *args: object) -> bool:
        """Log ``fmt % args`` for ``key`` unless it logged within the interval. True if it logged."""
        now = time.monotonic()
        last, held = self._last.get(key, (-1e18, 0))
        if now - last < self.interval_s:
            self._last[key] = (last, held + 1)
            return False
        if len(self._last) > 4096:
            self._last = {k: v for k, v in self._last.items() if now - v[0] < self.interval_s}
        self._last[key] = (now, 0)
        if held:
            fmt += f" ({held} similar message(s) held back in the last {self.interval_s:.0f}s)"
        self.logger.log(self.level, fmt, *args)
        return True


def stderr_file() -> str:
    """The regular file this process's stderr (its log, and its children's) is written to, or "" (a
    terminal, a pipe, nothing): read from ``/proc/self/fd/2`` when asked."""
    try:
        target = os.readlink("/proc/self/fd/2")
        if target.startswith("/") and stat.S_ISREG(os.stat(2).st_mode):
            return target
    except OSError:
        pass
    return ""
