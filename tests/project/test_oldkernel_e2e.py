"""scripts/oldkernel-e2e.sh, checked without running it (it boots Debian 12's Linux 6.1 under
QEMU/KVM and takes many minutes: not part of the suite): it explains itself, its --dry-run needs
neither root nor QEMU and makes nothing, names every step the README's set-up and the old-kernel
proof need, in order, runs the README's example commands as printed, and what it builds lies
where git ignores it."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests.integration.test_readme import shell_steps

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "oldkernel-e2e.sh"
STATE = ROOT / "build" / "oldkernel-e2e"
LIVE_TESTS = ("integration/test_live_identity", "integration/test_live_ownership", "integration/test_live_liveness",
              "integration/test_busy_host", "board/test_ownership")


def script(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VDSP_")}
    env["PATH"] = "/usr/bin:/bin"          # --help and --dry-run need neither QEMU nor root
    return subprocess.run(["bash", str(SCRIPT), *args], cwd="/", env=env, capture_output=True, text=True, timeout=60)


def dry_run() -> tuple[list[str], dict[str, list[str]]]:
    """The step titles, and each title's commands (the "+ " lines under it)."""
    run = script("--dry-run")
    assert run.returncode == 0, run.stdout + run.stderr
    steps = re.findall(r"^==> \[(\d+)/(\d+)\] (.*?)  \(t=", run.stdout, re.M)
    assert [int(i) for i, _, _ in steps] == list(range(1, int(steps[0][1]) + 1)), steps
    titles, commands, current = [], {}, None
    for line in run.stdout.splitlines():
        if m := re.match(r"^==> \[\d+/\d+\] (.*?)  \(t=", line):
            current = m[1]
            titles.append(current)
            commands[current] = []
        elif current and line.startswith("  + "):
            commands[current].append(line[4:])
    return titles, commands


def test_the_script_parses_and_explains_itself():
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0
    assert os.access(SCRIPT, os.X_OK), "scripts/oldkernel-e2e.sh must be executable"
    run = script("--help")
    assert run.returncode == 0 and "scripts/oldkernel-e2e.sh --dry-run" in run.stdout, run.stdout + run.stderr
    for option in ("--keep", "--rebuild", "--checkout DIR", "--verbose"):
        assert option in run.stdout, option
    bad = script("--no-such-option")
    assert bad.returncode == 2 and "unknown argument --no-such-option" in bad.stderr


def test_dry_run_names_every_step_in_order():
    titles, _ = dry_run()
    wanted = ["host tools:", "image: debootstrap bookworm + linux-image-amd64", "boot: QEMU (", "kernel:",
              "project: git archive of HEAD", "network: the guest reaches PyPI", "set up .venv: scripts/venv.sh",
              "./demo.sh:", "README example in relay mode", "README example in direct mode",
              *(f"pytest tests/{mod}.py" for mod in LIVE_TESTS), "logs:", "cleanup"]
    assert len(titles) == len(wanted), titles
    for title, what in zip(titles, wanted):
        assert title.startswith(what), (title, what)
    assert "no SO_PEERPIDFD" in titles[3]


def test_dry_run_shows_what_the_guest_runs():
    titles, commands = dry_run()
    by = {what: next(cmds for title, cmds in commands.items() if title.startswith(what))
          for what in ("image:", "./demo.sh:", "README example in relay mode", "README example in direct mode", "boot:")}
    assert any(c.startswith("debootstrap ") and "--include=" in c and "linux-image-amd64" in c and "python3-venv" in c
               for c in by["image:"]), by["image:"]
    qemu = next(c for c in by["boot:"] if c.startswith("qemu-system-x86_64"))
    for arg in ("-accel ", "-smp 2", "-serial file:", "-netdev user,", "hostfwd=tcp:127.0.0.1:", "-kernel", "-initrd"):
        assert arg in qemu, arg
    assert by["./demo.sh:"][-1].split()[-1] == "./demo.sh"
    # the README's three commands, as printed, in its order; direct mode with VDSP_RPC_MODE=direct
    readme = shell_steps()
    for mode in ("README example in relay mode", "README example in direct mode"):
        run = [re.sub(r"^bounded \d+ ", "", c) for c in by[mode] if c.startswith("bounded ")]
        assert run == readme, (mode, run, readme)
    assert "export VDSP_RPC_MODE=direct" in by["README example in direct mode"]
    assert not any("VDSP_RPC_MODE" in c for c in by["README example in relay mode"])
    for mod in LIVE_TESTS:
        assert (ROOT / "tests" / f"{mod}.py").is_file(), mod
        start, cmd = commands[next(t for t in titles if f"tests/{mod}.py" in t)]
        # the SoC's start timeout and the SDK's default task wait, scaled as the step's deadlines: x4 on TCG
        assert start in ("export VDSP_START_TIMEOUT=60 VDSP_TASK_WAIT_MS=100000",
                         "export VDSP_START_TIMEOUT=240 VDSP_TASK_WAIT_MS=400000"), start
        assert re.fullmatch(rf"bounded \d+ \.venv/bin/python -m pytest .*tests/{mod}\.py", cmd), cmd
    # every command of the guest has a deadline
    guest = [c for t in titles[6:-2] for c in commands[t]]
    assert len(guest) == 2 + 2 * 3 + 1 + len(LIVE_TESTS) + len(titles[6:-2]), guest
    assert all(c.startswith("bounded ") or c.startswith("export ") for c in guest), guest


