"""The SDK session's vocabulary with its drivers (``arm_side.session``): the steps of its connect
sequence, which a driver performs and answers, and the actions it asks for as messages arrive
and the clock ticks.

Each is a frozen, slotted dataclass (those that add no field to their base's are its
subclasses, with its fields, equality and repr); :data:`Step` and :data:`Action` are their unions. A driver
dispatches with ``match`` and ends with ``case _: assert_never(x)``, so a step or an action
added here that a driver does not handle is a mypy error (tests/project/test_effects_typed.py). The
steps but :class:`Wait` and :class:`Pause` are performed alike by both drivers
(``arm_side.links.Links.run``); those two are each driver's own (blocking, or awaiting).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generator, TypeAlias

if TYPE_CHECKING:
    from arm_side.peer import PeerState
    from protocol.wire import Message


@dataclass(frozen=True, slots=True)
class _Of:
    """A step or an action about ``peer``."""
    peer: PeerState


@dataclass(frozen=True, slots=True)
class _At(_Of):
    """... and ``endpoint``, where a link of it goes."""
    endpoint: str


# --- actions: Session.receive / tick / connected ... -> the driver carries them out ---------------
@dataclass(frozen=True, slots=True)
class Send(_Of):
    """Send ``frames`` on ``peer``'s link (a heartbeat; HELLO on a control link connected again)."""
    frames: list


class OpenFw(_At):
    """Direct mode: open a link to ``peer``'s firmware at ``endpoint`` and say HELLO there."""
    __slots__ = ()


class CloseFw(_Of):
    """Direct mode: close ``peer``'s firmware link (its firmware went away)."""
    __slots__ = ()


class HelloFw(_Of):
    """Direct mode: say HELLO again on ``peer``'s firmware link (answered HB_DSP_BUSY, or forgotten)."""
    __slots__ = ()


Action: TypeAlias = Send | OpenFw | CloseFw | HelloFw


# --- steps of the connect sequence (Session.connect): what each is answered with -----------------
class Open(_At):
    """Open a watched link for ``peer`` to ``endpoint``, keyed by its name. -> None"""
    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Hello(_Of):
    """Send ``msg`` on ``peer``'s link, tracked. -> its Request"""
    msg: Message


class Refused(_Of):
    """Did ``peer``'s server refuse our key? -> why, or None"""
    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Wait:
    """Wait up to ``seconds`` for ``request`` to end. -> None"""
    request: Any
    seconds: float


@dataclass(frozen=True, slots=True)
class Pause(_Of):
    """Sleep ``seconds`` (``peer``: whose connect sequence pauses). -> None"""
    seconds: float


class Release(_Of):
    """Close ``peer``'s links. -> None"""
    __slots__ = ()


class Forget(_Of):
    """Forget that ``peer``'s connection closed before now. -> None"""
    __slots__ = ()


class Dead(_Of):
    """Will ``peer``'s link never carry a message again (ipc: connected once, and its attempt
    failed or its connection closed)? -> bool"""
    __slots__ = ()


class Linked(_Of):
    """What has become of ``peer``'s link's connection, for an error that ends the wait for its
    server: 'connected', 'connecting', 'failed' (its one attempt), 'closed'. -> str"""
    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Act(_Of):
    """Carry out the session's ``actions`` for ``peer``. -> None"""
    actions: list[Action]


Step: TypeAlias = Open | Hello | Refused | Wait | Pause | Release | Forget | Dead | Linked | Act
Waiting: TypeAlias = Wait | Pause       # the steps each driver performs in its own way
Steps: TypeAlias = Generator[Step, Any, None]

