"""Each process of a tcp SoC holds only the secrets it needs: a memory scan of a running SoC.

A firmware runs image code (any signed image): it held the SoC's CURVE server secret (6-14 copies),
so any signed image could impersonate the whole SoC over tcp. Now it makes a key pair of its own
at boot and its core announces the public key (PROTOCOL.md §16); the starters are made before
anything reads a key and the keys and stock images are made by a job that exits (vdsp_sim.soc.prepare),
so nothing is inherited. Every anonymous mapping of every process (heap, stacks, arenas: where a
key read or made would lie) is read through /proc/PID/mem and searched for each secret, as its
Z85 text and its raw 32 bytes, and for the firmware-signing key (raw, and its PEM text). Only the
pages a process touched are read (/proc/PID/pagemap): the others read as zeros."""
from __future__ import annotations

import array
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import zmq.auth
import zmq.utils.z85
from cryptography.hazmat.primitives import serialization

from arm_side import CORE_0, CORE_1, Soc, opids
from tests.supervised import VDSP
from vdsp_sim.soc.private_soc import children, free_tcp_ports

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parents[2]
UP_S = 180.0


def secrets(keys: Path) -> dict[str, list[bytes]]:
    """Secret name -> the byte strings that would betray it in memory."""
    found = {}
    for name in ("server", "relay", "admin", "client"):
        public, secret = zmq.auth.load_certificate(str(keys / f"{name}.key_secret"))
        assert secret and len(secret) == 40
        found[name] = [secret, zmq.utils.z85.decode(secret)]
    pem = (keys / "firmware-signing.pem").read_bytes()
    key = serialization.load_pem_private_key(pem, None)
    raw = key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,  # type: ignore[union-attr]
                            serialization.NoEncryption())
    body = b"".join(line for line in pem.splitlines() if not line.startswith(b"-----"))
    found["signing"] = [raw, body[:32], body[-32:]]
    return found


PAGE = os.sysconf("SC_PAGE_SIZE")
PRESENT, SWAPPED = 1 << 63, 1 << 62     # a page's /proc/PID/pagemap entry


