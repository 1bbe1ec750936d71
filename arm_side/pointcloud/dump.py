"""Dumps of the J5 sample: one integer per line, coords (int32) and features (int8) in
memory order; and the consistency check that compares two dumps."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def dump_values(values: np.ndarray, path: str | Path) -> Path:
    """Write every value of ``values`` (C order) as a decimal integer, one per line."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    flat = np.ascontiguousarray(values).reshape(-1).astype(np.int32)
    path.write_text("\n".join(map(str, flat.tolist())) + ("\n" if flat.size else ""))
    return path


def same_dump(a: str | Path, b: str | Path) -> bool:
    """True when two dump files hold the same values (the J5 consistency check)."""
    return Path(a).read_bytes() == Path(b).read_bytes()
