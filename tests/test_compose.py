"""docker-compose.yml and docker/Dockerfile, checked without a docker engine.

(a) the compose file's structure (services, image, IPC sharing, healthchecks,
    start order); (b) every command and healthcheck command is a console script
    of pyproject.toml whose arguments really parse; (c) live: the same commands run
    as local processes on loopback TCP (one runtime directory per "container"),
    the smoke sample passes through the relay, and nothing is left behind.
"""
from __future__ import annotations

import argparse
import dataclasses
import fcntl
import importlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import pytest
import yaml

from relay_server import main as relay_main
from vdsp_sim import cli
from vdsp_sim.board import runtime

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"
SERVICES = {"keys", "relay", "vdsp0", "vdsp1", "sample"}
KEYS_MOUNT = "/keys"    # where the keys volume is mounted in every container
CORES = ("vdsp0", "vdsp1")
SHM = "/dev/shm"


def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def services() -> dict:
    return compose()["services"]


def scripts() -> dict[str, str]:
    """[project.scripts] of pyproject.toml: name -> "module:function"."""
    with open(ROOT / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)["project"]["scripts"]


def healthcheck_argv(service: dict) -> tuple[dict, list[str]]:
    """(env assignments, argv) of a ``["CMD", "env", "K=V", ..., prog, args...]`` healthcheck."""
    test = service["healthcheck"]["test"]
    assert isinstance(test, list) and test[0] == "CMD", f"healthcheck must use the exec form: {test!r}"
    argv, env = list(test[1:]), {}
    if argv and argv[0] == "env":
        argv.pop(0)
        while argv and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", argv[0]):
            key, _, value = argv.pop(0).partition("=")
            env[key] = value
    return env, argv


def endpoint_port(endpoint: str) -> int:
    assert endpoint.startswith("tcp://"), endpoint
    return int(endpoint.rpartition(":")[2])


def option(argv: list[str], flag: str) -> list[str]:
    """Every value of ``flag`` in ``argv`` (``--flag value`` form)."""
    return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag]


# --- (a) structure ------------------------------------------------------------------------

def test_services_and_image():
    svcs = services()
    assert set(svcs) == SERVICES
    builds = set()
    for name, svc in svcs.items():
        build = svc.get("build")
        assert isinstance(build, dict), f"{name}: no build section"
        context = (ROOT / build.get("context", ".")).resolve()
        assert context == ROOT, f"{name}: build context must be the repository root"
        dockerfile = context / build.get("dockerfile", "Dockerfile")
        assert dockerfile.is_file(), f"{name}: {dockerfile} does not exist"
        builds.add((str(context), str(dockerfile), svc.get("image")))
        assert isinstance(svc.get("command"), list) and svc["command"], f"{name}: command must be a list"
    assert len(builds) == 1, f"all services must run the one image: {builds}"


