"""An image's code runs from the image's own source, never from a bytecode cache: with a cache
outside the tree (PYTHONPYCACHEPREFIX, sys.pycache_prefix) a firmware that unpacks each image into
the same directory found the previous image's compiled firmware.py (and submodule) there, valid by
its path, size and mtime, and ran that code instead of the signed one (found by the test-suite work
of issue 43, a hot-swap test booting the old image's code)."""
from __future__ import annotations

import os
import sys

from dsp_side import fw_image

FIRMWARE = 'from . import helper\nVERSION = "1.0.{n}"\nWHO = helper.WHO\n\ndef register(registry):\n    pass\n'
HELPER = 'WHO = "image {n}"\n'


def _unpack(root, n: int, stamp: int) -> None:
    """What an unpack does: the same paths, the same sizes (n is one digit), the same mtimes."""
    root.mkdir(exist_ok=True)
    for name, text in (("firmware.py", FIRMWARE), ("helper.py", HELPER)):
        path = root / name
        path.write_text(text.format(n=n))
        os.utime(path, (stamp, stamp))


def test_a_second_image_unpacked_where_the_first_was_runs_its_own_code(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "pycache"))    # as PYTHONPYCACHEPREFIX sets it
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    root = tmp_path / "vdsp0.fw"
    _unpack(root, 1, 1_700_000_000)
    first = fw_image._import_tree(root, "first")
    assert (first.VERSION, first.WHO) == ("1.0.1", "image 1")
    _unpack(root, 2, 1_700_000_000)
    second = fw_image._import_tree(root, "second")
    assert (second.VERSION, second.WHO) == ("1.0.2", "image 2")
    assert not (tmp_path / "pycache").exists() or not any((tmp_path / "pycache").rglob("*.pyc"))
