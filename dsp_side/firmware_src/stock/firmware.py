"""Stock firmware of vdsp-sim: every operator the project ships.

Built into an image by ``vdsp firmware build`` (``vdsp up`` installs it as
vdsp0 and vdsp1 when the firmware directory has none). The framework operators
(ping, memcpy, fill, checksum, sleep) are added to every image by the loader.
"""
VERSION = "0.1.0"


def register(registry):
    """Register the stock operators (beyond the framework ones)."""
    from dsp_side.operators import cv, nn, pointcloud
    nn.register(registry)
    cv.register(registry)
    pointcloud.register(registry)
