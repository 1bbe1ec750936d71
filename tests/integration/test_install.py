"""``pip install .`` into a new virtual environment outside the checkout, then the first steps
of a user, from another directory with a private runtime directory: ``vdsp --version``,
``vdsp up -d``, ``vdsp sample smoke``, a C program built with ``vdsp capi --cflags/--libs``
(where a C compiler is found), ``vdsp bench rpc --quick``, ``vdsp down``.

The dependencies are not installed again (``--no-deps``; a .pth file lends the new venv the
test interpreter's site-packages, where they already are), so the test runs offline in about
a minute; what is installed from this checkout is the distribution itself: its packages,
package data (stock firmware sources, py.typed markers), console scripts and the benchmarks.
The build backend comes from the test interpreter when it can build a wheel (setuptools >= 70.1,
which the set-up installs, or >= 68 with wheel: ``--no-build-isolation``, offline), else from
pip's configured index (build isolation).

Also here: the set-up's choice of a venv per Python version (``scripts/venv.sh --dir``), the
Pythons ``.ci/run`` runs the suite on (``scripts/pythons.sh``), and mypy from an app directory
outside the checkout, through the venv the set-up made.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import site
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import wait_until

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("protocol", "vdsp_board", "arm_side", "dsp_side", "relay_server", "vdsp_sim")


def _backend_here() -> bool:
    """Can the test interpreter build the wheel itself (no download)? setuptools >= 70.1 builds
    wheels on its own (the set-up installs it: the test extra), an older one >= 68 with ``wheel``."""
    try:
        import setuptools
    except ImportError:
        return False
    version = tuple(int(p) for p in setuptools.__version__.split(".")[:2] if p.isdigit())
    return version >= (70, 1) or (version >= (68,) and importlib.util.find_spec("wheel") is not None)


def _copy_source(dest: Path) -> None:
    """The checkout's distribution sources, without build outputs or local caches (pip builds
    in the source tree, and the checkout's build/ is not ours to write to)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.onnx", "*.vdnn", "*.egg-info")
    for name in PACKAGES:
        shutil.copytree(ROOT / name, dest / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)