def test_dockerfile_installs_the_project():
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    lines = [ln.strip() for ln in dockerfile.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    assert lines[0] == "FROM python:3.11-slim"
    assert re.search(r"^RUN pip install \.", dockerfile, re.M), "the image must pip install the project"
    assert re.search(r"VDSP_RUNTIME_DIR=(/\S+)", dockerfile), "VDSP_RUNTIME_DIR must be set in the image"
    copied = {src.rstrip("/") for m in re.finditer(r"^COPY (.+)$", dockerfile, re.M)
              for src in m[1].split()[:-1]}
    with open(ROOT / "pyproject.toml", "rb") as fh:
        pyproject = tomllib.load(fh)
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    needed = {"pyproject.toml"} | {pattern.rstrip("*") for pattern in include}
    if isinstance(pyproject["project"].get("readme"), str):
        needed.add(pyproject["project"]["readme"])
    if "." not in copied:
        assert needed <= copied, f"the image lacks {sorted(needed - copied)}"
    runtime_dir = re.search(r"VDSP_RUNTIME_DIR=(/\S+)", dockerfile)[1]
    assert re.search(r"mkdir\b.*\$VDSP_RUNTIME_DIR|mkdir\b.*" + re.escape(runtime_dir), dockerfile), \
        "the runtime directory must exist (and be writable) in the image"


def test_ipc_namespace_is_shared():
    svcs = services()
    owners = [n for n, s in svcs.items() if s.get("ipc") == "shareable"]
    assert owners == ["vdsp0"], f"exactly vdsp0 must own a shareable IPC namespace, got {owners}"
    for name in SERVICES - {"vdsp0", "keys"}:
        assert svcs[name].get("ipc") == "service:vdsp0", f"{name} must join vdsp0's IPC namespace (/dev/shm)"


def test_every_service_reaches_the_soc_with_curve_keys():
    svcs = services()
    made = {"condition": "service_completed_successfully"}
    assert svcs["keys"]["command"] == ["vdsp", "keys", "init"]
    for name in SERVICES:
        assert svcs[name]["environment"]["VDSP_KEYS_DIR"] == KEYS_MOUNT, name
        assert f"keys:{KEYS_MOUNT}" in svcs[name]["volumes"], name
    for name in ("relay", *CORES):      # the sample starts after the relay, which starts after the keys
        assert svcs[name]["depends_on"]["keys"] == made, name
    assert "keys" in compose()["volumes"]


def test_healthchecks_and_start_order():
    svcs = services()
    for name in ("relay", *CORES):
        hc = svcs[name].get("healthcheck")
        assert hc and hc.get("test") and not hc.get("disable"), f"{name} needs a healthcheck"
        for key in ("interval", "timeout", "retries"):
            assert key in hc, f"{name}: healthcheck lacks {key}"
    assert svcs["relay"]["depends_on"] == {"keys": {"condition": "service_completed_successfully"},
                                           **{c: {"condition": "service_healthy"} for c in CORES}}
    assert svcs["sample"]["depends_on"] == {"relay": {"condition": "service_healthy"}}
    # Joining vdsp0's IPC namespace needs vdsp0 started first.
    assert svcs["vdsp1"]["depends_on"]["vdsp0"]["condition"] in ("service_started", "service_healthy")
    assert svcs["sample"].get("restart", "no") == "no", "the sample runs once"


def test_endpoints_are_consistent():
    svcs = services()
    relay_argv = svcs["relay"]["command"]
    bind = option(relay_argv, "--bind")
    assert len(bind) == 1 and bind[0].startswith("tcp://0.0.0.0:")
    cores = runtime.parse_core_list(option(relay_argv, "--core"))
    assert list(cores) == list(CORES)
    for name in CORES:
        argv = svcs[name]["command"]
        assert option(argv, "--name") == [name]
        (ctl,), (fw,) = option(argv, "--bind"), option(argv, "--fw-bind")
        assert ctl.startswith("tcp://0.0.0.0:") and fw.startswith("tcp://0.0.0.0:")
        assert ctl != fw
        # The relay reaches the core by its service name, on the port the core binds.
        assert cores[name] == f"tcp://{name}:{endpoint_port(ctl)}"
        # ... and the firmware endpoint announced in READY becomes reachable the same way.
        assert runtime.connectable(fw, cores[name]) == f"tcp://{name}:{endpoint_port(fw)}"
        env, _ = healthcheck_argv(svcs[name])
        assert env == {"VDSP_CORE_ENDPOINTS": f"{name}=tcp://127.0.0.1:{endpoint_port(ctl)}"}
    env, _ = healthcheck_argv(svcs["relay"])
    assert env == {"VDSP_RELAY_ENDPOINT": f"tcp://127.0.0.1:{endpoint_port(bind[0])}"}
    assert svcs["sample"]["environment"]["VDSP_RELAY_ENDPOINT"] == f"tcp://relay:{endpoint_port(bind[0])}"


# --- (b) commands parse -------------------------------------------------------------------

class _Parsed(Exception):
    pass


def _parse_sample(name: str, rest: list[str], monkeypatch) -> argparse.Namespace:
    """Parse a sample's own arguments with its real parser, without running it."""
    module = importlib.import_module(f"vdsp_sim.samples.{name}")
    original = argparse.ArgumentParser.parse_args

    def parse_only(self, args=None, namespace=None):
        raise _Parsed(original(self, args, namespace))
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_only)
    try:
        module.main(rest)
    except _Parsed as parsed:
        return parsed.args[0]
    except SystemExit as exc:
        pytest.fail(f"sample {name} rejects its arguments {rest!r} (exit {exc.code})")
    finally:
        monkeypatch.setattr(argparse.ArgumentParser, "parse_args", original)
    pytest.fail(f"sample {name} did not parse its arguments")


