"""Typed Python stubs of the operators, generated from their declarations (``arm_side.stubgen``).

One function per operator: it takes the SoC, the buffers and the operator's parameters as
keywords with their declared types and defaults, and returns the submitted task (a ``Task``
from a ``Soc``, an ``AsyncTask`` from an ``AsyncSoc``). The stock modules here
(:mod:`framework`, :mod:`cv`, :mod:`nn`, :mod:`pointcloud`) are generated from the stock
entries of ``protocol.contract``; ``vdsp firmware stubs IMAGE -o FILE.py`` writes the same
kind of module for any firmware image. Do not edit the generated modules: tests check that
regenerating gives the same files.
"""
from __future__ import annotations

from typing import Any, Protocol, Sequence, TypeVar, Union, Unpack

from protocol.task_options import TaskKw, TaskOptions
from arm_side.memory import Mem

#: a buffer of a task: a Mem, or a raw ``(phys_addr, size)`` handle
Buffer = Union[Mem, tuple[int, int]]

T_co = TypeVar("T_co", covariant=True)


class Submitter(Protocol[T_co]):
    """What a stub submits through: ``arm_side.Soc`` (returns a Task) or ``arm_side.AsyncSoc``
    (returns an AsyncTask)."""

    def rpc(self, cmd: int, inputs: Sequence[Any] = ..., outputs: Sequence[Any] = ...,
            params: dict | None = ..., *, options: TaskOptions | None = ..., **task: Unpack[TaskKw]) -> T_co: ...


__all__ = ["Buffer", "Submitter"]
