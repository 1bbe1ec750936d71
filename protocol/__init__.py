"""Sans-I/O wire protocol of vdsp-sim: bytes and frames in, typed messages out.

Nothing in this package imports zmq, asyncio, threads or shared memory; the
processes adapt it to their sockets. PROTOCOL.md at the repository root is the
normative description.
"""
