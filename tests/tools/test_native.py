"""The compiled build of the hot modules (vdsp_sim/native_build.py, vdsp_sim/native_finder.py):
decided when it is built and installed, not when a package is imported; used whole or not at
all; and, facing peers, the same code as the pure modules: both builds are fed the same
malformed frames and bodies and must answer alike.

Run as a script (``python tests/tools/test_native.py``) it prints, as JSON, what this interpreter's
modules make of those inputs (``VDSP_NATIVE`` chooses the build)."""
from __future__ import annotations

import importlib
import importlib.machinery
import json
import math
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))

import pytest   # noqa: E402

from tests import privilege   # noqa: E402

from vdsp_board.config import settings   # noqa: E402
from vdsp_sim import native_build, native_finder   # noqa: E402


def _module_name(rel: str) -> str:
    return rel.removesuffix(".py").replace("/", ".")


def _run(code: str, **env: str | None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=settings.child_env(**env))


# --- deciding -------------------------------------------------------------------------------

@pytest.mark.parametrize("bytecode", ["cached", "written"])
def test_importing_the_packages_reads_no_file_but_their_modules(bytecode, tmp_path):
    """``import protocol`` read a manifest and hashed seven sources of three other packages to
    choose a build; now the build step chooses, and an import opens only what it imports.
    ``written``: no bytecode cached yet (a fresh clone, a source edited meanwhile), so the imports
    write it: importlib opens each .pyc's temporary file by path, then wraps that fd in a file
    object, an "open" audit event whose argument is the fd (an int), not a file opened."""
    code = """if True:
        import sys
        opened = []
        sys.addaudithook(lambda event, args: opened.append(args[0]) if event == "open" else None)
        import protocol, vdsp_board, relay_server, dsp_side
        files = {getattr(m, "__file__", None) for m in list(sys.modules.values())}
        cached = {getattr(m, "__cached__", None) for m in list(sys.modules.values())}
        prefix = sys.pycache_prefix or "//"
        print("\\n".join(str(p) for p in opened if not isinstance(p, int) and p not in files and p not in cached
                          and "__pycache__" not in p and not str(p).startswith(prefix)))
    """
    env: dict[str, str | None] = {}
    if bytecode == "written":
        env = {"PYTHONPYCACHEPREFIX": str(tmp_path / "pycache"), "PYTHONDONTWRITEBYTECODE": None}
    res = _run(code, **env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "", "opened on import:\n" + res.stdout


@pytest.fixture
def sources(tmp_path, monkeypatch):
    """Two "compiled" sources and a finder for them (no extension behind it: only its verdict is used).
    VDSP_NATIVE is unset: CI's pure run exports VDSP_NATIVE=0, which the finder reads when asked."""
    monkeypatch.delenv("VDSP_NATIVE", raising=False)
    paths = []
    for name in ("a.py", "b.py"):
        path = tmp_path / name
        path.write_text(f"# {name}\n")
        paths.append(path)
    stats = {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in paths}
    finder = native_finder.NativeFinder(str(tmp_path), {"pkg.a": "pkg/a.so", "pkg.a__mypyc": "pkg/a__mypyc.so"},
                                        stats)
    return finder, paths


def test_a_build_whose_sources_are_unchanged_is_used(sources):
    finder, _ = sources
    assert finder.why_not(env="") == ""
    spec = finder.find_spec("pkg.a__mypyc")
    assert spec is not None and spec.origin == os.path.join(finder.directory, "pkg/a__mypyc.so")
    assert isinstance(spec.loader, importlib.machinery.ExtensionFileLoader)
    assert finder.find_spec("pkg.other") is None


def test_an_edited_source_turns_the_whole_build_off(sources):
    finder, paths = sources
    paths[1].write_text("# edited, same size? no: longer\n")
    assert "b.py changed since it was compiled" in finder.why_not(env="")
    os.utime(paths[1], ns=(1, 1))
    assert "changed since it was compiled" in finder.why_not(env="")
    paths[1].unlink()
    assert "is gone" in finder.why_not(env="")


def test_the_verdict_is_taken_once_per_process(sources):
    finder, paths = sources
    assert finder.find_spec("pkg.a") is not None
    paths[0].write_text("# edited after the first import of the build\n")
    assert finder.find_spec("pkg.a__mypyc") is not None     # modules of one process are one build


@pytest.mark.parametrize("text", ["0", "off", "false", "NO"])
def test_vdsp_native_off_runs_the_pure_modules(sources, text):
    finder, _ = sources
    assert finder.why_not(env=text) == f"VDSP_NATIVE={text}"
    assert settings.Settings({"VDSP_NATIVE": text}).native is False


def test_this_checkout_runs_what_its_setup_built():
    """``scripts/venv.sh`` builds the compiled modules into this venv wherever this machine can:
    then every one of them is loaded from the build (not used: the set-up was not run since an
    edit), and with ``VDSP_NATIVE=0`` none is. (docs/building.md: "and the blocking SDK client's
    reading loop (`arm_side/taskpath.c`": that module among them.)"""
    code = f"""if True:
        import importlib, json
        from vdsp_sim import native_build
        names = {[_module_name(rel) for rel in native_build.MODULES]!r}
        active = [native_build.active(importlib.import_module(n)) for n in names]
        active.append(importlib.import_module("vdsp_board.sockets.zsock")._ZIO is not None)      # vdsp_board/sockets/zio.c
        active.append(importlib.import_module("arm_side.reading")._C is not None)      # arm_side/taskpath.c
        print(json.dumps([native_build.status(), active]))
    """
    lacking = native_build.missing()
    for value in ("1", "0"):
        res = _run(code, VDSP_NATIVE=value)
        assert res.returncode == 0, res.stderr
        why, active = json.loads(res.stdout)
        if value == "0" or lacking:
            assert not any(active) and why, (value, lacking, why)
        else:
            assert why == "" and all(active), f"{why}: run bash scripts/venv.sh"


def test_the_status_command_says_what_runs():
    def status(**env: str | None) -> str:
        return subprocess.run([sys.executable, "-m", "vdsp_sim.native_build", "--status"], capture_output=True,
                              text=True, check=True, env=settings.child_env(**env)).stdout.strip()
    assert status(VDSP_NATIVE="0") == "compiled build: not used: VDSP_NATIVE=0"
    here = status(VDSP_NATIVE="1")
    assert here.startswith("compiled build: used (") if not native_build.missing() else "not used" in here


def test_the_pure_python_modules_pass_their_tests_and_serve_a_soc(request):
    """The fallback: with ``VDSP_NATIVE=0`` the unit tests of every compiled module pass on the
    pure modules, and a SoC whose every process runs them answers tasks (the live SDK tests).
    In a run made with ``VDSP_NATIVE=0`` (``.ci/run``'s second) that holds those tests, this run
    is that proof: this process runs the pure modules, and the tests are not run a second time."""
    files = ["tests/tools/test_native.py::test_this_checkout_runs_what_its_setup_built", "tests/proto/test_protocol_wire.py",
             "tests/relay/test_relay_engine.py", "tests/relay/test_scheduler.py", "tests/dsp/test_inbox.py",
             "tests/board/test_hellogate.py", "tests/board/test_ownership.py",
             "tests/sdk/test_sdk_fast_path.py", "tests/integration/test_live_rpc.py"]
    if os.environ.get(native_finder.ENV) == "0":
        ran = {item.nodeid for item in request.session.items}
        if all(any(n == f or n.startswith(f + "::") for n in ran) for f in files):
            assert not [m for m in native_build.MODULES if native_build.active(importlib.import_module(_module_name(m)))]
            return
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", *files],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          # a run inside this test, under the lock this test holds (tests/conftest.py)
                          env=settings.child_env(VDSP_NATIVE="0", VDSP_TEST_LOCK_DIR=None, PYTEST_XDIST_WORKER=None))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout.strip().splitlines()[-1]


