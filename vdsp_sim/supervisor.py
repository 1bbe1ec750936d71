"""Moved to :mod:`vdsp_sim.soc.supervisor` (issue 44).

This old path warns, then is that module, for one release."""
# rooms: old paths on purpose
from typing import TYPE_CHECKING

from vdsp_board._moved import follow

if TYPE_CHECKING:
    from vdsp_sim.soc.supervisor import *  # noqa: F403

follow(__spec__, __name__)
