"""The options of one task, as one value: which core, its priority, its ``custom_id`` and how long
a wait for it lasts.

:class:`TaskOptions` is what the SDK threads from a call (``Soc.rpc``, ``AsyncSoc.rpc``, the stubs,
the cv and nn helpers) to the TASK message; :meth:`TaskOptions.of` is the one place where the
loose keywords (``core=``, ``priority=`` ...) become the value, and :meth:`TaskOptions.header`
its wire encoding (PROTOCOL.md: the TASK header's priority, core and custom_id). A new per-task
field is one edit here (the field, :class:`SubmitKw`, and ``header`` if it travels), then
``python -m vdsp_sim.regen``: the cv functions take :data:`FIELDS` as keywords, the stubs and
``Soc.rpc`` take ``**TaskKw``.
"""
from __future__ import annotations

import dataclasses
from typing import Any, TypedDict

from protocol import errors
from protocol.constants import PRIORITY_HIGHEST, Core

_CORE_VALUES = frozenset(int(c) for c in Core)
_INT64 = (-(1 << 63), (1 << 63) - 1)


class SubmitKw(TypedDict, total=False):
    """The loose keywords of a call that names ``timeout_ms`` itself (``Soc.call``, ``batch``)."""

    core: int
    priority: int
    custom_id: int


class TaskKw(SubmitKw, total=False):
    """The loose keywords a call takes instead of ``options=`` (each a field of TaskOptions)."""

    timeout_ms: float | None


@dataclasses.dataclass(frozen=True)
class TaskOptions:
    """``core``: Core.ANY (0), CORE_0 (1) or CORE_1 (2). ``priority``: 0..255 (255 = pre-emptive,
    PRIORITY_PREEMP). ``custom_id``: smaller first among equal priorities (int64). ``timeout_ms``:
    how long a wait for the task lasts when the wait names none (None: the call's own default;
    <= 0: for ever). Raises InvalidCore / InvalidArgument for a value no server would take."""

    core: int = Core.ANY
    priority: int = 0
    custom_id: int = 0
    timeout_ms: float | None = None
    #: the TASK header's (priority, core, custom_id) as plain ints, made once (not an option: packing
    #: an IntEnum such as Core.ANY costs struct an __index__ call per task)
    wire: tuple[int, int, int] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.core, bool) or not _is_core(self.core):
            raise errors.InvalidCore(f"core must be CORE_ANY (0), CORE_0 (1) or CORE_1 (2), got {self.core!r}")
        if not _is_int(self.priority) or not 0 <= self.priority <= PRIORITY_HIGHEST:
            raise errors.InvalidArgument(f"priority must be an int in 0..255, got {self.priority!r}")
        if not _is_int(self.custom_id) or not _INT64[0] <= self.custom_id <= _INT64[1]:
            raise errors.InvalidArgument(f"custom_id must be a 64-bit signed int, got {self.custom_id!r}")
        if self.timeout_ms is not None and (isinstance(self.timeout_ms, bool)
                                            or not isinstance(self.timeout_ms, (int, float))):
            raise errors.InvalidArgument(f"timeout_ms must be a number of milliseconds or None, "
                                         f"got {self.timeout_ms!r}")
        object.__setattr__(self, "wire", (int(self.priority), int(self.core), int(self.custom_id)))

    @classmethod
    def of(cls, options: TaskOptions | None = None, **loose: Any) -> TaskOptions:
        """``options`` (default: the defaults) with the loose keywords given (not None) put in.
        Raises InvalidArgument for an unknown keyword or an options that is not a TaskOptions,
        InvalidCore / InvalidArgument for a bad value."""
        if options is None:
            options = DEFAULT
        elif not isinstance(options, TaskOptions):
            raise errors.InvalidArgument(f"options must be a TaskOptions, got {type(options).__name__}")
        unknown = set(loose) - _FIELDS
        if unknown:
            raise errors.InvalidArgument(f"unknown task option(s) {', '.join(sorted(unknown))}; "
                                         f"the options are {', '.join(sorted(_FIELDS))}")
        given = {k: v for k, v in loose.items() if v is not None}
        return dataclasses.replace(options, **given) if given else options

    def wait_ms(self, default: float) -> float:
        """The timeout of a wait that names none: ``timeout_ms``, else ``default``."""
        return default if self.timeout_ms is None else self.timeout_ms

    def header(self) -> dict[str, int]:
        """The wire encoding: keywords of ``protocol.messages.task`` (the TASK header's fields)."""
        return {"core": int(self.core), "priority": self.priority, "custom_id": self.custom_id}


def _is_core(value: Any) -> bool:
    try:
        return value in _CORE_VALUES
    except TypeError:       # unhashable (a list): no core
        return False


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


DEFAULT = TaskOptions()
#: the fields, in order: the keywords every entry point takes besides ``options``
FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(TaskOptions) if f.init)
_FIELDS = frozenset(FIELDS)


def keyword_type(name: str) -> str:
    """The annotation of keyword ``name`` as source text (for generated signatures)."""
    ann = TaskKw.__annotations__[name]
    return str(getattr(ann, "__forward_arg__", None) or getattr(ann, "__name__", ann))
