"""A C kernel in a firmware image: docs/dsp_kernels.md walks through it.

``affine_u8`` maps every byte v of its input to clip(((v * gain + 128) >> 8) + bias, 0, 255)
(a brightness/contrast change in 8.8 fixed point). Its kernel, ``affine_u8.c``, streams the
input through TCM in tiles with IDMA, ping in bank 0 and pong in bank 1, as the J5 sample's
kernels do. The operator is declared once, here; the kernel reads the same parameters as the
struct ``hbDSPAffineU8Param`` that ``vdsp firmware build`` generates from this entry.
"""
from protocol.contract.operator import OperatorEntry
from dsp_side import ckernel

VERSION = "1.0.0"

AFFINE_U8 = OperatorEntry.declare(
    0x1410, "affine_u8", {
        "gain": {"type": "int", "min": 0, "max": 65535, "default": 256, "doc": "8.8 fixed point: 256 is 1.0"},
        "bias": {"type": "int", "min": -255, "max": 255, "default": 0, "doc": "added after the gain"},
        "tile": {"type": "int", "min": 64, "max": 65536, "default": 16384,
                 "doc": "bytes per TCM tile; 4 tiles live in TCM, 2 per bank"}},
    inputs=1, outputs=1, doc="out[i] = clip(((in[i] * gain + 128) >> 8) + bias, 0, 255) for every byte.")


def register(registry):
    ckernel.bind(registry, AFFINE_U8, "affine_u8_kernel", __file__)