# --- the same answers from both builds --------------------------------------------------------

#: values a peer can put into any field of a msgpack body
PEER_VALUES = [None, True, False, 0, -1, 2**63, 2**64 + 5, -2**70, 1.5, math.nan, "", "x", "\x00" * 300, b"x",
               [], [1, "a"], [[1, 2, 3]], {}, {"a": 1}, {"k": [None]}]
#: fields of each command's body a client sends the relay (plus one nobody declared)
CLIENT_BODIES = {"HELLO": {"role": "client", "pid": 77, "owner": 0, "name": "a", "lock_fd": 3},
                 "QUERY": {"what": "stats"}, "CANCEL": {"target": 9},
                 "CONTROL": {"core": "vdsp0", "attr": "state", "value": "stop"},
                 "TASK": {"inputs": [], "outputs": [], "params": {}, "owner": 0},
                 "DISCONNECT": {}, "HEARTBEAT": {}, "READY": {"name": "x", "role": "core"}, "RESULT": {}}
#: what a core announces on its control link
READY = {"name": "vdsp0", "role": "core", "state": "running", "fw_endpoint": "ipc:///x/vdsp0.fw.sock", "pid": 10,
         "fw_pid": 20, "firmware_version": "1.0.0", "operators": [], "heartbeat_ms": 500, "crash_count": 0,
         "watchdog_ms": 1000, "max_sleep_ms": 10}
EVENT = {"core": "vdsp0", "state": "crashed", "reason": "r", "pid": 10, "fw_pid": 20}


def _nested(depth: int) -> list:
    value: list = [1]
    for _ in range(depth):
        value = [value]
    return value


def hdr(cmd, msg_id=1, op=0, priority=0, core=0, custom_id=0, magic=None, version=None) -> bytes:
    """A header packed field by field (PROTOCOL.md §3.2), whatever its fields hold."""
    from protocol.constants import MAGIC, VERSION
    return struct.pack("<2sBBHBBQq", MAGIC if magic is None else magic, VERSION if version is None else version,
                       int(cmd), op, priority, core, msg_id, custom_id)


def body(value) -> bytes:
    import msgpack
    return msgpack.packb(value, use_bin_type=True)


def _fields(effect) -> list:
    """An engine effect's subject and data (a core's index or a client's identity; frames, an
    endpoint, or None), by the fields its class matches on."""
    return ([getattr(effect, name) for name in type(effect).__match_args__] + [None])[:2]


def malformed_frames() -> dict[str, list]:
    """Frame lists of every shape a peer may send, well-formed and not (also fed to the native
    wire layer: tests/sdk/test_capi_wire.py)."""
    from protocol.constants import Command

    good_task = [hdr(Command.TASK, 11), body({"inputs": [], "outputs": []})]
    shapes: dict[str, list] = {
        "none": [], "one": [hdr(Command.QUERY)], "task": good_task,
        "query": [hdr(Command.QUERY, 12), body({"what": "cores"})],
        "short header": [b"VD\x01", body({})], "long header": [hdr(Command.TASK) + b"x", body({})],
        "bad magic": [hdr(Command.TASK, magic=b"XX"), body({})], "bad version": [hdr(Command.TASK, version=9), body({})],
        "unknown command": [hdr(0x7e), body({})], "not msgpack": [hdr(Command.TASK, 13), b"\xc1"],
        "truncated": [hdr(Command.QUERY, 14), body({"what": "stats"})[:-2]],
        "not a map": [hdr(Command.QUERY, 15), body([1])],
        "int keys": [hdr(Command.QUERY, 16), body({1: 2})], "bin keys": [hdr(Command.QUERY, 17), b"\x81\xc4\x01a\x01"],
        "deep": [hdr(Command.TASK, 18), body({"params": {"a": _nested(40)}})],
        "ext type": [hdr(Command.QUERY, 19), b"\x81\xa4what\xd4\x01\x00"],
        "raw frames": good_task + [b"abc", b""], "many frames": good_task + [b""] * 100,
    }
    return shapes