def check_argv(argv: list[str], monkeypatch, what: str) -> argparse.Namespace:
    """The command must be a console script of pyproject.toml and its arguments must parse."""
    prog, args = argv[0], argv[1:]
    entry = scripts().get(prog)
    assert entry is not None, f"{what}: {prog!r} is not a console script of pyproject.toml ({sorted(scripts())})"
    ap = {"vdsp_sim.cli:main": cli.parser, "relay_server.main:main": relay_main.parser}[entry]()
    try:
        ns = ap.parse_args(args)
    except SystemExit as exc:
        pytest.fail(f"{what}: {argv!r} does not parse (exit {exc.code})")
    if entry == "relay_server.main:main" and ns.core:
        runtime.parse_core_list(ns.core)
    if entry == "vdsp_sim.cli:main" and ns.command == "sample":
        _parse_sample(ns.name, ns.rest, monkeypatch)
    return ns


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_command_parses(name, monkeypatch):
    check_argv(services()[name]["command"], monkeypatch, f"{name} command")


@pytest.mark.parametrize("name", ["relay", *CORES])
def test_healthcheck_command_parses(name, monkeypatch):
    _, argv = healthcheck_argv(services()[name])
    ns = check_argv(argv, monkeypatch, f"{name} healthcheck")
    assert ns.command == "status"


def test_a_typo_fails(monkeypatch):
    with pytest.raises(pytest.fail.Exception):
        check_argv(["vdsp", "core", "--name", "vdsp0", "--fwbind", "tcp://0.0.0.0:6101"], monkeypatch, "typo")
    with pytest.raises(pytest.fail.Exception):
        check_argv(["dsp_relay_server", "--cores", "vdsp0=tcp://vdsp0:6100"], monkeypatch, "typo")
    with pytest.raises(pytest.fail.Exception):
        check_argv(["vdsp", "sample", "smoke", "--rouns", "20"], monkeypatch, "typo")
    with pytest.raises(AssertionError):
        check_argv(["dsp-relay-server"], monkeypatch, "typo")


# --- (c) live, on loopback ----------------------------------------------------------------

def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


_ENDPOINT = re.compile(r"tcp://(?P<host>[^:/\s]+):(?P<port>\d+)")


class Loopback:
    """Maps the compose network onto 127.0.0.1: each (service, port) gets a free port."""

    def __init__(self, svcs: dict) -> None:
        wanted = []
        for name, svc in svcs.items():
            for flag in ("--bind", "--fw-bind"):
                for endpoint in option(svc["command"], flag):
                    wanted.append((name, endpoint_port(endpoint)))
        self.ports = dict(zip(wanted, free_ports(len(wanted))))
        self.names = set(svcs)

    def __call__(self, text: str, service: str) -> str:
        """``text`` as seen from ``service``: service names -> 127.0.0.1, ports -> free ports."""
        def sub(m: re.Match) -> str:
            host, port = m["host"], int(m["port"])
            if host in self.names:
                return f"tcp://127.0.0.1:{self.ports[(host, port)]}"
            assert host in ("0.0.0.0", "*", "127.0.0.1", "localhost"), f"unexpected host in {text!r}"
            return f"tcp://{'127.0.0.1' if host == 'localhost' else host}:{self.ports[(service, port)]}"
        return _ENDPOINT.sub(sub, text)


