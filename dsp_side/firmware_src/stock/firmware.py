"""Stock firmware of vdsp-sim: every operator the project ships.

Built into an image by ``vdsp firmware build`` (``vdsp up`` installs it as
vdsp0 and vdsp1 when the firmware directory has none). The framework operators
(ping, memcpy, fill, checksum, sleep) are added to every image by the loader. The two
point-cloud DSP stages are C kernels of this tree (``pointcloud_encode.cc``,
``pointcloud_transpose.c``, compiled by the build into the image's kernel library) behind the
Python operators' checks; the Python/numba kernels stay as their reference, and are the DSP
path of an image built where no C and C++ compiler is found.
"""
VERSION = "0.1.0"


def register(registry):
    """Register the stock operators (beyond the framework ones)."""
    from dsp_side.operators import cv, nn, pointcloud
    nn.register(registry)
    cv.register(registry)
    from dsp_side import ckernel
    if ckernel.available(__file__, cxx=True):
        pointcloud.register_c(registry, __file__)
    else:       # no C/C++ compiler where the image is built: the Python kernels (docs/pointcloud.md)
        pointcloud.register(registry)
