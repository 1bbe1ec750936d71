"""Over tcp an owner is tied to the CURVE key it names: another key cannot claim it.

There is no peer pid on tcp, so the relay and the firmwares check a HELLO's owner claim
against the key the owner names in its access list (``vdsp-<owner>.acl``). Client A (the
``client`` key) owns a buffer; B (this process, key ``mallory``, also allowed) claims A's
owner and is refused, in relay and direct mode, and uses A's buffer only once A grants it.
"""
from __future__ import annotations

import os
import zlib

import pytest

from arm_side import CORE_0, CORE_1, Soc, opids
from vdsp_board.identity import curve
from tests.integration.test_live_curve import running_tcp_soc
from tests.integration.test_live_ownership import CLAIM_REFUSED, FOREIGN, SECRET, OwnerA, claim_owner, refused

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def tcp_soc():
    with running_tcp_soc() as soc:
        curve.create(soc.keys, "mallory", role=curve.CLIENT)
        yield soc


@pytest.fixture
def owner_a(tcp_soc):
    env = {k: v for k, v in os.environ.items() if k != "VDSP_CLIENT_KEY"}
    a = OwnerA(env)       # the default client key; connects over tcp and uses its own buffer
    try:
        assert int(a.ask("connect relay")) == zlib.crc32(SECRET)
        yield a
    finally:
        a.close()


@pytest.fixture(params=["relay", "direct"])
def mode(request, tcp_soc, monkeypatch):
    monkeypatch.setenv("VDSP_CLIENT_KEY", str(tcp_soc.keys / "mallory.key_secret"))
    if request.param == "direct":
        monkeypatch.setenv("VDSP_CORE_ENDPOINTS", ",".join(f"{n}={e}" for n, e in tcp_soc.ctl.items()))
    return request.param


def test_another_key_cannot_claim_an_owner(tcp_soc, owner_a, mode):
    a = owner_a
    err = claim_owner(mode, a)
    assert err.code == CLAIM_REFUSED, err
    assert f"0x{a.owner:06x}" in err.message and "another CURVE key" in err.message
    with Soc(mode=mode, autostart_relay=False) as soc:      # B as itself: its own key, its own owner
        mine = soc.mem.alloc(64)
        assert soc.call(opids.FILL, outputs=[mine], params={"value": 3}, core=CORE_1) == {"bytes": 64}
        refused(FOREIGN, soc.call, opids.CHECKSUM, inputs=[(a.phys, 4096)], core=CORE_0)
        refused(FOREIGN, soc.call, opids.FILL, outputs=[(a.phys, 4096, 1)], params={"value": 9}, core=CORE_1)
        a.share(to=soc.mem.owner_id)
        assert soc.call(opids.CHECKSUM, inputs=[(a.phys, 4096)], core=CORE_0)["crc32"] == zlib.crc32(SECRET)
        a.revoke()
        refused(FOREIGN, soc.call, opids.CHECKSUM, inputs=[(a.phys, 4096)], core=CORE_1)
    assert a.content() == SECRET


@pytest.mark.parametrize("mode", ["relay", "direct"])
@pytest.mark.parametrize("lock_fd", [999_999, -1, 0])
def test_lock_fd_plays_no_part_over_tcp(tcp_soc, mode, lock_fd, monkeypatch):
    """PROTOCOL.md §5.2: over tcp an owner is proved by the CURVE key its access list names; a
    HELLO's `lock_fd` (an fd this process does not have, -1, or one that holds no lock) is ignored."""
    from arm_side.client import Client
    from arm_side.transport import ZmqTransport
    from protocol.task_options import TaskOptions
    from vdsp_board.memory import ddr
    if mode == "direct":
        monkeypatch.setenv("VDSP_CORE_ENDPOINTS", ",".join(f"{n}={e}" for n, e in tcp_soc.ctl.items()))
    me = ddr.current_owner()
    with Soc(mode=mode, autostart_relay=False) as soc:
        mine = soc.mem.alloc(64)
        client = Client(ZmqTransport(mode, autostart_relay=False), owner=me.id, lock_fd=lock_fd, connect_timeout_s=10)
        try:
            if mode == "direct":
                assert client.peers[0].fw_hello.wait(10000) is not None
            for core in (CORE_0, CORE_1):
                done = client.submit(opids.FILL, [], [[mine.phys_addr, 64, 0]], {"value": 7}, TaskOptions(core=core))
                assert done.wait(10000) == {"bytes": 64}
        finally:
            client.close()
        assert bytes(mine.read(64)) == bytes([7]) * 64
