"""Socket I/O: the ZeroMQ calls every process makes.

- ``zsock``: the frame calls of the hot path (``_zio``, from ``zio.c``, where the compiled build
  is installed: the same libzmq calls, which keep the GIL when they cannot wait);
- ``ipclink``: how a client's link to a server's endpoint connects, and what its monitor says.

Imports only ``protocol``.
"""
