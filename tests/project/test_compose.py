"""docker-compose.yml, docker/Dockerfile, .dockerignore and scripts/compose-e2e.sh, checked
without a docker engine (scripts/compose-e2e.sh runs them for real, with one).

(a) the compose file: valid against the Compose specification's JSON schema (offline),
    its structure (services, one image, the shared DDR volume, restart policies,
    healthchecks that round-trip a buffer, start order); the Dockerfile's structure (local
    base, non-root user, firmware and numba kernels built in, HEALTHCHECK) and the build
    context .dockerignore leaves; (b) every command and healthcheck command is a console
    script of pyproject.toml whose arguments really parse; (c) live: the same commands run
    as local processes on loopback TCP (one runtime directory per "container", one DDR
    directory for all), the healthchecks pass, the smoke sample passes through the relay,
    and nothing is left behind; (d) the end-to-end script: --help, --dry-run, and the
    README's Docker section is exactly the commands it runs.
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
from vdsp_board.processes import rundir
from vdsp_sim.soc.private_soc import free_tcp_ports as free_ports

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "docker" / "Dockerfile"
E2E = ROOT / "scripts" / "compose-e2e.sh"
SERVICES = {"keys", "relay", "vdsp0", "vdsp1", "sample"}
SOC_SERVICES = ("vdsp0", "vdsp1", "relay", "sample")   # everything that maps DDR buffers
KEYS_MOUNT = "/keys"    # where the keys volume is mounted in every container
DDR_MOUNT = "/ddr"      # where the ddr volume is mounted (VDSP_SHM_DIR)
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

def compose_schema() -> dict:
    """The Compose specification's JSON schema, as check-jsonschema bundles it (no network)."""
    from importlib import resources
    return json.loads((resources.files("check_jsonschema") / "builtin_schemas/vendor/compose-spec.json").read_text())


def schema_errors(document: dict) -> list[str]:
    import jsonschema
    validator = jsonschema.validators.validator_for(compose_schema())(compose_schema())
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]


def test_compose_file_follows_the_compose_specification():
    assert schema_errors(compose()) == []


def test_the_schema_check_catches_mistakes():
    bad = compose()
    bad["services"]["vdsp0"]["healtcheck"] = bad["services"]["vdsp0"].pop("healthcheck")   # a typo
    bad["services"]["relay"]["restart"] = ["always"]
    errors = schema_errors(bad)
    assert any("healtcheck" in e for e in errors), errors
    assert any(e.startswith("services/relay/restart") for e in errors), errors


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
        assert dockerfile == DOCKERFILE, f"{name}: builds {dockerfile}"
        # a fresh clone builds it where a registry is (the Dockerfile's default base); here the
        # local base and no network are passed in through the environment
        assert build.get("args", {}).get("BASE_IMAGE") == f"${{VDSP_BASE_IMAGE:-{dockerfile_base()}}}", name
        assert build.get("network") == "${VDSP_BUILD_NETWORK:-default}", name
        assert svc.get("pull_policy") in (None, "missing", "build"), f"{name}: compose must be free to build it"
        builds.add((str(context), str(dockerfile), svc.get("image")))
        assert isinstance(svc.get("command"), list) and svc["command"], f"{name}: command must be a list"
    assert len(builds) == 1, f"all services must run the one image: {builds}"
    assert builds.pop()[2] == "vdsp-sim:local" == e2e_image_tag()


def e2e_image_tag() -> str:
    return re.search(r"-t (\S+) \.", (ROOT / "scripts" / "docker-images.sh").read_text())[1]


def dockerfile_base() -> str:
    """The default of the Dockerfile's BASE_IMAGE argument."""
    return re.fullmatch(r"ARG BASE_IMAGE=(\S+)", dockerfile_lines()[0])[1]


