"""Which owner each connection of a firmware's socket is bound to (its HELLO's verdict).

Its own module so that the compiled build compiles it (``vdsp_sim/native_build.py``): the
firmware's I/O thread looks a binding up for every task it runs or hands out.
"""
from __future__ import annotations

import collections

MAX_BOUND = 1024        # connections a firmware keeps bindings for (least recently used go first)


class Bindings:
    """Connection identity -> binding (owner id or RELAY), at most ``limit``, least recently used first out.

    A forgotten connection is as one that never said HELLO (ZeroMQ never reuses an identity
    on a socket, so a binding cannot pass to another connection).
    """

    def __init__(self, limit: int = MAX_BOUND) -> None:
        self.limit = limit
        self._map: collections.OrderedDict[bytes, int] = collections.OrderedDict()

    def get(self, identity: bytes) -> int | None:
        binding = self._map.get(identity)
        if binding is not None:
            self._map.move_to_end(identity)
        return binding

    def set(self, identity: bytes, binding: int | None) -> None:
        self._map.pop(identity, None)
        if binding is not None:
            self._map[identity] = binding
            while len(self._map) > self.limit:
                self._map.popitem(last=False)

    def __len__(self) -> int:
        return len(self._map)