def outcomes() -> dict[str, list]:
    """Each malformed input, fed to this process's modules (pure or compiled): what came out, or
    the type of the exception raised."""
    import zmq

    from dsp_side.inbox import Inbox
    from protocol import header, messages, wire
    from protocol.constants import Command
    from relay_server.engine import RelayEngine
    from vdsp_board.identity.hellogate import HelloGate
    from vdsp_board.identity.ownership import Claim

    class TrustAll:
        def claim(self, body, meta=None, peer=""):
            return body.get("owner")

        def check_task(self, owner, body):
            pass

    def relay() -> RelayEngine:
        """A relay with both cores running, one client and one task in flight (msg_id 9)."""
        e = RelayEngine({"vdsp0": "ipc:///x/vdsp0.sock", "vdsp1": "ipc:///x/vdsp1.sock"}, 100.0,
                        ownership=TrustAll(), pid=1)
        for i, name in enumerate(("vdsp0", "vdsp1")):
            e.on_ctl(i, [hdr(Command.READY), body(dict(READY, name=name, pid=10 + i, fw_pid=20 + i,
                                                       fw_endpoint=f"ipc:///x/{name}.fw.sock"))], 100.0)
        e.on_client(b"A", wire.encode(messages.hello(5, "client", pid=77, name="a")), 100.0)
        e.on_client(b"A", wire.encode(messages.task(9, 0, inputs=[], outputs=[])), 100.0)
        e.out.clear()
        return e

    def said(e: RelayEngine) -> list:
        """The engine's outputs, decoded (their order and every field of every body)."""
        seen = []
        for effect in e.out:
            kind, (who, frames) = type(effect).__name__, _fields(effect)
            if not isinstance(frames, list):
                seen.append([kind, who, frames])
                continue
            try:
                m = wire.decode(frames)
                seen.append([kind, repr(who), m.command.name, m.msg_id, m.op, m.priority, m.core, m.custom_id,
                             repr(m.body), [bytes(f) for f in m.raw]])
            except Exception as exc:
                seen.append([kind, repr(who), "undecodable", type(exc).__name__])
        e.out.clear()
        return seen + [e.query("stats", 102.0), [c.describe() for c in e.cores]]

    def task_relay_id(e: RelayEngine) -> tuple[int, int]:
        job = next(iter(e.jobs.values()))
        return (0 if job.relay_id in e.cores[0].inflight else 1), job.relay_id

    class NoClaims:
        """The HELLO gate's judge: every HELLO claims nothing (handed straight back)."""

        def take(self, body, frame=None, peer_name=""):
            return Claim(body, None, peer_name, None)

    gate = HelloGate(NoClaims(), "test-native-gate")     # type: ignore[arg-type]

    # frame lists of every shape, each frame as the buffer types pyzmq hands out
    shapes = malformed_frames()
    kinds = {"bytes": bytes, "bytearray": bytearray, "memoryview": memoryview, "zmq.Frame": zmq.Frame}
    cases: dict[str, Callable[[], object]] = {}

    for shape, frames in shapes.items():
        for kind, make in kinds.items():
            as_kind = [make(f) for f in frames]

            def client(as_kind=as_kind) -> list:
                e = relay()
                e.on_client(b"A", list(as_kind), 101.0)
                return said(e)

            def firmware(as_kind=as_kind) -> list:
                e = relay()
                index, relay_id = task_relay_id(e)
                e.on_fw(index, list(as_kind), 101.0)
                if as_kind:     # the same, as the reply to the task in flight
                    e.on_fw(index, [make(hdr(Command.RESULT, relay_id)), *as_kind[1:]], 101.0)
                return said(e)

            def control(as_kind=as_kind) -> list:
                e = relay()
                e.on_ctl(0, list(as_kind), 101.0)
                e.tick(102.0)
                return said(e)

            def inbox(as_kind=as_kind) -> list:
                box = Inbox(4, 2)
                taken = [box.offer(b"p", list(as_kind)) for _ in range(2)]
                return [taken, box.cancel(b"p", 11) is not None, len(box)]

            def headers(as_kind=as_kind) -> list:
                if not as_kind:
                    return []
                first = as_kind[0]
                return [list(header.Header.parse(first)), header.msg_id_of(first), header.command_of(first),
                        header.task_key(first, 1), header.retag(first, 3), header.retag(first, 3, core=1, custom_id=2),
                        header.task_id_of(first, 0), header.task_id_of(first, 0x10)]

            def decoded(as_kind=as_kind) -> list:
                m = wire.decode(as_kind)
                return [m.command.name, m.msg_id, repr(m.body), wire.unpack_body(as_kind[1])]

            def gated(as_kind=as_kind) -> list:
                admitted = gate.admit(b"p", list(as_kind), None, "")
                return [gate.passes(b"p", list(as_kind)),
                        [[i.identity, [bytes(f) for f in i.frames], repr(i.refused), i.msg_id] for i in admitted]]

            for name, fn in (("client", client), ("firmware", firmware), ("control", control), ("inbox", inbox),
                             ("header", headers), ("wire", decoded), ("gate", gated)):
                cases[f"{name} <- {shape} ({kind})"] = fn

    for command, fields in CLIENT_BODIES.items():
        for field in [*fields, "unknown"]:
            for i, value in enumerate(PEER_VALUES):
                def client_body(command=command, fields=fields, field=field, value=value) -> list:
                    e = relay()
                    e.on_client(b"A", [hdr(Command[command], 21), body(dict(fields, **{field: value}))], 101.0)
                    e.on_client(b"A", [hdr(Command.QUERY, 22), body({"what": "stats"})], 101.0)
                    return said(e)
                cases[f"client {command} {field}={i}"] = client_body

    for announcement, fields, command in (("READY", READY, Command.READY), ("EVENT", EVENT, Command.EVENT)):
        for field in [*fields, "unknown"]:
            for i, value in enumerate(PEER_VALUES):
                def core_body(fields=fields, command=command, field=field, value=value) -> list:
                    e = relay()
                    e.on_ctl(0, [hdr(command, 0 if command is Command.EVENT else 1), body(dict(fields, **{field: value}))],
                             101.0)
                    e.tick(102.0)
                    e.on_client(b"A", wire.encode(messages.task(23, 0, inputs=[], outputs=[], core=1)), 102.0)
                    return said(e)
                cases[f"core {announcement} {field}={i}"] = core_body

    for i, value in enumerate(PEER_VALUES):
        def replies(value=value) -> list:
            e = relay()
            index, relay_id = task_relay_id(e)
            e.on_ctl(index, [hdr(Command.RESULT, 999), body({"value": value})], 101.0)
            e.on_ctl(index, [hdr(Command.ERROR, 998), body({"code": value, "message": value})], 101.0)
            e.on_client(b"A", wire.encode(messages.cancel(24, 9)), 101.0)
            for cancel_id in list(e.cancels):
                e.on_fw(index, [hdr(Command.RESULT, cancel_id), body({"state": value})], 101.0)
            e.on_fw(index, [hdr(Command.ERROR, relay_id), body({"code": value, "message": value})], 101.0)
            return said(e)
        cases[f"replies carrying {i}"] = replies

    for field in range(6):
        for value in (-1, 256, 65536, 2**64, -2**63 - 1, 2**63):
            def pack(field=field, value=value) -> bytes:
                args = [int(Command.TASK), 1, 0, 0, 0, 0]
                args[field] = value
                return header.pack(*args)
            cases[f"header.pack field {field}={value}"] = pack

    cases.update(socket_cases(shapes, kinds))
    seen: dict[str, list] = {}
    for name, fn in cases.items():
        try:
            seen[name] = ["returned", repr(fn())]
        except Exception as exc:
            seen[name] = ["raised", type(exc).__name__]
    return seen