def dockerfile_lines() -> list[str]:
    """Instructions of docker/Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(ln for ln in DOCKERFILE.read_text().splitlines()
                                       if not ln.strip().startswith("#")))
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


def stages() -> list[list[str]]:
    out: list[list[str]] = []
    for ln in dockerfile_lines():
        if ln.startswith("FROM "):
            out.append([])
        if out:
            out[-1].append(ln)
    return out


def image_user() -> tuple[str, int]:
    """(name, uid) of the user the image runs as: its last USER, created by useradd --uid."""
    final = stages()[-1]
    user = [ln.split()[1] for ln in final if ln.startswith("USER ")][-1]
    uid = re.search(rf"useradd\b[^&]*--uid (\d+)[^&]*\b{re.escape(user)}\b", " ".join(final))
    assert uid, f"USER {user} is not created with a fixed --uid in the final stage"
    return user, int(uid[1])


def test_dockerfile_base_is_an_argument():
    """An official Python slim image by default (a fresh clone builds where a registry is); the
    locally built base (debootstrap) is passed in where none is."""
    lines = dockerfile_lines()
    arg = re.fullmatch(r"ARG BASE_IMAGE=(\S+)", lines[0])
    assert arg, "the base image is a build argument"
    assert re.fullmatch(r"python:3\.11-slim(-bookworm)?", arg[1]), arg[1]
    froms = [ln for ln in lines if ln.startswith("FROM ")]
    assert froms == ["FROM ${BASE_IMAGE} AS build", "FROM ${BASE_IMAGE}"], froms
    base_tag = re.search(r"^TAG=(\S+)$", (ROOT / "scripts" / "docker-base.sh").read_text(), re.M)[1]
    assert "debootstrap" in (ROOT / "scripts" / "docker-base.sh").read_text()
    images = (ROOT / "scripts" / "docker-images.sh").read_text()
    assert re.search(r"docker build --network none --build-arg BASE_IMAGE=\"\$BASE\"", images)
    assert "sed -n 's/^TAG=//p' scripts/docker-base.sh" in images, "the tag docker-base.sh makes"
    e2e = E2E.read_text()
    assert f"VDSP_BASE_IMAGE={base_tag} VDSP_BUILD_NETWORK=none" in e2e


def test_dockerfile_installs_the_project():
    build = " ".join(stages()[0])
    copied = {src.rstrip("/") for m in re.finditer(r"^COPY (?!--from)(.+)$", "\n".join(stages()[0]), re.M)
              for src in m[1].split()[:-1]}
    with open(ROOT / "pyproject.toml", "rb") as fh:
        pyproject = tomllib.load(fh)
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    needed = {"pyproject.toml"} | {pattern.rstrip("*") for pattern in include}
    if isinstance(pyproject["project"].get("readme"), str):
        needed.add(pyproject["project"]["readme"])
    assert needed <= copied, f"the image lacks {sorted(needed - copied)}"
    assert "build/docker/wheel[s]" in copied, "the wheelhouse of scripts/docker-wheels.sh, when there is one"
    # with wheels in the context, pip uses them only (no index); without, PyPI
    assert "PIP_FIND_LINKS=/tmp/wheels" in build
    assert re.search(r"if ls /tmp/wheels/\*\.whl >/dev/null 2>&1; then export PIP_NO_INDEX=1; fi", build)
    assert re.search(r"/opt/vdsp/venv/bin/pip install /src\b", build)
    final = " ".join(stages()[-1])
    assert re.search(r"VDSP_RUNTIME_DIR=(/\S+)", final), "VDSP_RUNTIME_DIR must be set in the image"
    runtime_dir = re.search(r"VDSP_RUNTIME_DIR=(/\S+)", final)[1]
    user, _ = image_user()
    assert re.search(rf"install -d -o {user} -g {user} -m 0700 [^&]*{re.escape(runtime_dir)}\b", final), \
        "the runtime directory must exist, private to the image's user"
    assert "/opt/vdsp/venv/bin" in re.search(r"ENV PATH=(\S+)", final)[1]


def test_dockerfile_builds_the_stock_firmware():
    build = " ".join(stages()[0])
    assert re.search(r"VDSP_FIRMWARE_DIR=/\S+", build)
    assert "vdsp firmware install-stock" in build
    # the build-time signing key never reaches the image; its public key stays trusted
    assert re.search(r"rm /keys/firmware-signing\.pem", build)
    assert "/keys/firmware-trusted/image-build.pub" in build
    final = stages()[-1]
    assert "COPY --from=build /opt/vdsp/firmware /opt/vdsp/firmware" in final
    user, _ = image_user()
    assert f"COPY --from=build --chown={user}:{user} /keys /keys" in final


def test_image_runs_as_a_user_with_the_numba_kernels_compiled():
    final = stages()[-1]
    user, uid = image_user()
    assert user != "root" and uid != 0
    env = " ".join(ln for ln in final if ln.startswith("ENV "))
    cache = re.search(r"NUMBA_CACHE_DIR=(\S+)", env)[1]
    assert "NUMBA_CPU_NAME=generic" in env, "kernels cached for any x86-64 host, not the build machine's CPU"
    i_user = final.index(f"USER {user}")
    compile_runs = [i for i, ln in enumerate(final) if "python -m vdsp_sim.pointcloud_inprocess" in ln]
    assert compile_runs and all(i > i_user for i in compile_runs), \
        "the kernels must be compiled as the image's user (numba ignores a cache it cannot write)"
    assert re.search(rf"install -d -o {user} -g {user} -m 0700 [^&]*{re.escape(cache)}\b", " ".join(final))
    assert any('grep -q "data loaded"' in final[i] and '! grep -q "data saved"' in final[i] for i in compile_runs), \
        "the build must prove that a second run loads the kernels instead of compiling them"
    # compose's DDR volume is that user's
    assert f"uid={uid},gid={uid}" in compose()["volumes"]["ddr"]["driver_opts"]["o"]


def test_image_healthcheck_and_entrypoint():
    final = stages()[-1]
    hc = [ln for ln in final if ln.startswith("HEALTHCHECK ")]
    assert len(hc) == 1 and hc[0].endswith('CMD ["vdsp", "health"]'), hc
    assert 'ENTRYPOINT ["/usr/bin/tini", "--"]' in final
    assert "tini" in re.search(r"^PACKAGES=(\S+)$", (ROOT / "scripts" / "docker-base.sh").read_text(), re.M)[1]
    # the official base has no tini: the final stage installs Debian's when it is missing
    assert re.search(r"command -v tini >/dev/null \|\| \{ apt-get update -qq && apt-get install [^}]*\btini\b",
                     " ".join(final))
    assert final[-1] == 'CMD ["vdsp", "up"]'


def dockerignore() -> list[str]:
    return [ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]


def test_build_context_is_a_whitelist():
    patterns = dockerignore()
    assert patterns[0] == "*", "everything is left out unless named"
    included = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    copied = {re.sub(r"\[(.)\]", r"\1", src.rstrip("/"))       # build/docker/wheel[s]: the wheelhouse if any
              for m in re.finditer(r"^COPY (?!--from)(.+)$", "\n".join(dockerfile_lines()), re.M)
              for src in m[1].split()[:-1]}
    assert included == copied, f"the context must hold what the Dockerfile copies, and only that: {included ^ copied}"
    for junk in ("**/__pycache__", "**/*.pyc"):
        assert junk in patterns
    sources = 0
    for top in included - {"build/docker/wheels"}:
        path = ROOT / top
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        sources += sum(p.stat().st_size for p in files if "__pycache__" not in p.parts and p.suffix != ".pyc")
    assert sources < 8 << 20, f"the project's sources in the build context are {sources} bytes"


def test_ddr_is_one_volume_that_outlives_any_container():
    svcs = services()
    for name, svc in svcs.items():
        assert "ipc" not in svc, f"{name}: the DDR is the ddr volume, not an IPC namespace " \
                                 "(a restarted owner leaves the others in its old one)"
    for name in SOC_SERVICES:
        assert svcs[name]["environment"]["VDSP_SHM_DIR"] == DDR_MOUNT, name
        assert f"ddr:{DDR_MOUNT}" in svcs[name]["volumes"], name
    ddr = compose()["volumes"]["ddr"]
    assert ddr["driver"] == "local" and ddr["driver_opts"]["type"] == "tmpfs", "the DDR is memory, not disk"
    assert "mode=0700" in ddr["driver_opts"]["o"]


def test_restart_policies():
    svcs = services()
    for name in ("relay", *CORES):
        assert svcs[name]["restart"] in ("always", "unless-stopped", "on-failure"), name
    for name in ("keys", "sample"):
        assert svcs[name]["restart"] == "no", f"{name} runs once"


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


def health_deadline() -> float:
    """The default deadline of the whole 'vdsp health' check (--deadline)."""
    from vdsp_sim import health
    return health.DEADLINE_S


def test_healthchecks_round_trip_a_buffer_and_start_order():
    svcs = services()
    for name in ("relay", *CORES):
        hc = svcs[name].get("healthcheck")
        assert hc and hc.get("test") and not hc.get("disable"), f"{name} needs a healthcheck"
        for key in ("interval", "timeout", "retries", "start_period"):
            assert key in hc, f"{name}: healthcheck lacks {key}"
        assert "start_interval" not in hc, "Docker Engine < 25 refuses to create such a container"
        assert float(hc["timeout"].rstrip("s")) > health_deadline(), \
            f"{name}: 'vdsp health' must end by itself (and say why) before docker ends it"
        env, argv = healthcheck_argv(svcs[name])
        assert argv[:2] == ["vdsp", "health"], f"{name}: the healthcheck must round-trip a buffer, not only ask"
        if name in CORES:
            assert env.get("VDSP_RPC_MODE") == "direct" and argv[2:] == ["--core", name], name
        else:
            assert "VDSP_RPC_MODE" not in env and argv[2:] == [], "the relay's: through it, to every core"
    for name in ("keys", "sample"):
        assert svcs[name]["healthcheck"] == {"disable": True}, f"{name} must not inherit the image's healthcheck"
    assert svcs["relay"]["depends_on"] == {"keys": {"condition": "service_completed_successfully"},
                                           **{c: {"condition": "service_healthy"} for c in CORES}}
    assert svcs["sample"]["depends_on"] == {"relay": {"condition": "service_healthy"}}
    for name in CORES:
        assert set(svcs[name]["depends_on"]) == {"keys"}, f"{name} needs no other container to start"


def test_endpoints_are_consistent():
    svcs = services()
    relay_argv = svcs["relay"]["command"]
    bind = option(relay_argv, "--bind")
    assert len(bind) == 1 and bind[0].startswith("tcp://0.0.0.0:")
    cores = rundir.parse_core_list(option(relay_argv, "--core"))
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
        assert rundir.connectable(fw, cores[name]) == f"tcp://{name}:{endpoint_port(fw)}"
        env, _ = healthcheck_argv(svcs[name])
        assert env == {"VDSP_RPC_MODE": "direct",
                       "VDSP_CORE_ENDPOINTS": f"{name}=tcp://127.0.0.1:{endpoint_port(ctl)}"}
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
        rundir.parse_core_list(ns.core)
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
    assert ns.command == "health"


def test_a_typo_fails(monkeypatch):
    with pytest.raises(pytest.fail.Exception):
        check_argv(["vdsp", "core", "--name", "vdsp0", "--fwbind", "tcp://0.0.0.0:6101"], monkeypatch, "typo")
    with pytest.raises(pytest.fail.Exception):
        check_argv(["dsp_relay_server", "--cores", "vdsp0=tcp://vdsp0:6100"], monkeypatch, "typo")
    with pytest.raises(pytest.fail.Exception):
        check_argv(["vdsp", "sample", "smoke", "--rouns", "20"], monkeypatch, "typo")
    with pytest.raises(pytest.fail.Exception):
        check_argv(["vdsp", "health", "--cores", "vdsp0"], monkeypatch, "typo")
    with pytest.raises(AssertionError):
        check_argv(["dsp-relay-server"], monkeypatch, "typo")


# --- (c) live, on loopback ----------------------------------------------------------------

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


def vdsp_files(directory: Path) -> set[str]:
    try:
        return {n for n in os.listdir(directory) if n.startswith("vdsp-")}
    except FileNotFoundError:
        return set()


def _lock_held(directory: Path, owner_hex: str) -> bool:
    """True if the owner's lock file exists and a live process holds it."""
    try:
        fd = os.open(os.path.join(directory, f"vdsp-{owner_hex}.lock"), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def leftovers(directory: Path) -> list[str]:
    """vdsp-* files in the DDR directory that no live owner holds (left by our dead processes)."""
    left = []
    for name in sorted(vdsp_files(directory)):
        m = re.match(r"vdsp-([0-9a-f]{6})", name)
        if not (m and _lock_held(directory, m[1])):
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


def _status(loop: Loopback, env: dict) -> tuple[int, dict | None, str]:
    env = dict(env)
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
    ddr = Path(tempfile.mkdtemp(prefix="vdddr", dir=SHM))    # the ddr volume: one tmpfs directory for all

    def service_env(name: str, rt: Path) -> dict:
        """A container's environment: the image's, then the service's (volumes mapped to directories)."""
        env = base_env(rt)
        for k, v in (svcs.get(name, {}).get("environment") or {}).items():
            if k == "VDSP_SHM_DIR":
                assert v == DDR_MOUNT
                env[k] = str(ddr)
            elif k != "VDSP_KEYS_DIR":
                env[k] = loop(str(v), name)
        return env
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
            env = service_env(name, rt)
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
            code, status, err = _status(loop, service_env("sample", base / "probe"))
            if code == 0 and status and [c.get("state") for c in status.get("cores", [])] == ["running"] * 2:
                run.status = status
                break
            run.status_error = f"last status (exit {code}): {status if status else err}"
            time.sleep(0.3)
        if run.status is not None:
            for name in ("relay", *CORES):   # the healthchecks, run "inside" each container
                hc_env, argv = healthcheck_argv(svcs[name])
                env = service_env(name, base / name)    # a healthcheck runs in its container
                env.update({k: loop(v, name) for k, v in hc_env.items()})
                proc = subprocess.run(python_argv([loop(a, name) for a in argv]), env=env, cwd=ROOT,
                                      capture_output=True, text=True, timeout=30)
                run.healthchecks[name] = (proc.returncode, proc.stdout[-2000:] + proc.stderr[-2000:])
            sample = svcs["sample"]
            env = service_env("sample", base / "sample")
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
        while leftovers(ddr) and time.monotonic() < deadline:
            time.sleep(0.1)
        run.left_files = leftovers(ddr)
        run.logs = "\n".join(f"--- {n}.log\n{p.read_text(errors='replace')[-3000:]}"
                             for n, p in logs.items() if p.exists())
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(ddr, ignore_errors=True)
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
    assert not run.left_files, f"DDR files left: {run.left_files}"


@pytest.mark.live
def test_live_sample_uses_the_remote_soc(live_run):
    assert live_run.sample is not None, live_run.status_error
    output = live_run.sample.stdout + live_run.sample.stderr
    assert "starting relay" not in output, output



# --- (d) the end-to-end script --------------------------------------------------------------

SCRIPTS = ("compose-e2e.sh", "docker-images.sh", "docker-base.sh", "docker-wheels.sh")


def script(*args: str, name: str = "compose-e2e.sh") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKER_")}
    env["PATH"] = "/usr/bin:/bin"    # --help and --dry-run must need neither docker nor root
    return subprocess.run(["bash", str(ROOT / "scripts" / name), *args], cwd="/", env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("name", SCRIPTS)
def test_scripts_parse_and_explain_themselves(name):
    assert subprocess.run(["bash", "-n", str(ROOT / "scripts" / name)]).returncode == 0
    assert os.access(ROOT / "scripts" / name, os.X_OK), f"scripts/{name} must be executable"
    run = script("--help", name=name)
    assert run.returncode == 0 and "usage" not in run.stderr.lower(), run.stderr
    assert f"scripts/{name}" in run.stdout, run.stdout
    bad = script("--no-such-option", name=name)
    assert bad.returncode == 2 and "unknown argument --no-such-option" in bad.stderr


def dry_run_commands() -> list[str]:
    run = script("--dry-run")
    assert run.returncode == 0, run.stdout + run.stderr
    return [ln[2:] for ln in run.stdout.splitlines() if ln.startswith("+ ")]


def readme_docker_commands() -> list[str]:
    readme = (ROOT / "docs" / "docker.md").read_text()
    section = re.search(r"^## Docker\n(.*?)^## ", readme, re.S | re.M)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)[1]
    return [re.sub(r"\s+#.*$", "", ln).strip() for ln in block.splitlines()
            if ln.strip() and not ln.strip().startswith("#")]


def test_dry_run_shows_every_step():
    run = script("--dry-run")
    steps = re.findall(r"^==> \[(\d+)/(\d+)\] (.*?)  \(t=", run.stdout, re.M)
    assert [int(i) for i, _, _ in steps] == list(range(1, int(steps[0][1]) + 1))
    titles = " | ".join(t for _, _, t in steps)
    for what in ("base", "up --build", "restart vdsp0", "kill the relay", "two boards", "podman kube play", "down",
                 "cleanup"):
        assert what in titles, titles
    assert "check:" in run.stdout


def test_the_readme_docker_section_is_what_the_script_runs():
    commands = dry_run_commands()
    assert commands == readme_docker_commands()
    # and it is what the task asks for
    assert commands[0] == "docker compose up --build --exit-code-from sample --attach sample"
    smoke, cv = "docker compose run --rm sample vdsp sample smoke", "docker compose run --rm sample vdsp sample cv"
    restart = commands.index("docker compose restart vdsp0")
    assert smoke in commands[:restart] and cv in commands[:restart]
    assert smoke in commands[restart:] and cv in commands[restart:]
    kill = next(i for i, c in enumerate(commands) if c.startswith("kill -KILL") and "relay" in c)
    assert smoke in commands[kill:]
    assert any(c.startswith("docker compose -p board2 up") for c in commands)
    assert commands[-1] == "docker compose down -v"


def test_what_the_script_must_leave_alone():
    text = E2E.read_text()
    # nothing that could take down processes or files it did not make
    for forbidden in ("pkill", "killall", "docker system prune", "docker volume prune", "iptables -F",
                      "git "):
        assert forbidden not in text, forbidden
    # its private daemon makes no iptables rules and no default bridge; the cleanup compares
    assert "--iptables=false" in text and "--bridge=none" in text
    assert "iptables-save" in text and "ip6tables-save" in text
    # what it builds lies where git ignores it
    for path in ("build/compose-e2e/docker/data", "build/docker/wheels/numpy.whl", "build/docker/rootfs"):
        assert subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT).returncode == 0, path


@pytest.mark.parametrize("name", ["docker-base.sh", "docker-images.sh"])
def test_scripts_ask_for_the_daemon_before_any_long_step(name, tmp_path):
    """With no docker daemon answering, the image scripts stop at once and say so, before
    debootstrap (minutes) or the wheel downloads."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKER_")}
    env["DOCKER_HOST"] = f"unix://{tmp_path}/no-daemon.sock"
    before = set((ROOT / "build" / "docker").glob("*")) if (ROOT / "build" / "docker").exists() else set()
    t0 = time.monotonic()
    run = subprocess.run(["bash", str(ROOT / "scripts" / name)], cwd="/", env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "no docker daemon answers" in run.stderr and "debootstrap" not in run.stdout, run.stdout + run.stderr
    assert time.monotonic() - t0 < 60
    after = set((ROOT / "build" / "docker").glob("*")) if (ROOT / "build" / "docker").exists() else set()
    assert after <= before, f"{name} made {after - before} without a daemon"
