"""A process that holds more than 1024 fds opens a Soc and runs tasks.

Before, the blocking client waited on its sockets with ``select.select``, which takes no fd
above 1023: in a process holding 1,100 fds (servers and GUIs routinely do) ``Soc()`` failed
with ``ValueError: filedescriptor out of range in select()``. Every wait on a socket now goes
through ``poll``. The client is another process: it raises its own soft RLIMIT_NOFILE, opens
1,100 fds, then opens a Soc in each mode, blocking and asyncio, whose sockets all land above 1024.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parents[2]

MANY_FDS = textwrap.dedent("""
    import asyncio, os, resource, sys
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
    held = [os.open("/dev/null", os.O_RDONLY) for _ in range(1100)]
    assert min(held) < 1024 < max(held)
    from arm_side import CORE_0, CORE_1, AsyncSoc, Soc, opids

    def blocking(mode):
        with Soc(mode=mode, autostart_relay=False, connect_timeout_s=20) as soc:
            buf = soc.mem.alloc(64)
            assert soc.client.links and min(link.fd for link in soc.client.links.values()) > 1024
            for core in (CORE_0, CORE_1):
                assert soc.call(opids.FILL, outputs=[buf], params={"value": 5}, core=core) == {"bytes": 64}
            assert soc.rpc(opids.PING, core=CORE_1).wait(10000) == {"core": "vdsp1"}
            assert bytes(buf.read()) == bytes([5]) * 64
            done = []
            soc.rpc(opids.PING, core=CORE_0).add_done_callback(lambda t: done.append(t.wait()))
            soc.rpc(opids.PING, core=CORE_1).wait(10000)
            import time
            deadline = time.monotonic() + 10
            while not done and time.monotonic() < deadline:    # delivered by the reader thread
                time.sleep(0.01)
            assert done == [{"core": "vdsp0"}], done

    async def asynchronous(mode):
        async with AsyncSoc(mode=mode, autostart_relay=False, connect_timeout_s=20) as soc:
            buf = soc.mem.alloc(64)
            for core in (CORE_0, CORE_1):
                assert await soc.call(opids.FILL, outputs=[buf], params={"value": 6}, core=core) == {"bytes": 64}
            assert bytes(buf.read()) == bytes([6]) * 64

    for mode in ("relay", "direct"):
        blocking(mode)
        asyncio.run(asynchronous(mode))
        print(mode, "ok", flush=True)
""")


def test_a_process_holding_1100_fds_opens_a_soc_and_runs_tasks(shared_soc):
    res = subprocess.run([sys.executable, "-c", MANY_FDS], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert res.returncode == 0, res.stdout + res.stderr[-3000:]
    assert res.stdout.split("\n")[:2] == ["relay ok", "direct ok"], res.stdout + res.stderr[-3000:]