def socket_cases(shapes: dict[str, list], kinds: dict[str, Callable]) -> dict[str, Callable[[], object]]:
    """``vdsp_board.sockets.zsock``'s frame calls (pyzmq's, or the compiled build's ``_zio``) on real
    inproc sockets: each shape of frames, as each buffer type, sent and received; and the calls
    that must fail (a closed socket, nothing to read, a frame that is no buffer, bad flags)."""
    import select

    import zmq

    from vdsp_board.sockets import zsock

    ctx = zmq.Context.instance()
    serial = iter(range(10**9))

    def pair(kind_a: int = zmq.PAIR, kind_b: int = zmq.PAIR) -> tuple:
        a, b = ctx.socket(kind_a), ctx.socket(kind_b)
        a.linger = b.linger = 0
        endpoint = f"inproc://zsock-{next(serial)}"
        a.bind(endpoint)
        b.connect(endpoint)
        return a, b

    def outcome(call: Callable[[], object]) -> object:
        try:
            return ["returned", call()]
        except zmq.ZMQError as exc:
            return ["raised", type(exc).__name__, exc.errno]
        except Exception as exc:
            return ["raised", type(exc).__name__]

    def through(frames: list, routed: bool = False, flags: int = zsock.NOBLOCK) -> list:
        a, b = pair(zmq.ROUTER, zmq.DEALER) if routed else pair()
        try:
            if routed:      # the DEALER speaks first: the ROUTER learns its identity
                zsock.send_frames(b, [b"hi"], flags)
                identity = zsock.recv_frames(a)[0]
                sent = outcome(lambda: zsock.send_routed(a, identity, frames, flags))
            else:
                sent = outcome(lambda: zsock.send_frames(a, frames, flags))
            before = zsock.readable(b) if sent[0] == "returned" else None
            got = outcome(lambda: zsock.recv_frames(b, zsock.NOBLOCK)) if before else None
            return [sent, before, got, zsock.readable(b), outcome(lambda: zsock.recv_frames(b, zsock.NOBLOCK))]
        finally:
            a.close(0)
            b.close(0)

    cases: dict[str, Callable[[], object]] = {}
    for shape, frames in shapes.items():
        for kind, make in kinds.items():
            as_kind = [make(f) for f in frames]
            cases[f"zsock send_frames <- {shape} ({kind})"] = lambda f=as_kind: through(f)
            cases[f"zsock send_routed <- {shape} ({kind})"] = lambda f=as_kind: through(f, routed=True)
    cases["zsock blocking send and recv"] = lambda: through([b"a", b"b"], flags=0)
    cases["zsock frames as a tuple"] = lambda: through((b"a", memoryview(b"bc")))     # type: ignore[arg-type]
    cases["zsock frames as a generator"] = lambda: through((f for f in [b"a"]))      # type: ignore[arg-type]
    for i, bad in enumerate(["text", 7, None, 1.5, [b"x"], object()]):
        cases[f"zsock a frame that is no buffer {i}"] = lambda bad=bad: through([b"a", bad])
        cases[f"zsock frames that are no list {i}"] = lambda bad=bad: through(bad)
        cases[f"zsock flags that are no int {i}"] = lambda bad=bad: through([b"a"], flags=bad)
    cases["zsock flags out of range"] = lambda: through([b"a"], flags=2**40)

    def closed(call: str) -> object:
        a, b = pair()
        a.close(0)
        try:
            return outcome({"send": lambda: zsock.send_frames(a, [b"a"], zsock.NOBLOCK),
                            "routed": lambda: zsock.send_routed(a, b"id", [b"a"], zsock.NOBLOCK),
                            "recv": lambda: zsock.recv_frames(a, zsock.NOBLOCK),
                            "readable": lambda: zsock.readable(a),
                            "drain": lambda: zsock.drain(a),
                            "recv_routed": lambda: zsock.recv_routed(a),
                            "recv_next": lambda: zsock.recv_next(a)}[call])
        finally:
            b.close(0)
    for call in ("send", "routed", "recv", "readable", "drain", "recv_routed", "recv_next"):
        cases[f"zsock {call} on a closed socket"] = lambda call=call: closed(call)

    def read_until_none(messages: list, read: Callable, reads: int) -> object:
        """``messages`` sent, then ``read`` ``reads`` times (each message whole, then none); the
        FD then signals the next message, which ``read`` gets."""
        a, b = pair()
        try:
            for frames in messages:
                zsock.send_frames(a, frames, zsock.NOBLOCK)
            got = [outcome(lambda: read(b)) for _ in range(reads)]
            zsock.send_frames(a, [b"next"], zsock.NOBLOCK)
            signalled = select.select([b.getsockopt(zmq.FD)], [], [], 5)[0] != []
            return [*got, signalled, outcome(lambda: read(b))]
        finally:
            a.close(0)
            b.close(0)
    some = [[b"a"], [b"b", b"", b"c" * 5000], [memoryview(b"d")]]
    cases["zsock drain of nothing"] = lambda: read_until_none([], zsock.drain, 2)
    cases["zsock drain of messages"] = lambda: read_until_none(some, zsock.drain, 2)
    cases["zsock recv_next of nothing"] = lambda: read_until_none([], zsock.recv_next, 1)
    cases["zsock recv_next of messages"] = lambda: read_until_none(some, zsock.recv_next, len(some) + 1)

    def routed_in(messages: list, kind: int = zmq.ROUTER) -> object:
        """What recv_routed gives for each message (its identity's length, its frames, what its
        meta answers), then for none, and whether the FD then signals the next message."""
        a, b = pair(kind, zmq.DEALER if kind == zmq.ROUTER else zmq.PAIR)
        try:
            for frames in messages:
                zsock.send_frames(b, frames, zsock.NOBLOCK)
            got: list = []
            for _ in messages:
                one = zsock.recv_routed(a)
                if one is None:
                    got.append(None)
                    continue
                identity, frames, meta = one
                asked = [outcome(lambda name=name: meta.get(name))
                         for name in ("Peer-Address", b"Socket-Type", "Socket-Type", zmq.MORE, True, 1.5, None)]
                got.append([len(identity) if kind == zmq.ROUTER else identity, frames, asked])
            got.append(outcome(lambda: zsock.recv_routed(a)))
            zsock.send_frames(b, [b"next"], zsock.NOBLOCK)
            got.append(select.select([a.getsockopt(zmq.FD)], [], [], 5)[0] != [])
            return got
        finally:
            a.close(0)
            b.close(0)
    cases["zsock recv_routed of nothing"] = lambda: routed_in([])
    cases["zsock recv_routed of messages"] = lambda: routed_in([[b"a"], [b"b", b"", b"c" * 5000], [memoryview(b"d")]])
    cases["zsock recv_routed of a lone frame (no ROUTER)"] = lambda: routed_in([[b"solo"]], zmq.PAIR)

    def full() -> object:       # a DEALER with no peer queues nothing: EAGAIN at once
        d = ctx.socket(zmq.DEALER)
        d.linger = 0
        try:
            return outcome(lambda: zsock.send_frames(d, [b"a"], zsock.NOBLOCK))
        finally:
            d.close(0)
    cases["zsock send with no peer"] = full
    return cases


WAITING_CALLS = """if True:
    import json, os, signal, threading, time
    import zmq
    from vdsp_board.sockets import zsock
    ctx = zmq.Context.instance()
    a, b = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
    a.bind("inproc://waiting")
    b.connect("inproc://waiting")
    got = []
    reader = threading.Thread(target=lambda: got.append(zsock.recv_frames(b)))     # waits: no NOBLOCK
    reader.start()
    counted = 0
    deadline = time.monotonic() + 0.3
    while time.monotonic() < deadline:      # Python runs beside the waiting call
        counted += 1
    zsock.send_frames(a, [b"x", b"y"])
    reader.join(10)
    # SIGINT to the main thread itself (os.kill may hand it to another thread, whose handler sets
    # Python's flag but does not interrupt the main thread's wait), again every 0.3 s until the
    # wait has ended (a first one may come before the wait starts); only the first one raises.
    fired, ended = [], threading.Event()
    def once(signum, frame):
        if not fired:
            fired.append(signum)
            raise KeyboardInterrupt
    signal.signal(signal.SIGINT, once)
    def poke(main=threading.main_thread().ident):
        while not ended.wait(0.3):
            signal.pthread_kill(main, signal.SIGINT)
    threading.Thread(target=poke, daemon=True).start()
    try:
        zsock.recv_frames(b)        # nothing comes: only the signal ends it
        interrupted = False
    except KeyboardInterrupt:
        interrupted = True
    ended.set()
    print(json.dumps({"zio": zsock._ZIO is not None, "counted": counted, "got": [f.decode() for f in got[0]],
                      "interrupted": interrupted}))
"""


@pytest.mark.parametrize("native", ["0", "1"])
def test_a_call_that_may_wait_lets_other_threads_run_and_signals_end_it(native):
    """The compiled build's frame calls keep the GIL only for a call that cannot wait: one that
    waits (no NOBLOCK) lets go of it, as pyzmq does (else the waiting thread would stop the whole
    process: nothing could send it what it waits for), and a signal ends the wait."""
    res = _run(WAITING_CALLS, VDSP_NATIVE=native)
    assert res.returncode == 0, res.stderr[-3000:]
    seen = json.loads(res.stdout)
    assert seen["got"] == ["x", "y"] and seen["counted"] > 1000 and seen["interrupted"], seen
    assert seen["zio"] == (native == "1" and not native_build.missing()), seen


