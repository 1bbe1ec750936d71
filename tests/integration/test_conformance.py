"""One conformance suite of protocol checks for both clients (issue 42): the cases of
tests/conformance.py (each a request and its outcome from the spec; its docstring lists what is
not covered and why) run through the Python SDK (``arm_side.hb``: tests/conformance_py.py) and
through the C library (tests/conformance_check.c, linked with libvdsp_hb as ``vdsp capi --build``
builds it, and with the native core's own libvdsp_client.so; and libvdsp_hb inside a Python
program, where its embedded SDK serves it), each a program of its own: on one
live SoC over ipc in relay mode and in direct mode (VDSP_RPC_MODE=direct), and on a SoC on
loopback tcp with CURVE keys in both modes (the Python SDK there too), with another process (this
test's) holding memory it did not grant and memory it granted in part on each SoC. Every client
gives every case its outcome, the clients agree with each other, the C library's own refusals
are described with C names, and no client leaves DDR behind.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from protocol import errors
from tests import privilege
from tests.conformance import CASES, Case, case_lines, parse_outcomes, pattern
from tests.conftest import wait_until
from tests.integration.test_capi_hb_native import link_flags
from tests.integration.test_capi_native import clean_env
from tests.live import shm_entries
from vdsp_sim import capi_native

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / "tests" / "conformance_check.c"
# a client: its library ("python" or a C library) and how it reaches the SoC: "_direct"
# (VDSP_RPC_MODE=direct), "_tcp" (the tcp SoC with CURVE keys)
NATIVE = ("libvdsp_hb", "libvdsp_client", "libvdsp_hb_direct", "libvdsp_client_direct", "libvdsp_hb_tcp",
          "libvdsp_hb_tcp_direct", "libvdsp_client_tcp_direct")
# the C library inside a Python program (the driver built as a shared object a Python process
# loads and calls): libvdsp_hb's embedded SDK serves it (arm_side/capi/front.c)
EMBEDDED = ("libvdsp_hb_in_python",)
CLIENTS = ("python", "python_tcp", *NATIVE, *EMBEDDED)
# a Python process that loads the driver ``argv[1]`` and runs its cases ``argv[2]``
IN_PYTHON = """
import ctypes, sys
driver = ctypes.CDLL(sys.argv[1])
argv = (ctypes.c_char_p * 3)(b"conformance_check", sys.argv[2].encode(), None)
rc = driver.conformance_main(2, argv)
ctypes.CDLL(None).fflush(None)
if "arm_side.capi.bridge" not in sys.modules:
    sys.exit("the library did not serve this Python program from its embedded SDK")