@pytest.fixture
def installed(tmp_path_factory):
    base = Path(tempfile.mkdtemp(prefix="vinst", dir="/tmp"))
    try:
        venv, src = base / "venv", base / "src"
        _copy_source(src)
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        purelib = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; "
                                       "print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True,
                                      check=True, timeout=60).stdout.strip())
        # the test interpreter's site-packages, and those it reaches through .pth files of its own
        # (a worktree's venv that lends itself the main checkout's packages): a .pth file's
        # directories are not searched for further .pth files
        lent = list(dict.fromkeys(site.getsitepackages() + [p for p in sys.path if p.endswith("site-packages")]))
        (purelib / "_test_deps.pth").write_text("\n".join(lent) + "\n")
        pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet",
               "--no-deps", "--disable-pip-version-check"] + (["--no-build-isolation"] if _backend_here() else [])
        res = subprocess.run(pip + [str(src)], capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stdout + res.stderr
        shutil.rmtree(src)      # the installed copy must not lean on the sources it was built from
        yield venv, purelib
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_pip_install_then_a_users_first_steps_from_another_directory(installed):
    venv, purelib = installed
    bindir = venv / "bin"
    rt = Path(tempfile.mkdtemp(prefix="vr", dir="/tmp"))      # private (0700), as the SoC wants
    elsewhere = Path(tempfile.mkdtemp(prefix="vw", dir="/tmp"))
    shm = Path(tempfile.mkdtemp(prefix="vb-shm-", dir="/dev/shm"))     # this SoC's DDR, nobody else's
    env = {k: v for k, v in os.environ.items() if not k.startswith("VDSP_") and k != "PYTHONPATH"}
    env.update(VDSP_RUNTIME_DIR=str(rt), VDSP_SHM_DIR=str(shm), PATH=f"{bindir}:{env.get('PATH', '')}")

    def vdsp(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([str(bindir / "vdsp"), *argv], cwd=elsewhere, env=env, capture_output=True, text=True,
                              timeout=timeout)

    try:
        where = subprocess.run([str(bindir / "python"), "-c", "import arm_side, dsp_side, vdsp_sim, vdsp_sim.benchmarks; "
                                "print(vdsp_sim.__file__, dsp_side.__file__, vdsp_sim.__version__)"],
                               cwd=elsewhere, env=env, capture_output=True, text=True, timeout=60)
        assert where.returncode == 0, where.stderr
        vdsp_file, dsp_file, version = where.stdout.split()
        assert vdsp_file.startswith(str(purelib)) and dsp_file.startswith(str(purelib)), where.stdout
        for name in PACKAGES:
            assert (purelib / name / "py.typed").exists(), name
        assert (purelib / "dsp_side" / "firmware_src" / "stock" / "firmware.py").exists()
        assert (purelib / "arm_side" / "capi" / "native" / "vdsp_wire.c").exists()      # the C library's wire layer
        assert (purelib / "arm_side" / "capi" / "native" / "vdsp_wire.h").exists()
        for shipped in ("firmware_src/stock/pointcloud_encode.cc", "firmware_src/stock/pointcloud_transpose.c",
                        "ckernel/include/vdsp_kernel.h", "ckernel/include/xtensa/tie/xt_ivpn.h",
                        "ckernel/include/xtensa/tie/xt_ivpn_missing.h", "ckernel/src/vdsp_rt.c"):
            assert (purelib / "dsp_side" / shipped).exists(), shipped     # `vdsp up` compiles the stock C kernels

        res = vdsp("--version")
        assert res.returncode == 0 and res.stdout.strip() == f"vdsp (vdsp-sim) {version}" and version != "0+unknown"
        res = vdsp("up", "-d")
        assert res.returncode == 0 and "SoC up in" in res.stdout, res.stdout + res.stderr
        relay_log = (rt / "log" / "relay.log").read_text()
        # start-up is quiet: the supervisor's readiness probes are not logged as departing clients
        assert "disconnected" not in relay_log and "firmware , " not in relay_log, relay_log
        res = vdsp("sample", "smoke")
        assert res.returncode == 0 and "smoke finish" in res.stderr, res.stdout + res.stderr
        # the C API there too: the library is built into the new venv, a C program runs against the SoC
        if shutil.which("cc"):
            res = vdsp("capi", "--libs", timeout=300)
            assert res.returncode == 0 and f"-L{venv / 'lib'}" in res.stdout, res.stdout + res.stderr
            cflags = vdsp("capi", "--cflags").stdout.split()
            assert cflags == [f"-I{purelib / 'arm_side' / 'capi' / 'include'}"], cflags
            subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-D_DEFAULT_SOURCE", *cflags,
                            str(ROOT / "examples" / "capi" / "threads.c"), *res.stdout.split(), "-pthread", "-o",
                            str(elsewhere / "threads")], check=True, timeout=120)
            ran = subprocess.run([str(elsewhere / "threads"), "2", "2"], cwd=elsewhere, env=env, capture_output=True,
                                 text=True, timeout=120)
            assert ran.returncode == 0 and ran.stdout.count("2 tasks ok") == 2, ran.stdout + ran.stderr
            (elsewhere / "threads").unlink()
        res = vdsp("bench", "rpc", "--quick", "--json", str(elsewhere / "rpc.json"), timeout=240)
        assert res.returncode == 0, res.stdout + res.stderr[-3000:]
        assert "latency and throughput:" in res.stdout and "targets met" in res.stdout
        doc = json.loads((elsewhere / "rpc.json").read_text())
        assert doc["schema"] == "vdsp-bench/1" and doc["benchmark"] == "rpc" and doc["version"] == version
        assert len(doc["verdicts"]) == 3 and doc["passed"] in (True, False)
        res = vdsp("down")
        assert res.returncode == 0 and "stopped soc" in res.stdout, res.stdout + res.stderr
        assert not (rt / "soc.pid").exists() and not (rt / "relay.pid").exists()
        assert not list(elsewhere.glob("*.log")) and sorted(p.name for p in elsewhere.iterdir()) == ["rpc.json"]
    finally:
        subprocess.run([str(bindir / "vdsp"), "down"], cwd=elsewhere, env=env, capture_output=True, timeout=60)
        left = wait_until(lambda: not list(shm.iterdir()), 10) or sorted(p.name for p in shm.iterdir())
        for path in (rt, elsewhere, shm):
            shutil.rmtree(path, ignore_errors=True)
    assert left is True, f"DDR files left behind: {left}"


APP = """
from arm_side import Soc, Task
from custom_op_stubs import saturate_add

with Soc() as soc:
    a, b = soc.mem.alloc(8), soc.mem.alloc(8)
    task: Task = saturate_add(soc, a, b, delta=10, core=2)
    saturate_add(soc, a, b, delta="ten")
    saturate_add(soc, a, b, delta=1, gian=2)
"""


