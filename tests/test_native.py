"""The optional compiled build (protocol/native.py, vdsp_sim/native_build.py): used only when it
is current and safe, and the pure Python modules behind it always work."""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from protocol import native
from vdsp_board import settings
from vdsp_sim import native_build

ROOT = Path(__file__).resolve().parent.parent


def _module_name(rel: str) -> str:
    return rel.removesuffix(".py").replace("/", ".")


@pytest.fixture
def fake_root(tmp_path):
    """A tree with the compiled modules' sources and a manifest that matches them."""
    for rel in native.MODULES:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {rel}\n")
    build = tmp_path / ".native"
    build.mkdir(mode=0o755)
    os.chmod(build, 0o755)
    (build / native.MANIFEST).write_text(json.dumps({"python": sys.implementation.cache_tag,
                                                     "sources": native.digests(tmp_path)}))
    return tmp_path


def test_a_current_build_is_used(fake_root):
    assert native.verdict(fake_root, env="") == ""


def test_an_edited_source_makes_the_whole_build_stale(fake_root):
    (fake_root / native.MODULES[-1]).write_text("# edited\n")
    assert "stale" in native.verdict(fake_root, env="")


def test_a_build_for_another_interpreter_is_not_used(fake_root):
    manifest = fake_root / ".native" / native.MANIFEST
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps(dict(data, python="cpython-39")))
    assert "another interpreter" in native.verdict(fake_root, env="")


@pytest.mark.parametrize("text", ["0", "off", "false", "NO"])
def test_vdsp_native_off_runs_the_pure_modules(fake_root, text):
    assert native.verdict(fake_root, env=text) == f"VDSP_NATIVE={text}"
    assert settings.Settings({"VDSP_NATIVE": text}).native is False


def test_a_build_others_may_write_is_not_used(fake_root):
    os.chmod(fake_root / ".native", 0o777)
    assert "writable only by it" in native.verdict(fake_root, env="")


def test_a_symlinked_build_is_not_used(fake_root, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    os.rename(fake_root / ".native", elsewhere / "build")
    os.symlink(elsewhere / "build", fake_root / ".native")
    assert "not a directory" in native.verdict(fake_root, env="")


def test_no_build_or_no_manifest_is_not_used(fake_root):
    (fake_root / ".native" / native.MANIFEST).unlink()
    assert "no readable manifest" in native.verdict(fake_root, env="")
    os.rmdir(fake_root / ".native")
    assert "no build" in native.verdict(fake_root, env="")


def test_this_checkout_runs_what_its_setup_built():
    """``scripts/venv.sh`` builds the compiled modules wherever this machine can: then every one
    of them is loaded from the build (a stale build here means the set-up was not run since an
    edit), and with ``VDSP_NATIVE=0`` none is."""
    modules = [importlib.import_module(_module_name(rel)) for rel in native.MODULES]
    if not settings.current().native:
        assert not any(native.active(m) for m in modules)
        return
    lacking = native_build.missing()
    if lacking:
        assert not any(native.active(m) for m in modules), lacking
        return
    assert native.why_not() == "", f"{native.why_not()}: run bash scripts/venv.sh"
    assert all(native.active(m) for m in modules), [m.__file__ for m in modules]


def test_the_status_command_says_what_runs():
    def status(**env: str | None) -> str:
        return subprocess.run([sys.executable, "-m", "vdsp_sim.native_build", "--status"], capture_output=True,
                              text=True, check=True, env=settings.child_env(**env)).stdout.strip()
    assert status(VDSP_NATIVE="0") == "compiled build: not used: VDSP_NATIVE=0"
    here = status(VDSP_NATIVE=None)
    assert here.startswith("compiled build: used (") if native.verdict(env="") == "" else "not used" in here


def test_the_pure_python_modules_pass_their_tests_and_serve_a_soc():
    """The fallback: with ``VDSP_NATIVE=0`` the unit tests of every compiled module pass on the
    pure modules, and a SoC whose every process runs them answers tasks (the live SDK tests)."""
    files = ["tests/test_native.py::test_this_checkout_runs_what_its_setup_built", "tests/test_protocol_wire.py",
             "tests/test_relay_engine.py", "tests/test_scheduler.py", "tests/test_inbox.py",
             "tests/test_sdk_fast_path.py", "tests/test_live_rpc.py"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", *files],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          # a run inside this test, under the lock this test holds (tests/conftest.py)
                          env=settings.child_env(VDSP_NATIVE="0", VDSP_TEST_LOCK_DIR=None, PYTEST_XDIST_WORKER=None))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout.strip().splitlines()[-1]
