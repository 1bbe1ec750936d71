"""tests/capi_library.py: the tests' one build of libvdsp_client.so per run (the build itself is
capi_native.build's, replaced here by a stand-in that counts its calls)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import capi_library
from vdsp_sim import capi_native


def test_one_build_per_run_and_key_each_asker_gets_its_files(tmp_path, monkeypatch):
    built: list[Path] = []

    def fake_build(out: Path) -> Path:
        built.append(out)
        (out / "include").mkdir(parents=True)
        (out / "include" / "vdsp_zmq_constants.h").write_text("h")
        (out / capi_native.LIBRARY).write_bytes(b"lib")
        return out / capi_native.LIBRARY
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    monkeypatch.setenv("VDSP_TEST_LOCK_DIR", str(run_dir))
    monkeypatch.setattr(capi_native, "build", fake_build)
    monkeypatch.setattr(capi_library, "key", lambda: "a" * 64)
    for name in ("one", "two"):
        lib = capi_library.build(tmp_path / name)
        assert lib.read_bytes() == b"lib" and (tmp_path / name / "include" / "vdsp_zmq_constants.h").is_file()
        assert not (tmp_path / name / ".done").exists()
    assert len(built) == 1 and built[0].parent == run_dir
    monkeypatch.setattr(capi_library, "key", lambda: "b" * 64)     # an input changed: built again
    capi_library.build(tmp_path / "three")
    assert len(built) == 2


def test_the_key_changes_with_a_source(tmp_path, monkeypatch):
    native = tmp_path / "native"
    native.mkdir()
    (native / "x.c").write_text("int x;")
    monkeypatch.setattr(capi_native, "NATIVE", native)
    monkeypatch.setattr(capi_native, "HB_INCLUDE", tmp_path / "none")
    first = capi_library.key()
    (native / "x.c").write_text("int y;")
    assert capi_library.key() != first


def test_a_build_locked_by_another_process_is_waited_for_within_a_deadline(tmp_path, monkeypatch):
    """Another test process holding the build's lock for ever (stopped, say) does not hang this one."""
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    monkeypatch.setenv("VDSP_TEST_LOCK_DIR", str(run_dir))
    monkeypatch.setattr(capi_library, "key", lambda: "c" * 64)
    monkeypatch.setattr(capi_library, "LOCK_WAIT_S", 0.5)
    lock = run_dir / f"capi-{'c' * 32}.lock"
    holder = subprocess.Popen([sys.executable, "-c", f"""if True:
        import fcntl, os, sys, time
        fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.lockf(fd, fcntl.LOCK_EX)
        print("held", flush=True)
        time.sleep(60)"""], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(TimeoutError, match="stayed locked by another test process"):
            capi_library.build(tmp_path / "one")
    finally:
        holder.kill()
        holder.wait()