def test_mypy_sees_the_sdk_from_an_app_directory_outside_the_checkout(tmp_path):
    """The tutorial's promise, kept where an app lives: in a directory of its own, with this
    checkout's venv (the one ``scripts/venv.sh`` made) and no MYPYPATH, mypy checks a call through
    the stub ``vdsp firmware stubs`` wrote: a wrong type and a misspelled keyword are reported,
    and mypy finds the SDK (setuptools' default editable install is an import hook mypy cannot
    follow: it found no ``arm_side``, and the stub's keywords went unchecked)."""
    bindir = Path(sys.executable).parent
    app, rt = tmp_path / "app", tmp_path / "rt"
    app.mkdir()
    rt.mkdir(mode=0o700)
    assert ROOT not in app.parents
    env = {k: v for k, v in os.environ.items() if not k.startswith("VDSP_") and k not in ("PYTHONPATH", "MYPYPATH")}
    env.update(VDSP_RUNTIME_DIR=str(rt), HOME=str(tmp_path))     # nor a user's mypy configuration

    def run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(argv, cwd=app, env=env, capture_output=True, text=True, timeout=300)

    res = run(str(bindir / "vdsp"), "firmware", "build", "--unsigned", str(ROOT / "examples" / "custom_op"),
              "-o", "image/vdsp1")
    assert res.returncode == 0, res.stdout + res.stderr
    res = run(str(bindir / "vdsp"), "firmware", "stubs", "image/vdsp1", "-o", "custom_op_stubs.py")
    assert res.returncode == 0, res.stdout + res.stderr
    (app / "app.py").write_text(APP)
    res = run(str(bindir / "python"), "-m", "mypy", "app.py")
    assert [line for line in res.stdout.splitlines() if ": note: " not in line] == [
        'app.py:8: error: Argument "delta" to "saturate_add" has incompatible type "str"; expected "int"  [arg-type]',
        'app.py:9: error: Unexpected keyword argument "gian" for "saturate_add"  [call-arg]',
        "Found 2 errors in 1 file (checked 1 source file)"], res.stdout + res.stderr


def _fake_python(path: Path, version: str) -> Path:
    """An executable that answers the set-up's version question as a Python ``version`` would."""
    major, minor = map(int, version.split("."))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'import sys; sys.version_info = ({major}, {minor}, 0)\n"
                    f"exec(sys.argv[1])' \"$2\"\n")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("venv, python, expected", [
    (None, "3.11", ".venv"),          # a fresh checkout: .venv, whatever the version
    ("3.11", "3.11", ".venv"),
    ("3.11", "3.13", ".venv-3.13"),   # another version: a venv of its own
    ("3.13", "3.11", ".venv-3.11"),
])
def test_each_python_version_gets_a_venv_of_its_own(tmp_path, venv, python, expected):
    (tmp_path / "scripts").mkdir()
    shutil.copy2(ROOT / "scripts" / "venv.sh", tmp_path / "scripts" / "venv.sh")
    if venv:
        _fake_python(tmp_path / ".venv" / "bin" / "python", venv)
    res = subprocess.run(["bash", str(tmp_path / "scripts" / "venv.sh"), "--dir"], capture_output=True, text=True,
                         timeout=60, env=dict(os.environ, PYTHON=str(_fake_python(tmp_path / "py" / "python", python))))
    assert res.returncode == 0 and res.stdout.strip() == expected, res.stdout + res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["scripts", "py"] + [".venv"] * bool(venv))


def test_a_python_older_than_3_11_is_refused_with_the_way_out(tmp_path):
    res = subprocess.run(["bash", str(ROOT / "scripts" / "venv.sh"), "--dir"], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHON=str(_fake_python(tmp_path / "python", "3.10"))))
    assert res.returncode == 1 and "needs Python 3.11 or newer" in res.stderr and "PYTHON=python3.11" in res.stderr


def test_ci_finds_the_oldest_and_newest_python_also_where_only_one_is_installed(tmp_path):
    """``.ci/run`` runs the suite on the first and the last line: versions ascending, one per
    version, each >= 3.11, this interpreter's among them; on a machine with nothing but one
    python3 (no pyenv), that one alone."""
    def pythons(**env: str) -> list[list[str]]:
        res = subprocess.run([shutil.which("bash") or "bash", str(ROOT / "scripts" / "pythons.sh")],
                             capture_output=True, text=True, timeout=120, env=dict(os.environ, **env))
        assert res.returncode == 0, res.stderr
        return [line.split(" ", 1) for line in res.stdout.splitlines()]

    here = "%d.%d" % sys.version_info[:2]
    found = pythons()
    versions = [tuple(map(int, v.split("."))) for v, _ in found]
    assert versions == sorted(set(versions)) and versions[0] >= (3, 11) and here in [v for v, _ in found], found
    alone = tmp_path / "bin"        # one python3 and the tools the script uses
    alone.mkdir()
    (alone / "python3").symlink_to(sys.executable)
    for tool in ("grep", "sort", "awk"):
        (alone / tool).symlink_to(shutil.which(tool) or tool)
    only = pythons(PATH=str(alone), PYENV_ROOT=str(tmp_path / "no-pyenv"))
    assert only == [[here, str(alone / "python3")]], only