# In a child with the compiled build: each RESULT body completes two Tasks made alike, one by
# arm_side/taskpath.c's completion, one by Request._complete; what each then holds is printed.
_COMPLETIONS = r"""if True:
    import json, math
    from arm_side import reading, tracing
    from arm_side.task import BOARD_MODELS, Task
    def fields(t):      # a task's fields: its slots that are set (arm_side.task's __slots__, in order), its __dict__
        names = [n for c in reversed(type(t).__mro__) for n in c.__dict__.get("__slots__", ())
                 if n not in ("__dict__", "__weakref__")]
        return {**{n: getattr(t, n) for n in names if hasattr(t, n)}, **vars(t)}
    from protocol import header
    C = reading._C
    assert C is not None, "the compiled build is not used"

    class Client:
        tracer = tracing.sdk_tracer()
        def after_task(self, task):
            task.marked = True

    bodies = [{}, {"values": {"a": 1}, "core": "vdsp1", "exec_us": 12, "board_us": 3.5, "board_model": "cycles"},
              {"board_us": 7, "board_model": "table"}, {"board_us": True, "board_model": "table"},
              {"board_us": math.nan, "board_model": "cycles"}, {"board_us": math.inf, "board_model": "cycles"},
              {"board_us": -1, "board_model": "cycles"}, {"board_us": 10 ** 30, "board_model": "cycles"},
              {"board_us": 2.0, "board_model": "bogus"}, {"board_us": 2.0}, {"board_us": None, "board_model": "cycles"},
              {"values": None, "core": 5, "exec_us": "x"}, {"board_us": "3", "board_model": "cycles"}]
    headers = [header.Header.parse(header.pack(0x11, 9, 0, 0, 1, q)) for q in (0, 250, -5)]
    out = []
    for i, body in enumerate(bodies):
        hdr = headers[i % 3]
        a, b = Task(Client(), 9, 1, [], "vdsp0"), Task(Client(), 9, 1, [], "vdsp0")
        called = []
        a.add_done_callback(lambda t: called.append(("a", t is a)))
        b.add_done_callback(lambda t: called.append(("b", t is b)))
        answer = C.complete(a, dict(body), hdr, [b"raw"] if i % 2 else [], Task, Client.tracer, BOARD_MODELS)
        b._complete(dict(body), None, hdr, [b"raw"] if i % 2 else [])
        again = C.complete(a, dict(body), hdr, [], Task, Client.tracer, BOARD_MODELS)
        def held(t, left=("_cb_lock", "completed_at", "submitted_at", "client")):
            return {k: repr(v) for k, v in fields(t).items() if k not in left}
        out.append({"answer": answer, "again": again, "a": held(a), "b": held(b), "called": called,
                    "stamped": a.completed_at >= a.submitted_at > 0})
    with_outputs = Task(Client(), 9, 1, ["mem"], "")
    class Sub(Task):
        pass
    sub = Task.__new__(Sub)
    sub.__init__(Client(), 9, 1, [], "")
    out.append({"outputs": C.complete(with_outputs, {}, headers[0], [], Task, Client.tracer, BOARD_MODELS),
                "subclass": C.complete(sub, {}, headers[0], [], Task, Client.tracer, BOARD_MODELS),
                "untouched": not with_outputs.done() and not sub.done()})
    # the class changed after the compiled path read its slots' offsets: a field is now a property,
    # whose setter a completion must go through (the offsets are read again, or the names used)
    seen = []
    slot = Task.exec_us
    Task.exec_us = property(slot.__get__, lambda t, v: (seen.append(v), slot.__set__(t, v)))
    changed = Task(Client(), 9, 1, [], "vdsp0")
    answer = C.complete(changed, {"exec_us": 41}, headers[0], [], Task, Client.tracer, BOARD_MODELS)
    out.append({"changed": [answer, changed.exec_us, seen]})
    print(json.dumps(out))
"""


def test_the_compiled_completion_of_a_task_holds_what_requests_own_does():
    """``arm_side/taskpath.c`` completes a RESULT's Task without ``Request._complete`` (its
    ``Task._on_complete`` written in C): for bodies a peer may send, honest or not (a board time
    that is a bool, NaN, infinite, negative, huge; an unknown model; wrong types), the task holds
    the same values, core, times, board estimate, header, raw frames and state as one completed by
    ``_complete``, its done-callbacks run once, a second completion is refused; a Task with outputs
    (marked written by the device) or of a subclass is left to its own ``_complete``; a field the
    class made a property after the fields' slots were read is set through that property."""
    if native_build.missing():
        privilege.require(f"this machine cannot build the compiled modules: {native_build.missing()}")
    res = _run(_COMPLETIONS, VDSP_NATIVE="1")
    assert res.returncode == 0, res.stderr[-3000:]
    *cases, last, changed = json.loads(res.stdout)
    assert len(cases) == 13
    for case in cases:
        assert case["answer"] is True and case["again"] is False and case["stamped"], case
        assert case["a"] == case["b"], case
        assert case["called"] == [["a", True], ["b", True]], case
    kept = [c["a"]["board_us"] for c in cases]
    assert kept[1:4] == ["3.5", "7.0", "None"] and kept[7] == "1e+30", kept     # a bool is no board time
    assert last == {"outputs": None, "subclass": None, "untouched": True}
    assert changed == {"changed": [True, 41, [0, 41]]}, changed      # __init__'s 0, then the reply's 41