def touched(pagemap, lo: int, hi: int):
    """The runs ``(start, end)`` of pages in ``[lo, hi)`` that are in memory or swapped out: a
    page never touched is neither, and reads as zeros (no secret lies there). The ~2.3 GB of
    anonymous address space a SoC's nine processes map hold ~0.3 GB of such pages."""
    entries = array.array("Q")
    pagemap.seek(lo // PAGE * 8)
    entries.frombytes(pagemap.read((hi - lo) // PAGE * 8))
    start = None
    for i, entry in enumerate(entries):
        if entry & (PRESENT | SWAPPED):
            start = lo + i * PAGE if start is None else start
        elif start is not None:
            yield start, lo + i * PAGE
            start = None
    if start is not None:
        yield start, lo + len(entries) * PAGE


def anonymous_memory(pid: int):
    """The bytes of each readable anonymous mapping of ``pid`` (heap, stacks, anonymous maps):
    each run of its pages that the process touched (:func:`touched`)."""
    maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem, open(f"/proc/{pid}/pagemap", "rb", buffering=0) as pagemap:
        for line in maps:
            fields = line.split(None, 5)
            path = fields[5] if len(fields) > 5 else ""
            if "r" not in fields[1] or (path and not path.startswith(("[heap]", "[stack", "[anon"))):
                continue
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            try:
                for start, end in list(touched(pagemap, lo, hi)):
                    mem.seek(start)
                    yield mem.read(end - start)
            except OSError:     # a guard page, a mapping gone meanwhile
                continue


def held(pid: int, wanted: dict[str, list[bytes]]) -> set[str]:
    return {name for chunk in anonymous_memory(pid) for name, needles in wanted.items()
            if any(n in chunk for n in needles)}


def title(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()


def tree(pid: int) -> list[int]:
    out = [pid]
    for p in out:
        out.extend(children(p))
    return out


@pytest.fixture
def tcp_soc(runtime_env, monkeypatch):
    """``vdsp up`` (in the foreground: our child, its memory ours to read) of a SoC on loopback tcp."""
    relay, c0, c1 = free_tcp_ports(3, with_next=True)     # each firmware: the next port
    monkeypatch.setenv("VDSP_RELAY_ENDPOINT", f"tcp://127.0.0.1:{relay}")
    monkeypatch.setenv("VDSP_CORE_ENDPOINTS", f"vdsp0=tcp://127.0.0.1:{c0},vdsp1=tcp://127.0.0.1:{c1}")
    monkeypatch.delenv("VDSP_SOC_TEMPLATE", raising=False)
    monkeypatch.delenv("VDSP_FW_TEMPLATE", raising=False)
    sup = subprocess.Popen(VDSP + ["up", "--log-files"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, cwd=ROOT)
    try:
        said: list[bytes] = []
        assert sup.stdout is not None
        while not said or b"SoC up in" not in said[-1]:
            said.append(sup.stdout.readline())
            assert said[-1], (f"vdsp up ended: {sup.wait(10)}; it said:\n{b''.join(said).decode(errors='replace')}"
                              + "".join(f"\n--- {log.name}\n{log.read_text(errors='replace')[-1500:]}"
                                        for log in sorted((runtime_env / "log").glob("*"))))
        yield sup
    finally:
        sup.send_signal(signal.SIGTERM)
        try:
            sup.wait(30)
        except subprocess.TimeoutExpired:
            sup.kill()
            sup.wait()


def test_each_process_of_a_tcp_soc_holds_only_the_secrets_it_needs(tcp_soc, runtime_env):
    with Soc(autostart_relay=False) as soc:      # a firmware's own key, learned from its core, works
        assert soc.rpc(opids.PING, core=CORE_0).wait(10000) == {"core": "vdsp0"}
    with Soc(mode="direct", autostart_relay=False) as soc:
        assert soc.rpc(opids.PING, core=CORE_1).wait(10000) == {"core": "vdsp1"}
    wanted = secrets(runtime_env / "keys")
    by_title = {}
    for pid in tree(tcp_soc.pid):
        by_title.setdefault(title(pid), []).append(pid)
    assert {t: len(p) for t, p in by_title.items()} == {
        "vdsp: supervisor": 1, "vdsp: soc starter": 1, "vdsp: relay": 1, "vdsp: vdsp0 core": 1,
        "vdsp: vdsp1 core": 1, "vdsp: vdsp0 starter": 1, "vdsp: vdsp1 starter": 1, "vdsp: vdsp0 firmware": 1,
        "vdsp: vdsp1 firmware": 1}
    found = {t: held(pids[0], wanted) for t, pids in by_title.items()}
    assert found == {
        "vdsp: vdsp0 firmware": set(), "vdsp: vdsp1 firmware": set(),     # no key but its own
        "vdsp: soc starter": set(), "vdsp: vdsp0 starter": set(), "vdsp: vdsp1 starter": set(),
        "vdsp: vdsp0 core": {"server"}, "vdsp: vdsp1 core": {"server"},    # its control endpoint
        "vdsp: relay": {"server", "relay"},         # its front; its admin key toward the cores
        "vdsp: supervisor": {"client"},             # its start-up client asked the relay over tcp
    }


def test_the_scan_finds_a_secret_that_is_there():
    """A process that read a secret from a pipe holds it in its heap; the scan finds it there,
    and not a secret it never saw."""
    secret, other = os.urandom(32).hex().encode(), os.urandom(32).hex().encode()
    holder = subprocess.Popen([sys.executable, "-c", "import sys; s = sys.stdin.readline(); print('ok', flush=True); "
                               "sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.write(secret + b"\n")
        holder.stdin.flush()
        assert holder.stdout.readline() == b"ok\n"
        assert held(holder.pid, {"secret": [secret], "other": [other]}) == {"secret"}
    finally:
        holder.kill()
        holder.wait()
