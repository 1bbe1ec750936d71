"""Stock firmware of vdsp-sim: every operator the project ships.

Built into an image by ``vdsp firmware build`` (``vdsp up`` installs it as
vdsp0 and vdsp1 when the firmware directory has none). The framework operators
(ping, memcpy, fill, checksum, sleep) are added to every image by the loader. The two
point-cloud DSP stages are C kernels of this tree (``pointcloud_encode.cc``,
``pointcloud_transpose.c``, compiled by the build into the image's kernel library) behind the
Python operators' checks; the Python/numba kernels stay as their reference.
"""
VERSION = "0.1.0"


def register(registry):
    """Register the stock operators (beyond the framework ones)."""
    from dsp_side.operators import cv, nn, pointcloud
    nn.register(registry)
    cv.register(registry)
    pointcloud.register_c(registry, __file__)