# In a child with the compiled build, on a SoC of its own (relay or direct mode): each case
# submitted through arm_side/taskpath.c's submit and through Links.submit's Python (the client's
# compiled submit switched off), and what came of it printed, for the parent to compare.
_SUBMITS = r"""if True:
    import json, sys, zmq
    from vdsp_sim.soc.private_soc import PrivateSoc, PrivateSocConfig
    from arm_side import CORE_0, CORE_1, CORE_ANY, Soc, opids
    from arm_side.task import task_options
    def fields(t):      # a task's fields: its slots that are set (arm_side.task's __slots__, in order), its __dict__
        names = [n for c in reversed(type(t).__mro__) for n in c.__dict__.get("__slots__", ())
                 if n not in ("__dict__", "__weakref__")]
        return {**{n: getattr(t, n) for n in names if hasattr(t, n)}, **vars(t)}
    mode = sys.argv[1]
    ps = PrivateSoc(PrivateSocConfig(ddr_dir=None, mode=None)); ps.start()
    try:
        with Soc(mode=mode, strict=False, autostart_relay=False) as soc:
            client = soc.client
            compiled = client._submit_c
            assert compiled is not None, "the compiled build is not used"
            links, session = client.links, client.session
            opts = task_options(None, {"core": CORE_ANY})
            key = "relay" if mode == "relay" else None
            def held(t):     # what the task holds, but what differs by nature between two tasks (the core chosen)
                return [(k, type(v).__name__ if k in ("_cb_lock", "submitted_at", "client", "msg_id", "core") else repr(v))
                        for k, v in fields(t).items()]
            def got(values):
                return sorted(values)
            def case(name, run):
                got = {}
                for way in ("c", "py"):
                    client._submit_c = compiled if way == "c" else None
                    try:
                        got[way] = run()
                    except Exception as exc:
                        got[way] = ["raised", type(exc).__name__, str(exc)]
                client._submit_c = compiled
                return {"case": name, **got}
            out = []
            def made(*args, **kw):      # the task as submitted: no thread reads (completes it) meanwhile
                client.reading.turn.acquire()
                try:
                    t = client.submit(*args, **kw)
                    return t, held(t)
                finally:
                    client.reading.turn.release()
                    client.reading.wake()
            def plain():
                t, first = made(opids.PING, [], [], {}, opts)
                return {"made": first, "values": got(t.wait(10000)), "done": [list(fields(t)), t._done, t.error, t.released]}
            out.append(case("plain", plain))
            out.append(case("params and out_mems", lambda: made(opids.PING, [], [], {"x": 1}, opts, out_mems=["m"])[1]))
            def many(n, options=lambda i: opts):  # n tasks while none completes: the cores chosen, then the limit
                import time
                end = time.monotonic() + 10     # none in flight before (the tasks of the cases above end)
                while any(p.inflight for p in session.peers) and time.monotonic() < end:
                    time.sleep(0.01)
                client.reading.turn.acquire()
                tasks, got = [], []
                try:
                    for i in range(n):
                        try:
                            t = client.submit(opids.PING, [], [], {}, options(i))
                        except Exception as exc:
                            got.append([type(exc).__name__, str(exc)])
                        else:
                            tasks.append(t)
                            got.append([t.core, sorted(len(p.inflight) for p in session.peers)])
                finally:
                    client.reading.turn.release()
                    client.reading.wake()
                for t in tasks:
                    try:
                        t.wait(10000)
                    except Exception as exc:    # relay mode: the relay's limit
                        got.append(type(exc).__name__)
                return got
            # (relay mode: the relay's own limit counts what it has not answered yet, a matter of timing)
            out.append(case("cores chosen and the limit", lambda: many(34 if mode == "direct" else 30)))
            pinned = [task_options(None, {"core": c}) for c in (CORE_0, CORE_1, CORE_1)]
            task_link, routed = session.task_link, {"c": 0, "py": 0}     # the Python route's calls, each way
            def counted(*args):
                routed["c" if client._submit_c is not None else "py"] += 1
                return task_link(*args)
            session.task_link = counted
            out.append(case("cores asked for and the limit",
                            lambda: many(34 if mode == "direct" else 30, lambda i: pinned[i % 3])))
            del session.task_link
            def offline(core):      # a task to a core that stopped, as Session.core_state leaves it (direct mode)
                peer = session.peers[-1 if core == CORE_1 else 0]
                endpoint, state = peer.fw_endpoint, session.core_states.get(peer.name)
                peer.fw_endpoint, session.core_states[peer.name] = None, "offline"
                try:
                    return got(client.submit(opids.PING, [], [], {}, task_options(None, {"core": core})).wait(10000))
                finally:
                    peer.fw_endpoint = endpoint
                    if state is None:
                        del session.core_states[peer.name]
                    else:
                        session.core_states[peer.name] = state
            out.append(case("a core asked for offline", lambda: offline(CORE_1)))
            for op in (-1, 0xFFFF, True, "1"):
                out.append(case(f"op {op!r}", lambda: made(op, [], [], {}, opts)[1]))
            traced = []
            class Rec:      # the switch on at a submit's poll (the task's other stamps off)
                on = False
                def poll(self):
                    return True
            real = client.tracer.rec
            client.tracer.rec, client.tracer.submit_task = Rec(), lambda *a: traced.append([repr(x) for x in a[1:]])
            out.append(case("traced", lambda: [got(client.submit(opids.PING, [], [], {}, opts).wait(10000)), traced.pop()]))
            client.tracer.rec = real
            del client.tracer.submit_task
            links.straight = False         # no link straight to send on: Links._send_later's path
            out.append(case("later", lambda: got(client.submit(opids.PING, [], [], {}, opts).wait(10000))))
            links.straight = True
            import errno, functools, threading
            import arm_side.channel as channel_mod
            from arm_side import reading
            real_send, me = channel_mod.send_frames, threading.get_ident()
            for kind in ("again", "closed"):
                def failing_send(sock, frames, flags=0, kind=kind):     # this thread's sends fail
                    if threading.get_ident() != me:
                        return real_send(sock, frames, flags)
                    raise zmq.Again() if kind == "again" else zmq.ZMQError(errno.ENOTSOCK)
                def failing(send=failing_send):
                    before = set(session.pending), [set(p.inflight) for p in session.peers]
                    saved = client._submit_c
                    if saved is not None:       # the compiled submit's socket send: the lane's
                        lane = client._submit_lane()
                        client._submit_c = functools.partial(reading._C.submit, lane[:16] + (send,) + lane[17:])
                    channel_mod.send_frames = send      # Channel.send's
                    try:
                        client.submit(opids.PING, [], [], {}, opts)
                        return "sent"
                    except Exception as exc:
                        return [type(exc).__name__, str(exc), set(session.pending) == before[0],
                                [set(p.inflight) for p in session.peers] == before[1]]
                    finally:
                        channel_mod.send_frames, client._submit_c = real_send, saved
                out.append(case(f"send {kind}", failing))
            out.append(case("after", lambda: got(client.submit(opids.PING, [], [], {}, opts).wait(10000))))
            # Soc.rpc: the compiled one (arm_side/taskpath.c, rpc) against Soc.rpc's Python; the
            # compiled one's fallback (Soc.rpc's Python) counted: a call it takes whole is never handed on
            import types
            from arm_side import errors
            from arm_side.task import _OPTIONS
            from protocol.task_options import TaskOptions
            assert soc.__dict__.get("rpc") is not None, "this Soc's rpc is not the compiled one"
            handed = []
            def compiled_rpc(of):
                def python_rpc(*a, **kw):
                    handed.append(1)
                    return Soc.rpc(of, *a, **kw)
                return functools.partial(reading._C.rpc, (python_rpc, of.client, _OPTIONS))
            def outcome(call, *a, **kw):
                client.reading.turn.acquire()       # the task as submitted: no thread completes it meanwhile
                try:
                    t = call(*a, **kw)
                    made = held(t)
                except Exception as exc:
                    return {"made": ["raised", type(exc).__name__, str(exc)]}
                finally:
                    client.reading.turn.release()
                    client.reading.wake()
                try:
                    values = sorted(t.wait(10000))
                except errors.VdspError as exc:
                    values = ["raised", type(exc).__name__]
                return {"made": made, "values": values}
            rpcs = []
            def rpc_case(name, *a, **kw):       # Python first: the options it remembers are there for C
                py = outcome(types.MethodType(Soc.rpc, soc), *a, **kw)
                handed.clear()
                c = outcome(compiled_rpc(soc), *a, **kw)
                rpcs.append({"case": name, "c": c, "py": py, "handed_on": bool(handed)})
            mem, out_mem = soc.mem.alloc(64), soc.mem.alloc(64)
            rpc_case("op", opids.PING)
            for core in (CORE_ANY, CORE_0, CORE_1):
                rpc_case(f"core={int(core)}", opids.PING, core=core)
            rpc_case("timeout_ms", opids.PING, timeout_ms=250)
            for bad in (True, [1], 7):
                rpc_case(f"core={bad!r}", opids.PING, core=bad)
            rpc_case("bogus=1", opids.PING, bogus=1)
            rpc_case("op -1", -1)
            rpc_case("op '1'", "1", core=CORE_0)
            rpc_case("two options", opids.PING, core=CORE_1, priority=3)
            rpc_case("options", opids.PING, options=TaskOptions(core=CORE_1))
            rpc_case("buffers", opids.MEMCPY, [mem], [out_mem])
            rpc_case("params=", opids.PING, params={"x": 1})
            rpc_case("inputs=", opids.PING, inputs=[])
            client._submit_c = None             # the pure submit: the compiled rpc hands the call on
            rpc_case("no compiled submit", opids.PING, core=CORE_0)
            client._submit_c = compiled
            mem.free()
            out_mem.free()
            with Soc(mode=mode, strict=False, autostart_relay=False) as other:
                task_options(None, {"core": CORE_0})
            ways = {}
            for way, call in (("py", types.MethodType(Soc.rpc, other)), ("c", compiled_rpc(other))):
                handed.clear()
                try:
                    call(opids.PING, core=CORE_0)
                    ways[way] = "sent"
                except Exception as exc:
                    ways[way] = ["raised", type(exc).__name__, str(exc)]
            rpcs.append({"case": "closed", "c": ways["c"], "py": ways["py"], "handed_on": bool(handed)})
            import inspect
            said = [(str(inspect.signature(f)), f.__doc__) for f in (soc.rpc, types.MethodType(Soc.rpc, soc))]
            rpcs.append({"case": "help", "c": said[0], "py": said[1], "handed_on": False})
            # Client.wait_for: the compiled one (arm_side/taskpath.c, wait_for) against its Python,
            # the compiled one's fallback counted as rpc's is
            import re, time
            from arm_side import task as task_mod
            from arm_side.client import Client
            def compiled_wait_for(of):
                def python_wait_for(*a):
                    handed.append(1)
                    return Client.wait_for(of, *a)
                rd = of.reading
                return functools.partial(reading._C.wait_for, (python_wait_for, rd, task_mod._THREAD, rd.idle.fileno(),
                                                                rd._links_fd))
            assert client.__dict__.get("wait_for") is not None, "this client's wait_for is not the compiled one"
            def state(of):      # what a wait leaves: nobody reads, the links armed, the turn free, nothing deferred
                rd = of.client.reading
                # (the background thread may be reading just now, its tick or a reply: it gives the turn back)
                end = time.monotonic() + 2.0
                while (rd.reader or rd.turn.locked()) and time.monotonic() < end:
                    time.sleep(0.001)
                return [rd.reader, rd.armed, rd.turn.locked(), "deferred" in task_mod._THREAD.__dict__, list(rd.followers)]
            def outcome(run):
                try:
                    got = run()
                except Exception as exc:
                    got = ["raised", type(exc).__name__, re.sub(r"request \d+", "request N", str(exc))]
                return got
            waits = []
            def wait_case(name, run, of=soc):
                ways = {}
                for way in ("py", "c"):
                    of.client.__dict__["wait_for"] = compiled_wait_for(of.client) if way == "c" else \
                        types.MethodType(Client.wait_for, of.client)
                    handed.clear()
                    ways[way] = {"got": outcome(run), "state": state(of) if not of.client.closed else "closed",
                                 "handed_on": len(handed)}
                waits.append({"case": name, "c": ways["c"], "py": ways["py"], "handed_on": ways["c"].pop("handed_on")})
                ways["py"].pop("handed_on")
            # waits until `want` of them were not handed on (at most `most`): a wait may find the turn
            # taken by the background thread (its tick, or a reply that came before the wait began, more
            # often on a busy host) and be handed on, as the Python would. The replies of the first `want`
            # and how many were led: the Python's `want` of `want`
            def until_led(one, want=10, most=200):
                got = []
                while len(got) < most and len(got) - len(handed) < want:
                    got.append(one())
                return [got[:want], min(len(got) - len(handed), want)]
            wait_case("sequential", lambda: until_led(lambda: sorted(soc.rpc(opids.PING, core=CORE_ANY).wait(5000))))
            wait_case("no timeout", lambda: until_led(lambda: sorted(soc.rpc(opids.PING, core=CORE_1).wait(0))))
            def done_first():
                t = soc.rpc(opids.PING, core=CORE_0)
                while not t.done():
                    time.sleep(0.001)
                return [sorted(t.wait(5000)), sorted(t.wait(0))] * 5
            wait_case("done", done_first)
            def timed_out():
                t = soc.rpc(opids.SLEEP, params={"ms": 300}, core=CORE_0)
                try:
                    t.wait(50)
                    return "no timeout"
                except errors.TaskTimeout as exc:
                    first = ["raised", type(exc).__name__, re.sub(r"request \d+", "request N", str(exc))]
                return [first, sorted(t.wait(5000))]
            wait_case("timeout, then collected", timed_out)
            def in_callback():
                said = []
                def cb(t):
                    try:
                        soc.rpc(opids.PING, core=CORE_0).wait(1000)
                        said.append("waited")
                    except errors.VdspError as exc:
                        said.append([type(exc).__name__, re.sub(r"request \d+", "request N", str(exc))])
                client.reading.turn.acquire()       # no thread completes it before its callback is on
                try:
                    t = soc.rpc(opids.PING, core=CORE_0)
                    t.add_done_callback(cb)
                finally:
                    client.reading.turn.release()
                    client.reading.wake()
                t.wait(5000)
                return said
            wait_case("from a done-callback", in_callback)
            def turn_held():
                rd = client.reading
                rd.turn.acquire()
                t = soc.rpc(opids.PING, core=CORE_1)
                def give_back():
                    time.sleep(0.05)
                    rd.reader = 0
                    rd.turn.release()
                    for f in list(rd.followers):
                        f.wake()
                threading.Thread(target=give_back).start()
                return sorted(t.wait(5000))
            wait_case("the turn held by another thread", turn_held)
            for way in ("py", "c"):
                other = Soc(mode=mode, strict=False, autostart_relay=False)
                other.rpc(opids.PING, core=CORE_0).wait(5000)      # the links' lane made
                other.client.__dict__["wait_for"] = compiled_wait_for(other.client) if way == "c" else \
                    types.MethodType(Client.wait_for, other.client)
                handed.clear()
                t = other.rpc(opids.SLEEP, params={"ms": 2000}, core=CORE_0)
                threading.Timer(0.1, other.close).start()
                got = outcome(lambda: t.wait(10000))
                waits.append({"case": f"closed while waiting {way}", "got": got})
            client.__dict__["wait_for"] = compiled_wait_for(client)
        print(json.dumps({"submit": out, "rpc": rpcs, "wait": waits, "routed": routed}))
    finally:
        ps.close()
"""