sys.exit(rc)
"""
# a Python spelling in a text: a method call (mem.share(), soc.rpc(...)), flush(CLEAN), an hb. name
PYTHON_NAMES = re.compile(r"\b[a-z_]+\.[a-z_]+\(|\((?:CLEAN|INVALIDATE)\)|\bhb\.\w|\bPython\b")


def write_cases(directory: Path) -> tuple[Path, list]:
    """The cases' lines, with the addresses of memory this process (another owner than any
    driver) holds on the SoC its environment names: 4096 bytes it grants to no one, 8192 of which
    it grants its first 4096 to any owner. Returns the file and the Soc holding them (close it)."""
    from arm_side import Soc
    soc = Soc(autostart_relay=False)
    theirs, granted = soc.mem.alloc(4096), soc.mem.alloc(8192)
    theirs.write(pattern(4096))
    granted.write(pattern(8192))
    granted.share(offset=0, size=4096)
    path = directory / "cases.tsv"
    path.write_text(case_lines(CASES, theirs.phys_addr, granted.phys_addr))
    # the Python drivers': without the cases they have no spelling of (c_only)
    (directory / "cases_py.tsv").write_text(case_lines(tuple(c for c in CASES if not c.c_only), theirs.phys_addr,
                                                       granted.phys_addr))
    return path, soc


@pytest.fixture(scope="module")
def cases_file(shared_soc):
    with tempfile.TemporaryDirectory(prefix="vconf-") as tmp:
        path, soc = write_cases(Path(tmp))
        with soc:
            yield path


def c_driver(client: str, out: Path, shared: bool = False) -> Path:
    """tests/conformance_check.c linked with ``client``'s library, built into ``out``; ``shared``:
    as a shared object whose entry is ``conformance_main``."""
    if shutil.which(capi_native.cc()[0]) is None:
        privilege.require(f"no C compiler ({' '.join(capi_native.cc())})")
    link = link_flags(client, out)
    program = out / ("conformance_check.so" if shared else "conformance_check")
    kind = ["-shared", "-fPIC", "-Dmain=conformance_main"] if shared else []
    cmd = [*capi_native.cc(), "-std=c99", "-Wall", "-Wextra", "-Werror", *kind, f"-I{capi_native.HB_INCLUDE}",
           str(DRIVER), *link, "-o", str(program)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return program


def run_client(client: str, cases: Path, direct_env: dict) -> dict:
    """``client``'s outcomes of ``cases`` on the SoC of this process's environment (``direct_env``:
    what direct mode adds to it)."""
    with tempfile.TemporaryDirectory(prefix="vconfc-") as tmp:
        library = client.split("_")[0] if client.startswith("python") else "_".join(client.split("_")[:2])
        if library == "python":
            cmd, env = [sys.executable, "-m", "tests.conformance_py", str(cases.with_name("cases_py.tsv"))], \
                dict(os.environ)
        elif client in EMBEDDED:
            driver = c_driver("libvdsp_hb", Path(tmp), shared=True)
            cmd, env = [sys.executable, "-c", IN_PYTHON, str(driver), str(cases)], clean_env()
        else:
            env = clean_env(**(direct_env if client.endswith("_direct") else {}))
            cmd = [str(c_driver(library, Path(tmp))), str(cases)]
        before = shm_entries()
        done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (client, done.stdout, done.stderr[-4000:])
        assert wait_until(lambda: shm_entries() == before, timeout_s=60), (client, shm_entries() - before)
    return parse_outcomes(done.stdout)


@pytest.fixture(scope="module")
def tcp_outcomes():
    """The outcomes of the tcp clients, on a SoC on loopback tcp with CURVE keys started for them
    (and stopped, this process's environment restored, before the other clients run)."""
    from tests.integration.test_live_curve import running_tcp_soc
    got: dict[str, dict] = {}
    with running_tcp_soc() as tcp, tempfile.TemporaryDirectory(prefix="vconft-") as tmp:
        direct = {"VDSP_RPC_MODE": "direct",
                  "VDSP_CORE_ENDPOINTS": ",".join(f"{name}={url}" for name, url in tcp.ctl.items())}
        path, soc = write_cases(Path(tmp))
        with soc:
            for client in CLIENTS:
                if "_tcp" in client:
                    got[client] = run_client(client, path, direct)
    return got


@pytest.fixture(scope="module")
def outcomes(cases_file, request):
    """Each client's outcomes (case name -> Outcome), its driver run once, on first use."""
    got: dict[str, dict] = {}

    def of(client: str) -> dict:
        if "_tcp" in client:
            return request.getfixturevalue("tcp_outcomes")[client]
        if client not in got:
            got[client] = run_client(client, cases_file, {"VDSP_RPC_MODE": "direct"})
        return got[client]
    return of


def expected(case: Case) -> str:
    return "success" if case.code == 0 else errors.describe(case.code)


def clients_of(case: Case) -> tuple[str, ...]:
    return tuple(c for c in CLIENTS if not c.startswith("python")) if case.c_only else CLIENTS


@pytest.mark.parametrize(("case", "client"), [(case, client) for case in CASES for client in clients_of(case)],
                         ids=lambda v: v.name if isinstance(v, Case) else v)
def test_each_client_gives_each_case_the_outcome_of_the_spec(case, client, outcomes):
    got = outcomes(client)[case.name]
    assert got.code == case.code, f"{client}: {case.name} wants {expected(case)}, got {got.code}: {got.text}"
    if isinstance(case.expect, dict):
        values = got.values or {}
        assert {k: values.get(k) for k in case.expect} == case.expect, (client, values)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_clients_agree(case, outcomes):
    seen = {client: outcomes(client)[case.name] for client in clients_of(case)}
    assert len({o.code for o in seen.values()}) == 1, {c: (o.code, o.text) for c, o in seen.items()}
    assert len({json.dumps(o.values, sort_keys=True) for o in seen.values()}) == 1, seen


@pytest.mark.parametrize("client", NATIVE)
def test_the_c_librarys_own_refusals_name_c_functions(client, outcomes):
    """Where the library itself refuses (the spec's source ``client``), its text is the code's
    name and meaning with a message in C's terms, not the Python SDK's."""
    got = outcomes(client)
    for case in CASES:
        if case.source != "client" or case.code == 0:
            continue
        text = got[case.name].text
        assert text.startswith(errors.describe(case.code) + " ("), (case.name, text)
        assert not PYTHON_NAMES.search(text), (case.name, text)


@pytest.mark.parametrize("client", (*NATIVE, *EMBEDDED))
def test_no_text_a_c_program_gets_names_a_python_call(client, outcomes):
    """Whoever refuses (the library, the relay, the firmware), the text a C program gets from
    hbDNNGetErrorDesc names no Python call: the relay's refusal of another owner's memory names
    neither language's grant (it reaches both clients)."""
    got = outcomes(client)
    for case in CASES:
        if case.code != 0:
            assert not PYTHON_NAMES.search(got[case.name].text), (case.name, got[case.name].text)


@pytest.mark.parametrize("client", CLIENTS)
def test_a_memsize_past_its_buffer_is_told_so_not_that_the_memory_is_not_allocated(client, outcomes):
    text = outcomes(client)["memsize_past_its_buffer"].text
    assert "runs past the end of its buffer" in text and "its memSize is too large" in text, text
    assert "not allocated" not in text, text