def python_argv(argv: list[str]) -> list[str]:
    """A console-script command as ``python -m module ...`` (no dependency on .venv/bin)."""
    module = scripts()[argv[0]].partition(":")[0]
    return [sys.executable, "-m", module, *argv[1:]]


def base_env(rt: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VDSP_")}
    env.update(VDSP_RUNTIME_DIR=str(rt), PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1",
               VDSP_FIRMWARE_DIR=str(rt.parent / "firmware"),  # the image's firmware directory
               VDSP_KEYS_DIR=str(rt.parent / "keys"),          # the keys volume
               VDSP_PARENT_PID=str(os.getpid()))  # die with the test if it is killed
    return env


def session_procs(sid: int) -> list[str]:
    """Live (non-zombie) processes of session ``sid``, as "pid cmdline"."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[3]) == sid and fields[0] != "Z":
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                out.append(f"{entry.name} {cmd.strip()}")
        except (OSError, ValueError, IndexError):
            continue
    return out


def vdsp_files() -> set[str]:
    try:
        return {n for n in os.listdir(SHM) if n.startswith("vdsp-")}
    except FileNotFoundError:
        return set()


def _lock_held(owner_hex: str) -> bool:
    """True if the owner's lock file exists and a live process holds it."""
    try:
        fd = os.open(os.path.join(SHM, f"vdsp-{owner_hex}.lock"), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def leftovers(before: set[str]) -> list[str]:
    """New vdsp-* files in /dev/shm that no live owner holds (left by our dead processes)."""
    left = []
    for name in sorted(vdsp_files() - before):
        m = re.match(r"vdsp-([0-9a-f]{6})", name)
        if not (m and _lock_held(m[1])):
            left.append(name)
    return left


@dataclasses.dataclass
class LiveRun:
    status: dict | None = None
    status_error: str = ""
    healthchecks: dict = dataclasses.field(default_factory=dict)
    sample: subprocess.CompletedProcess | None = None
    left_procs: list = dataclasses.field(default_factory=list)
    left_files: list = dataclasses.field(default_factory=list)
    logs: str = ""


def _status(loop: Loopback, rt: Path) -> tuple[int, dict | None, str]:
    env = base_env(rt)
    env["VDSP_RELAY_ENDPOINT"] = loop(services()["sample"]["environment"]["VDSP_RELAY_ENDPOINT"], "sample")
    proc = subprocess.run([sys.executable, "-m", "vdsp_sim.cli", "status", "--json"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=20)
    try:
        return proc.returncode, json.loads(proc.stdout), proc.stderr
    except ValueError:
        return proc.returncode, None, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def live_run():
    """Bring the compose services up as local processes, run the sample, tear down."""
    svcs = services()
    loop = Loopback(svcs)
    base = Path(tempfile.mkdtemp(prefix="vd", dir="/tmp"))
    before = vdsp_files()
    procs: dict[str, subprocess.Popen] = {}
    logs: dict[str, Path] = {}
    run = LiveRun()
    try:
        # what the Dockerfile does at image build time: install the stock firmware images
        subprocess.run(python_argv(["vdsp", "firmware", "install-stock"]), env=base_env(base / "build"),
                       cwd=ROOT, check=True, capture_output=True, timeout=60)
        subprocess.run(python_argv(svcs["keys"]["command"]), env=base_env(base / "keys-service"), cwd=ROOT,
                       check=True, capture_output=True, timeout=60)
        for name in ("vdsp0", "vdsp1", "relay"):   # compose's start order
            rt = base / name
            env = base_env(rt)
            env.update({k: loop(str(v), name) for k, v in (svcs[name].get("environment") or {}).items()
                        if k != "VDSP_KEYS_DIR"})
            logs[name] = base / f"{name}.log"
            with open(logs[name], "wb") as out:
                procs[name] = subprocess.Popen(
                    python_argv([loop(a, name) for a in svcs[name]["command"]]), env=env, cwd=ROOT,
                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            dead = [f"{n} exit {p.returncode}" for n, p in procs.items() if p.poll() is not None]
            if dead:
                run.status_error = f"exited during start-up: {', '.join(dead)}"
                break
            code, status, err = _status(loop, base / "probe")
            if code == 0 and status and [c.get("state") for c in status.get("cores", [])] == ["running"] * 2:
                run.status = status
                break
            run.status_error = f"last status (exit {code}): {status if status else err}"
            time.sleep(0.3)
        if run.status is not None:
            for name in ("relay", *CORES):   # the healthchecks, run "inside" each container
                hc_env, argv = healthcheck_argv(svcs[name])
                env = base_env(base / name)
                env.update({k: loop(v, name) for k, v in hc_env.items()})
                proc = subprocess.run(python_argv([loop(a, name) for a in argv]), env=env, cwd=ROOT,
                                      capture_output=True, text=True, timeout=30)
                run.healthchecks[name] = (proc.returncode, proc.stdout[-2000:] + proc.stderr[-2000:])
            sample = svcs["sample"]
            env = base_env(base / "sample")
            env.update({k: loop(str(v), "sample") for k, v in (sample.get("environment") or {}).items()
                        if k != "VDSP_KEYS_DIR"})
            procs["sample"] = proc = subprocess.Popen(
                python_argv([loop(a, "sample") for a in sample["command"]]), env=env, cwd=ROOT,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                start_new_session=True)
            try:
                out, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGTERM)
                out, err = proc.communicate(timeout=10)
            run.sample = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    finally:
        for name in ("sample", "relay", "vdsp1", "vdsp0"):   # compose's stop order
            proc = procs.get(name)
            if proc is None:
                continue
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        time.sleep(0.3)
        for name, proc in procs.items():
            left = session_procs(proc.pid)
            run.left_procs += [f"{name}: {p}" for p in left]
            if left:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)   # the group of a process we started
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 3
        while leftovers(before) and time.monotonic() < deadline:
            time.sleep(0.1)
        run.left_files = leftovers(before)
        run.logs = "\n".join(f"--- {n}.log\n{p.read_text(errors='replace')[-3000:]}"
                             for n, p in logs.items() if p.exists())
        shutil.rmtree(base, ignore_errors=True)
    yield run


@pytest.mark.live
def test_live_stack_runs_the_sample(live_run):
    run = live_run
    assert run.status is not None, f"the cores never ran behind the relay: {run.status_error}\n{run.logs}"
    assert [c["name"] for c in run.status["cores"]] == list(CORES)
    for name, (code, output) in run.healthchecks.items():
        assert code == 0, f"healthcheck of {name} fails (exit {code}):\n{output}"
    sample = run.sample
    output = sample.stdout + sample.stderr
    assert sample.returncode == 0, f"sample exit {sample.returncode}:\n{output}\n{run.logs}"
    assert "check result right" in output, output
    assert "WRONG" not in output, output
    assert not run.left_procs, f"processes left: {run.left_procs}"
    assert not run.left_files, f"{SHM} files left: {run.left_files}"


@pytest.mark.live
def test_live_sample_uses_the_remote_soc(live_run):
    assert live_run.sample is not None, live_run.status_error
    output = live_run.sample.stdout + live_run.sample.stderr
    assert "starting relay" not in output, output


def test_dockerfile_builds_the_stock_firmware():
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    assert re.search(r"VDSP_FIRMWARE_DIR=/\S+", dockerfile)
    assert "vdsp firmware install-stock" in dockerfile
