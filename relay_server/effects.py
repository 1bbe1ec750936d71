"""What the relay's engine (``relay_server.engine``) asks its adapter to do: the effects in
``RelayEngine.out``, carried out in order and then cleared.

:data:`Effect` is their union. An adapter dispatches on it with ``match`` and ends with
``case _: assert_never(effect)``, so an effect added here that a driver does not handle is a
mypy error (tests/project/test_effects_typed.py).

Frozen, slotted classes, not ``@dataclass(frozen=True, slots=True)``: this module is compiled
with the engine (``vdsp_sim.native_build.MODULES``), and mypyc compiles a class's own
``__init__`` but runs a dataclass's generated one at interpreted speed. Measured (a loop compiled
with mypyc making one effect per turn): 69 ns such a class, 72 ns a tuple, 278 ns a dataclass,
623 ns a frozen one. The relay makes one per task sent and one per reply: one TASK and its RESULT
through the compiled engine and the adapter's dispatch cost about 0.5 µs more than with tagged
tuples (12.4 -> 12.95 µs; with frozen dataclasses, and positional captures in the dispatch, 15.9-16.6
µs; scripts/relay_engine_cost.py).
Frozen: every field is ``Final`` (a mypy error to assign; the compiled build's attribute is
read-only); ``__match_args__`` gives ``match`` their positional fields; equality and repr are
by fields, as a dataclass's.
"""
from __future__ import annotations

from typing import Final, TypeAlias


class _Fields:
    """Equality and repr by the fields a subclass names in its ``__match_args__``."""

    __slots__ = ()

    def _fields(self) -> tuple:
        return tuple(getattr(self, name) for name in getattr(type(self), "__match_args__"))

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and isinstance(other, _Fields) and self._fields() == other._fields()

    def __repr__(self) -> str:
        return type(self).__name__ + "(" + ", ".join(map(repr, self._fields())) + ")"


class ToClient(_Fields):
    """Send ``frames`` to client ``identity`` (a reply, an EVENT, a heartbeat)."""

    __slots__ = ("identity", "frames")
    __match_args__: Final = ("identity", "frames")

    def __init__(self, identity: bytes, frames: list) -> None:
        self.identity: Final = identity
        self.frames: Final = frames


class _ToCore(_Fields):
    """Send ``frames`` on one of core ``index``'s links."""

    __slots__ = ("index", "frames")
    __match_args__: Final = ("index", "frames")

    def __init__(self, index: int, frames: list) -> None:
        self.index: Final = index
        self.frames: Final = frames


class ToCtl(_ToCore):
    """Send ``frames`` on core ``index``'s control link."""

    __slots__ = ()


class ToFw(_ToCore):
    """Send ``frames`` on core ``index``'s firmware link (a task, a CANCEL, our HELLO)."""

    __slots__ = ()


class OpenFwLink(_Fields):
    """Open core ``index``'s firmware link to ``endpoint`` (one open before is closed first)."""

    __slots__ = ("index", "endpoint")
    __match_args__: Final = ("index", "endpoint")

    def __init__(self, index: int, endpoint: str) -> None:
        self.index: Final = index
        self.endpoint: Final = endpoint


class CloseFwLink(_Fields):
    """Close core ``index``'s firmware link, linger 0 (no stale task reaches a new firmware)."""

    __slots__ = ("index",)
    __match_args__: Final = ("index",)

    def __init__(self, index: int) -> None:
        self.index: Final = index


Effect: TypeAlias = ToClient | ToCtl | ToFw | OpenFwLink | CloseFwLink
