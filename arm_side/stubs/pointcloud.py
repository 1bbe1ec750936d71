"""Typed stubs of the stock point-cloud preprocessing operators (0x0600-0x06ff).

Generated from the operators' declarations by arm_side.stubgen; do not edit.
Each function submits its operator and returns the task (see arm_side.stubs).
"""
from __future__ import annotations

from typing import Any, Literal, Sequence, TypeVar, Unpack  # noqa: F401

from protocol.task_options import TaskKw, TaskOptions
from arm_side.stubs import Buffer, Submitter  # noqa: F401

T = TypeVar("T")

__all__ = [
    'pointcloud_encode', 'pointcloud_transpose',
]


def pointcloud_encode(
        soc: Submitter[T],
        src: Buffer,
        outputs: Sequence[Buffer],
        *,
        dim: int,
        num_points: int,
        back: float,
        front: float,
        right: float,
        left: float,
        bottom: float,
        top: float,
        lower: float,
        upper: float,
        x_scale: float,
        y_scale: float,
        scale: float,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """pillar preprocessing stage 1: packed cell index and quantised features per point

    Operator 0x0600 ``pointcloud_encode``, buffers: 1 in, 2..3 out. Returns the submitted task (its
    values come from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``,
    ``priority``, ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - dim (int; one of 4, 5; required): values per point
    - num_points (int; 0..; required): points in input 0
    - back (float; required): x lower bound (open)
    - front (float; required): x upper bound (open)
    - right (float; required): y lower bound (open)
    - left (float; required): y upper bound (open)
    - bottom (float; required): z lower bound (open)
    - top (float; required): z upper bound (open)
    - lower (float; required): intensity lower bound
    - upper (float; required): intensity upper bound
    - x_scale (float; required): cell size along x
    - y_scale (float; required): cell size along y
    - scale (float; required): input quantisation scale
    """
    params: dict[str, Any] = {
        'dim': dim,
        'num_points': num_points,
        'back': back,
        'front': front,
        'right': right,
        'left': left,
        'bottom': bottom,
        'top': top,
        'lower': lower,
        'upper': upper,
        'x_scale': x_scale,
        'y_scale': y_scale,
        'scale': scale,
    }
    return soc.rpc(0x0600, [src], list(outputs), params, options=options, **task)


def pointcloud_transpose(
        soc: Submitter[T],
        inputs: Sequence[Buffer],
        dst: Buffer,
        *,
        dim: int,
        layout: Literal['cmp', 'cpm'],
        max_pillars: int,
        max_points: int,
        pillar_stride: int,
        num_pillars: int,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """pillar preprocessing stage 2: pillar-major voxels -> model layout

    Operator 0x0601 ``pointcloud_transpose``, buffers: 1..2 in, 1 out. Returns the submitted task (its
    values come from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``,
    ``priority``, ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - dim (int; one of 4, 5; required)
    - layout (str; one of 'cmp', 'cpm'; required): cmp: [dim][M][stride]; cpm: [dim][stride][M]
    - max_pillars (int; 1..; required)
    - max_points (int; 1..; required)
    - pillar_stride (int; 1..; required): allocated pillar axis length (>= max_pillars)
    - num_pillars (int; 0..; required): pillars in use (<= max_pillars)
    """
    params: dict[str, Any] = {
        'dim': dim,
        'layout': layout,
        'max_pillars': max_pillars,
        'max_points': max_points,
        'pillar_stride': pillar_stride,
        'num_pillars': num_pillars,
    }
    return soc.rpc(0x0601, list(inputs), [dst], params, options=options, **task)
