"""The runtime directory is private: a squatted, shared or symlinked one is refused (issue: security).

A pre-created ``/tmp/vdsp-<uid>`` owned by another user with mode 0777 was once accepted, and a
firmware image planted in it ran as that SoC's user.
"""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from protocol import errors
from tests import privilege
from vdsp_board.processes import rundir
from vdsp_sim import otheruser

VDSP = str(Path(sys.executable).parent / "vdsp")


@pytest.fixture
def rt_var(tmp_path, monkeypatch):
    path = tmp_path / "rt"
    monkeypatch.setenv("VDSP_RUNTIME_DIR", str(path))
    return path


def test_a_new_runtime_dir_is_created_private(rt_var):
    assert rundir.runtime_dir() == rt_var
    assert rt_var.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("mode", [0o777, 0o755, 0o750, 0o701])
def test_group_or_world_access_is_refused(rt_var, mode):
    rt_var.mkdir()
    os.chmod(rt_var, mode)
    with pytest.raises(errors.InvalidArgument) as exc:
        rundir.runtime_dir()
    assert f"{mode:04o}" in exc.value.message and f"chmod 700 {rt_var}" in exc.value.message


def test_a_directory_of_another_user_is_refused_even_with_mode_0700(monkeypatch):
    with privilege.other_users_dir() as theirs:
        monkeypatch.setenv("VDSP_RUNTIME_DIR", str(theirs))
        with pytest.raises(errors.InvalidArgument) as exc:
            rundir.runtime_dir()
    assert f"owned by uid {otheruser.other_ids()[0]}" in exc.value.message


def test_a_symlink_is_refused(rt_var, tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    rt_var.symlink_to(target)
    with pytest.raises(errors.InvalidArgument) as exc:
        rundir.runtime_dir()
    assert "symlink" in exc.value.message


def test_the_sdk_refuses_a_squatted_dir_before_connecting(rt_var):
    rt_var.mkdir()
    os.chmod(rt_var, 0o777)
    from arm_side import Soc
    with pytest.raises(errors.InvalidArgument):
        Soc(autostart_relay=False, connect_timeout_s=1)


def test_cli_says_what_is_wrong(rt_var):
    rt_var.mkdir()
    os.chmod(rt_var, 0o777)
    env = dict(os.environ, VDSP_RUNTIME_DIR=str(rt_var))
    res = subprocess.run([VDSP, "up", "-d"], capture_output=True, text=True, timeout=90, env=env)
    try:
        assert res.returncode != 0
        assert "bad permissions 0777" in res.stderr and "Traceback" not in res.stderr
        assert not list(rt_var.iterdir())      # nothing was started or written there
    finally:
        if res.returncode == 0:                # a SoC came up in the squatted dir: stop it
            os.chmod(rt_var, 0o700)
            subprocess.run([VDSP, "down"], env=env, timeout=60)


@pytest.mark.live
def test_everything_the_soc_creates_is_private_whatever_the_umask(tmp_path):
    rt = Path(tempfile.mkdtemp(prefix="vq", dir="/tmp"))
    env = dict(os.environ, VDSP_RUNTIME_DIR=str(rt))
    env.pop("VDSP_FIRMWARE_DIR", None)
    try:
        res = subprocess.run([VDSP, "up", "-d"], capture_output=True, text=True, timeout=90, env=env,
                             preexec_fn=lambda: os.umask(0))
        assert res.returncode == 0, res.stderr
        loose = []
        for path in [rt, *rt.rglob("*")]:
            mode = path.lstat().st_mode
            if mode & 0o077 and not stat.S_ISLNK(mode):
                loose.append(f"{stat.S_IMODE(mode):04o} {path}")
        assert not loose, loose
    finally:
        subprocess.run([VDSP, "down"], env=env, timeout=60, capture_output=True)
        shutil.rmtree(rt, ignore_errors=True)
