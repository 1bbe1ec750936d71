"""The README's Python example runs as written."""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.live
README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_readme_python_example_runs(shared_soc):
    block = re.search(r"```python\n(.*?)```", README.read_text(), re.S)[1]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {})
    values, core = out.getvalue().strip().rsplit(" ", 1)
    assert values == "{'bytes': 1048576}" and core in ("vdsp0", "vdsp1")
