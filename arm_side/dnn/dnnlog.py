"""The runtime's log: J5 DNN-style lines (``vdsp_board.observability.log.DnnFormatter``) filtered by
``HB_DNN_LOG_LEVEL``: 0 shows nothing, otherwise a line shows when its level is at least
the setting (1 debug, 2 info, 3 warning, 4 error, 5 fatal); ``always`` lines show at every
level but 0.

Each Runtime has a logger of its own (two runtimes in one process may log at two levels).
"""
from __future__ import annotations

import itertools
import logging
import sys

from vdsp_board.observability.log import ALWAYS, DnnFormatter

_THRESHOLD = {1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR, 5: logging.CRITICAL}
_ids = itertools.count(1)


class DnnLog:
    """``log.info("Layer", "layer %s ...", name)``: the module tag first, then the message."""

    def __init__(self, level: int, stream=None) -> None:
        self.level = level
        self.logger = logging.getLogger(f"vdsp.dnn.rt{next(_ids)}")
        self.logger.propagate = False
        self.logger.handlers[:] = []
        if level == 0:
            self.logger.disabled = True
            return
        handler = logging.StreamHandler(stream or sys.stderr)
        handler.setFormatter(DnnFormatter())
        self.logger.addHandler(handler)
        self.logger.setLevel(_THRESHOLD[level])

    def enabled(self, level: int) -> bool:
        return not self.logger.disabled and self.logger.isEnabledFor(level)

    def _log(self, level: int, module: str, msg: str, *args) -> None:
        if self.enabled(level):
            self.logger.log(level, msg, *args, extra={"dnn_module": module}, stacklevel=3)

    def debug(self, module: str, msg: str, *args) -> None:
        self._log(logging.DEBUG, module, msg, *args)

    def info(self, module: str, msg: str, *args) -> None:
        self._log(logging.INFO, module, msg, *args)

    def warning(self, module: str, msg: str, *args) -> None:
        self._log(logging.WARNING, module, msg, *args)

    def error(self, module: str, msg: str, *args) -> None:
        self._log(logging.ERROR, module, msg, *args)

    def fatal(self, module: str, msg: str, *args) -> None:
        self._log(logging.CRITICAL, module, msg, *args)

    def always(self, module: str, msg: str, *args) -> None:
        self._log(ALWAYS, module, msg, *args)

    def close(self) -> None:
        for handler in self.logger.handlers:
            handler.flush()
        self.logger.handlers[:] = []
