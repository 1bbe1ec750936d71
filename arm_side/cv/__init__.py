"""ARM-side CV API: images in shared memory and one typed function per DSP CV operator.

::

    from arm_side import Soc, cv
    with Soc() as soc:
        src = cv.write_image(soc, gray, "Y", stride=512)
        dst = cv.alloc_image(soc, "Y", src.width, src.height, stride=512)
        cv.gaussian_blur(soc, src, dst, ksize=(5, 5), sigma_x=1.2)
        blurred = cv.read_image(dst)

        out = cv.gaussian_blur(soc, pixels, 5)                      # numpy in, numpy out (pooled buffers)
        level, bw = cv.threshold(soc, gray, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU)

OpenCV's constants and keyword names are accepted; with an ``AsyncSoc`` every operator
returns an awaitable. See docs/cv.md for the operators, formats and parameters.
"""
from arm_side.cv.image import (Image, alloc_image, free_image, min_stride, put_image, read_image, read_padding,
                               write_image)
from arm_side.cv.ops import OPERATORS, run
from arm_side.cv import functions
from arm_side.cv.functions import *  # noqa: F403  (one typed function per CV operator; functions.__all__)
from protocol.contract import cv_ids as ids
from protocol.contract.image_formats import FORMATS

__all__ = ["Image", "alloc_image", "free_image", "min_stride", "put_image", "read_image", "read_padding",
           "write_image", "ids", "FORMATS", "OPERATORS", "run", *functions.__all__]