def test_accel_chooses_kvm_or_tcg():
    for accel, args in (("kvm", "-accel kvm -cpu host "), ("tcg", "-accel tcg,thread=multi -cpu max ")):
        run = script("--dry-run", "--accel", accel)
        assert run.returncode == 0, run.stderr
        assert f"boot: QEMU ({accel}" in run.stdout and args in run.stdout, run.stdout
    # TCG emulates: every deadline of the guest's steps is four times KVM's
    deadlines = {accel: re.findall(r"\[deadline (\d+) s\]", script("--dry-run", "--accel", accel).stdout)
                 for accel in ("kvm", "tcg")}
    assert deadlines["kvm"] and [4 * int(d) for d in deadlines["kvm"]] == [int(d) for d in deadlines["tcg"]]
    bad = script("--dry-run", "--accel", "hvf")
    assert bad.returncode == 2 and "--accel is auto, kvm or tcg" in bad.stderr


def test_dry_run_makes_nothing():
    before = STATE.exists()
    tmp_before = set(Path("/tmp").glob("oldkernel-e2e.*"))
    dry_run()
    assert STATE.exists() == before
    assert set(Path("/tmp").glob("oldkernel-e2e.*")) == tmp_before


def test_what_the_script_must_leave_alone():
    text = SCRIPT.read_text()
    # it stops only the QEMU it started, by its pid; it mounts nothing (mkfs.ext4 -d, no loop device)
    for forbidden in ("pkill", "killall", "losetup", "mount -o loop", "kill -- -"):
        assert forbidden not in text, forbidden
    assert 'kill -TERM "$QEMU_PID"' in text
    # it copies the host's CA certificates and pip's cert setting, not its wheels, indexes or constraints
    for host_only in ("/opt/wheels", "/opt/pypi", "/etc/xdg/pip", "constraints.txt", "find-links", "extra-index-url"):
        assert host_only not in text, host_only
    for path in ("build/oldkernel-e2e/image/root.img", "build/oldkernel-e2e/image/setup.qcow2",
                 "build/oldkernel-e2e/rootfs/etc/hostname"):
        assert subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT).returncode == 0, path


def test_the_docs_document_it():
    readme = (ROOT / "docs" / "docker.md").read_text()
    paragraph = next(p for p in readme.split("\n\n") if "`scripts/oldkernel-e2e.sh`" in p)
    for what in ("--dry-run", "--keep", "--accel", "--checkout DIR", "SO_PEERPIDFD", "linux-image-amd64",
                 "build/oldkernel-e2e/", "tests/project/test_oldkernel_e2e.py"):
        assert what in paragraph, what
    building = (ROOT / "docs" / "building.md").read_text()
    assert "oldkernel-e2e.sh" in building[building.index("\n## Layout"):]


def test_the_setup_layer_is_keyed_by_what_the_setup_depends_on():
    """The cached set-up layer (--keep) is used again only while the set-up's inputs are the same."""
    text = SCRIPT.read_text()
    key = text[text.index("setup_key() {"):]
    key = key[:key.index("\n}\n")]
    for what in ("recipe.sha256", "pyproject.toml", "scripts/venv.sh", "requirements", 'show "HEAD:$f"'):
        assert what in key, what
    run = script("--help")
    assert "after a passed set-up" in run.stdout, run.stdout
