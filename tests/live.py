"""A real SoC for integration tests (vdsp_sim.soc.private_soc), and the leak checks run when it stops."""
from __future__ import annotations

from pathlib import Path

from vdsp_board.memory import ddr
from vdsp_sim.soc.private_soc import PrivateSoc, PrivateSocConfig, ddr_names


def shm_entries() -> set[str]:
    """The DDR files in this process's DDR directory (``VDSP_SHM_DIR``, else /dev/shm)."""
    return ddr_names(Path(ddr.shm_dir()))


def bytes_read(pid: int) -> int:
    """What the kernel counted process ``pid`` reading (read, pread: its ``rchar`` in /proc/PID/io):
    a test's proof that a process did not read a file it must not (an image, a host-wide table)."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError(f"/proc/{pid}/io has no rchar")


def own_shm_prefix() -> str:
    """Names of this (test) process's own DDR owner: alive as long as pytest is."""
    return f"vdsp-{ddr.current_owner().id:06x}"


class LiveSoc(PrivateSoc):
    """relay + vdsp0 + vdsp1 as processes in runtime dir ``rt`` (None: a fresh one) with a
    private DDR directory; ``relay``, ``core_args``, ``relay_args``, ``env`` as in :class:`PrivateSocConfig`."""

    def __init__(self, rt: Path | None = None, *, relay: bool = True, core_args: list[str] | tuple = (),
                 relay_args: list[str] | tuple = (), env: dict[str, str | None] | None = None) -> None:
        super().__init__(PrivateSocConfig(runtime_dir=rt, relay=relay, core_args=tuple(core_args),
                                          relay_args=tuple(relay_args), env=dict(env or {})))

    def fw_pid(self, core: str) -> int:
        """pid of a core's firmware process, from the core itself."""
        from arm_side import Soc
        with Soc(mode="direct", connect_timeout_s=5) as soc:
            for c in soc.query("cores")["cores"]:
                if c["name"] == core:
                    return c["fw_pid"]
        raise AssertionError(f"no core {core}")

    def stop_and_check(self) -> None:
        """Stop everything; raise AssertionError for leftover processes, sockets or DDR files
        (they are cleaned up all the same)."""
        problems = self.close()
        if problems:
            raise AssertionError("; ".join(problems))

