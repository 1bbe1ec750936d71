"""Test firmware with operators that fail the ways DSP code fails (for crash tests)."""
import os
import signal
import time

from protocol import errors

VERSION = "9.9.9"


def raise_error(ctx, inputs, outputs, note):
    """A bug: an exception escapes the operator."""
    raise RuntimeError(f"operator bug ({note})")


def kill_self(ctx, inputs, outputs):
    """The firmware process dies (as if the DSP reset)."""
    os.kill(os.getpid(), signal.SIGKILL)


def hang(ctx, inputs, outputs):
    """Never returns: only the watchdog ends it."""
    while True:
        time.sleep(1)


def refuse(ctx, inputs, outputs):
    """A deliberate error reply: not a crash."""
    raise errors.InvalidArgument("refuse: this operator always refuses")


def register(registry):
    registry.register(0x1400, "raise_error", raise_error, params={"note": {"type": "str", "default": ""}})
    registry.register(0x1401, "kill_self", kill_self)
    registry.register(0x1402, "hang", hang)
    registry.register(0x1403, "refuse", refuse)
