"""Every line a SoC process writes to its log is in its log format — a Python warning too (the
firmware fed extreme values to an NN kernel: numpy's overflow warning went to the core's log as two
raw lines, ``…/yolo_kernels.py:111: RuntimeWarning: …`` and the source line)."""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DSP_LINE = r"\[W\]\[DSP\]\[kernel\.py:(\d+)\]\[\[\d\d-\d\d\]\[\d\d:\d\d:\d\d:\d{3}:\d{3}\]\] "
GLOG_LINE = r"W\d{4} \d\d:\d\d:\d\d\.\d{6} \d+ kernel\.py:(\d+)\] "


@pytest.mark.parametrize("kind, pattern", [("dsp", DSP_LINE), ("arm", GLOG_LINE)])
def test_a_python_warning_is_one_line_of_the_log_format_at_its_source(tmp_path, kind, pattern):
    kernel = tmp_path / "kernel.py"
    kernel.write_text(textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        import numpy as np
        from vdsp_board.observability import log
        log.setup({kind!r})
        big = np.full(4, 3e38, np.float32)
        for _ in range(3):
            score = big * big      # said once for its place (Python's default filter)
        import warnings
        warnings.warn("an old parameter", DeprecationWarning)
        """))
    res = subprocess.run([sys.executable, "-W", "default", str(kernel)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 2, lines
    first = re.fullmatch(pattern + r"RuntimeWarning: overflow encountered in multiply", lines[0])
    assert first and first.group(1) == "8", lines[0]
    second = re.fullmatch(pattern + r"DeprecationWarning: an old parameter", lines[1])
    assert second and second.group(1) == "10", lines[1]


def test_warnings_follow_the_log_level(tmp_path):
    """VDSP_LOG_LEVEL=error: a warning is not shown (it was, whatever the level)."""
    kernel = tmp_path / "kernel.py"
    kernel.write_text(f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nfrom vdsp_board.observability import log\n"
                      "log.setup('dsp')\nimport warnings\nwarnings.warn('hidden', UserWarning)\n")
    import os
    res = subprocess.run([sys.executable, str(kernel)], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, VDSP_LOG_LEVEL="error"))
    assert res.returncode == 0 and res.stderr == "", res.stderr