@pytest.fixture(scope="module", params=["relay", "direct"])
def compiled_calls(request) -> dict:
    """The compiled submit's and rpc's cases against their Python, in a child with the compiled
    build on a SoC of its own (``request.param``: the mode)."""
    if native_build.missing():
        privilege.require(f"this machine cannot build the compiled modules: {native_build.missing()}")
    res = subprocess.run([sys.executable, "-c", _SUBMITS, request.param], cwd=ROOT, capture_output=True, text=True,
                         timeout=180, env=settings.child_env(VDSP_NATIVE="1"))
    assert res.returncode == 0, res.stderr[-3000:]
    out: dict = json.loads(res.stdout)
    return out


def test_the_compiled_submit_makes_and_sends_a_task_as_links_submit_does(compiled_calls):
    """``arm_side/taskpath.c``'s submit (the blocking client's ``Links.submit`` in C) makes the very
    Task ``Task.__init__`` makes (every attribute, in its order), sends it, answers a bad operator
    id, a trace being recorded, a link not straight to send on, and a socket send that fails
    (zmq.Again: the connection takes no messages; another ZMQError: the transport's failure; both
    RelayUnavailable, the task not in flight nor counted on a core) as the Python it mirrors, on
    a SoC of its own. (docs/building.md: "a task is made, tracked and sent in one call".)"""
    cases = compiled_calls["submit"]
    assert [c["case"] for c in cases] == ["plain", "params and out_mems", "cores chosen and the limit",
                                          "cores asked for and the limit", "a core asked for offline", "op -1",
                                          "op 65535", "op True", "op '1'", "traced", "later", "send again",
                                          "send closed", "after"]
    for c in cases:
        assert c["c"] == c["py"], c
    by = {c["case"]: c["c"] for c in cases}
    assert by["plain"]["values"] == ["core"] and [k for k, _ in by["plain"]["made"]][:3] == ["client", "msg_id", "_done"]
    chosen = by["cores chosen and the limit"]
    if chosen[0][0] == "":      # relay mode: the relay chooses
        assert len(chosen) == 30 and all(c[0] == "" for c in chosen), chosen
    else:                       # direct mode: the least busy core (the compiled route), then the limit
        assert [c[0] for c in chosen[:4]] == ["vdsp0", "vdsp1", "vdsp0", "vdsp1"], chosen[:4]
        assert [c[0] for c in chosen[32:]] == ["TaskNumExceedLimit"] * 2, chosen[30:]
        asked = by["cores asked for and the limit"]     # CORE_0, CORE_1, CORE_1, ... (the compiled route)
        assert [c[0] for c in asked[:6]] == ["vdsp0", "vdsp1", "vdsp1"] * 2, asked[:6]
        assert [c[0] for c in asked[32:]] == ["TaskNumExceedLimit"] * 2, asked[30:]
        assert by["a core asked for offline"][:2] == ["raised", "CoreOffline"], by["a core asked for offline"]
        # the compiled submit chose each asked-for core itself: Session.task_link only for the two over the limit
        assert compiled_calls["routed"] == {"c": 2, "py": 34}, compiled_calls["routed"]
    assert by["op -1"][:2] == ["raised", "InvalidArgument"] and by["op '1'"][:2] == ["raised", "InvalidArgument"]
    assert by["traced"][0] == by["later"] == by["after"] == ["core"] and by["traced"][1][2:] == ["[]", "[]"]
    for failed in ("send again", "send closed"):      # not in flight, nor counted on a core
        assert by[failed][0] == "RelayUnavailable" and by[failed][2:] == [True, True], by[failed]
    assert "takes no messages" in by["send again"][1] and "cannot send to" in by["send closed"][1], by


