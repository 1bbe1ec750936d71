"""The ARM-side form of a CV operator, declared in its contract entry (``cv_ops``).

The firmware ignores it (it is not in the operator table on the wire). The ARM SDK builds
each ``arm_side.cv`` function from the entry and its form, and docs/cv.md's table shows it:

- ``formats``: the image formats the operator takes and gives, as the docs say it
  ("8-bit → same"; the firmware's kernel is what checks them);
- ``shape``: how numpy mode makes the destination, by the name of a rule of the ARM side
  (``arm_side.cv.shapes.RULES``: "same" = the source's format and size, "depth" = by
  ``ddepth``, "resize" = by ``dsize`` or ``fx``/``fy`` ...); a rule also names the
  numpy-only keywords it reads;
- ``order``: the functions' positional order of the declared parameters where it is not
  the declaration's (a parameter left out is derived from another by the ARM side);
- ``cv2_args``: numpy mode's positional order after the images, as cv2 takes them;
- ``result``: the result value numpy mode returns before the array (``cv2.threshold``
  returns ``(level, dst)``);
- ``arm_params``: ARM-only parameters from which declared ones are derived
  (``kernel=cv2.getStructuringElement(...)`` for a morphology's ``shape`` and ``ksize``).

Pure data.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class CvForm:
    """See the module docstring."""

    formats: str
    shape: str = "same"
    order: tuple[str, ...] = ()
    cv2_args: tuple[str, ...] | None = None
    result: str = ""
    arm_params: tuple[str, ...] = ()
