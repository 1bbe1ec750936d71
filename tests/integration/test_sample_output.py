"""What the NN samples print tells what happened, as the J5 sample log does: the DSP banner
(version, logger level, mode, receiving thread) with our version, a softmax TOP-5 of five
distinct classes, and the point-cloud stage lines logged as each stage happens (their
timestamps are as far apart as the stage times they report)."""
from __future__ import annotations

import datetime
import math
import re
import subprocess
import sys

import pytest

from vdsp_board.config.version import __version__

pytestmark = pytest.mark.live
VDSP = [sys.executable, "-m", "vdsp_sim.cli"]
GLOG = re.compile(r"^I\d{4} (\d\d:\d\d:\d\d\.\d{6}) \d+ [\w.]+:\d+\] (.*)$")


@pytest.fixture(scope="module")
def nn_run(shared_soc, tmp_path_factory):
    out = tmp_path_factory.mktemp("nn-out")
    res = subprocess.run([*VDSP, "sample", "nn", "softmax", "pointpillar", "--output", str(out)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stderr.splitlines()


def glog(lines: list[str]) -> list[tuple[float, str]]:
    """(seconds since midnight, message) of the glog lines."""
    out = []
    for line in lines:
        m = GLOG.match(line)
        if m:
            t = datetime.datetime.strptime(m[1], "%H:%M:%S.%f").time()
            out.append((t.hour * 3600 + t.minute * 60 + t.second + t.microsecond / 1e6, m[2]))
    return out


def test_the_dsp_banner_comes_once_with_our_version(nn_run):
    assert nn_run.count(f"[DSP] DSP version = {__version__}") == 1
    first = nn_run.index(f"[DSP] DSP version = {__version__}")
    banner = nn_run[first + 1:first + 4]
    assert re.match(r"^\[A\]\[DSP\]\[[\w.]+:\d+\]\[\[\d\d-\d\d\]\[\d\d:\d\d:\d\d:\d{3}:\d{3}\]\] Init logger, level:3$",
                    banner[0]), banner
    assert banner[1].startswith("[A][DSP]") and banner[1].endswith("] Relay server mode")
    assert banner[2].startswith("[I][DSP]") and banner[2].endswith("] Start thread for receive msg from relay server")
    # before the first task, as the J5 library prints it when the sample first connects
    assert first < next(i for i, line in enumerate(nn_run) if line.endswith("] rpc begin"))


def test_softmax_top5_is_five_distinct_classes(nn_run):
    top = [re.search(r"TOP (\d) result id: (\d+) prob ([\d.]+)", line) for line in nn_run]
    top = [m for m in top if m]
    assert [int(m[1]) for m in top] == [0, 1, 2, 3, 4]
    assert [int(m[2]) for m in top] == [17, 404, 761, 230, 958]   # the classes the sample made stand out
    probs = [float(m[3]) for m in top]
    assert all(a > b * 1.5 for a, b in zip(probs, probs[1:])), probs
    # the five planted int8 logits 127, 118, 109, 100, 91 at scale 1/16: neighbours differ by
    # exp(9/16) in probability, whatever the noise below them adds to the sum
    for a, b in zip(probs, probs[1:]):
        assert a / b == pytest.approx(math.exp(9 / 16), rel=1e-3)


def test_pointcloud_stage_lines_are_logged_as_the_stages_happen(nn_run):
    lines = glog(nn_run)
    t = {}
    for stamp, msg in lines:
        for key in ("stage 1 rpc begin", "dsp 1 time", "gen voxel data begin", "gen voxel data finish", "cpu time",
                    "stage 2 rpc begin", "stage 2 rpc finish", "dsp 2 time", "total time"):
            if msg.startswith(key):
                t[key] = (stamp, msg)
    assert list(t) == ["stage 1 rpc begin", "dsp 1 time", "gen voxel data begin", "gen voxel data finish",
                       "cpu time", "stage 2 rpc begin", "stage 2 rpc finish", "dsp 2 time", "total time"]
    ms = {key: float(re.search(r"([\d.]+) ?ms", t[key][1])[1]) for key in ("dsp 1 time", "dsp 2 time", "total time")}
    elapsed = lambda a, b: (t[b][0] - t[a][0]) * 1e3     # noqa: E731
    # each interval between the lines holds at least the time the sample reports for it
    # (a little less for the timestamps' µs rounding); printed after the run, they were µs apart
    assert elapsed("stage 1 rpc begin", "dsp 1 time") >= ms["dsp 1 time"] - 0.01
    assert elapsed("stage 2 rpc begin", "stage 2 rpc finish") >= ms["dsp 2 time"] - 0.01
    assert elapsed("stage 1 rpc begin", "total time") >= ms["total time"] - 0.01


def test_write_points_makes_its_directory(tmp_path):
    """``--write-points output/cloud.bin`` (the docs' example) works in a fresh clone, where
    output/ does not exist yet (the CPU reference alone: no SoC needed)."""
    from vdsp_sim.samples import nn
    cloud = tmp_path / "output" / "cloud.bin"
    assert nn.main(["pointpillar", "--num-points", "2000", "--write-points", str(cloud),
                    "--output", str(tmp_path / "output"), "--impl", "cpu"]) == 0
    assert cloud.stat().st_size == 2000 * 4 * 4