def test_the_compiled_rpc_takes_the_usual_call_and_hands_on_every_other_as_soc_rpc_answers_it(compiled_calls):
    """``arm_side/taskpath.c``'s rpc (a Soc's ``rpc`` in the compiled build) makes the task
    ``Soc.rpc``'s Python makes for ``rpc(op)`` and ``rpc(op, core=...)`` (one option as a keyword),
    without handing the call on; every other call (buffers, params, an options object, two
    options, an unknown keyword, a bad value, no compiled submit, a closed Soc) is handed to
    ``Soc.rpc``'s Python, whole, with its outcome. help() and inspect.signature() say of it what
    they say of ``Soc.rpc``. (docs/building.md: "`soc.rpc(op, core=...)` goes straight to it".)"""
    cases = compiled_calls["rpc"]
    # taken: the usual call's shape, whatever its values (a bad op id is the submit's to refuse)
    taken = ["op", "core=0", "core=1", "core=2", "timeout_ms", "op -1", "op '1'", "help"]
    handed = ["core=True", "core=[1]", "core=7", "bogus=1", "two options", "options", "buffers", "params=", "inputs=",
              "no compiled submit", "closed"]
    assert sorted(c["case"] for c in cases) == sorted(taken + handed)
    for c in cases:
        assert c["c"] == c["py"], c
        assert c["handed_on"] == (c["case"] in handed), c
    by = {c["case"]: c["c"] for c in cases}
    assert by["core=1"]["values"] == ["core"] and dict(by["core=2"]["made"])["options"].startswith("TaskOptions(core=")
    assert by["buffers"]["values"] == ["bytes"], by["buffers"]
    for bad, error in (("core=True", "InvalidCore"), ("core=7", "InvalidCore"), ("bogus=1", "InvalidArgument"),
                       ("op -1", "InvalidArgument"), ("op '1'", "InvalidArgument")):
        assert by[bad]["made"][:2] == ["raised", error], (bad, by[bad])
    assert by["closed"][:2] == ["raised", "ApiUseError"], by["closed"]


def test_the_compiled_wait_leads_until_done_and_leaves_the_reading_as_client_wait_for_does(compiled_calls):
    """``arm_side/taskpath.c``'s wait_for (a client's ``wait_for`` in the compiled build): a
    sequential wait, one without a timeout and one for a task already done are taken whole (this
    thread leads until the reply, as ``Reading.wait`` and ``Reading._lead`` do) and leave the
    reading as the Python leaves it (nobody reads, the links armed, the turn free, no wake-up
    deferred); a timeout ends with the Python's TaskTimeout and the task is collected after; a wait
    in a done-callback and a turn held by another thread are the Python's, with its outcomes; a
    close meanwhile ends either with ApiUseError. (docs/building.md: "a wait that finds nobody
    reading leads in one call too".)"""
    cases = compiled_calls["wait"]
    by = {c["case"]: c for c in cases}
    taken = ["sequential", "no timeout", "done"]
    handed = ["from a done-callback", "the turn held by another thread"]
    timed = "timeout, then collected"       # its collecting wait may find the turn taken by the background thread
    assert [c["case"] for c in cases] == taken + [timed] + handed + ["closed while waiting py", "closed while waiting c"]
    for name in taken + [timed] + handed:
        c = by[name]
        assert c["c"] == c["py"], c
        if name in handed:
            assert c["handed_on"] >= 1, c
        assert c["c"]["state"] == [0, True, False, False, []], c
    # ten waits led in C, however many a busy host had handed on before them; a done task never is
    assert by["sequential"]["c"]["got"] == [[["core"]] * 10, 10] and by["done"]["handed_on"] == 0
    first, then = by["timeout, then collected"]["c"]["got"]
    assert first == ["raised", "TaskTimeout", "[-6000008 HB_DNN_TIMEOUT] request N not done after 50 ms; it is still "
                     "in flight, wait again to collect it"] and then == ["slept_ms"], by["timeout, then collected"]
    assert by["from a done-callback"]["c"]["got"][0][0] == "ApiUseError", by["from a done-callback"]
    closed = [by["closed while waiting py"], by["closed while waiting c"]]
    for c in closed:    # the close fails the task, or the waiting thread sees it first: either is the Python's
        assert c["got"][:2] == ["raised", "ApiUseError"], closed
        assert c["got"][2].startswith("[-6000015 HB_DNN_API_USE_ERROR] the SoC connection was closed"), closed


def test_both_builds_answer_malformed_frames_and_bodies_alike():
    """Compiled code checks the annotated type of every argument and attribute it is handed and
    raised TypeError (a crash of the relay's loop) where the pure module took the value; each
    input here, run through both builds' relay engine, firmware inbox, HELLO gate, header and
    wire decoding, must give the same replies, state and errors in both."""
    if native_build.missing():
        privilege.require(f"this machine cannot build the compiled modules: {native_build.missing()}")
    children = {value: subprocess.Popen([sys.executable, str(Path(__file__))], cwd=ROOT, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, env=settings.child_env(VDSP_NATIVE=value))
                for value in ("0", "1")}     # side by side: about 1 s of CPU each
    runs = {}
    try:
        for value, child in children.items():
            out, err = child.communicate(timeout=240)
            assert child.returncode == 0, err[-3000:]
            runs[value] = json.loads(out)
    finally:
        for child in children.values():
            if child.poll() is None:
                child.kill()
                child.wait()
    modules = len(native_build.MODULES) + len(native_build.C_MODULES)
    assert runs["0"].pop("compiled") == [False] * modules
    assert runs["1"].pop("compiled") == [True] * modules, "the compiled build is not used here"
    assert len(runs["0"]) > 1000 and runs["0"].keys() == runs["1"].keys()
    differ = [f"{name}:\n  pure     {runs['0'][name]}\n  compiled {runs['1'][name]}"
              for name in runs["0"] if runs["0"][name] != runs["1"][name]]
    assert not differ, f"{len(differ)} of {len(runs['0'])} inputs differ:\n" + "\n".join(differ[:12])
    raised = sum(v[0] == "raised" for v in runs["0"].values())
    assert raised < len(runs["0"]) / 2, raised      # the inputs reach the code, not only the argument checks


if __name__ == "__main__":
    import logging
    logging.disable()       # the relay's warnings about each malformed input (not compared)
    found = outcomes()
    found["compiled"] = [native_build.active(importlib.import_module(_module_name(rel))) for rel in native_build.MODULES]
    found["compiled"] += [importlib.import_module("vdsp_board.sockets.zsock")._ZIO is not None]    # vdsp_board/sockets/zio.c
    found["compiled"] += [importlib.import_module("arm_side.reading")._C is not None]     # arm_side/taskpath.c
    json.dump(found, sys.stdout, default=repr)
