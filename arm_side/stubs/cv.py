"""Typed stubs of the stock CV operators (0x0800-0x0fff).

Generated from the operators' declarations by arm_side.stubgen; do not edit.
Each function submits its operator and returns the task (see arm_side.stubs).
"""
from __future__ import annotations

from typing import Any, Literal, Sequence, TypeVar, Unpack  # noqa: F401

from protocol.task_options import TaskKw, TaskOptions
from arm_side.stubs import Buffer, Submitter  # noqa: F401

T = TypeVar("T")

__all__ = [
    'bilateral_filter', 'box_filter', 'canny', 'cvt_color', 'dilate', 'equalize_hist', 'erode', 'filter2d',
    'flip', 'gaussian_blur', 'integral', 'median_blur', 'pyr_down', 'pyr_up', 'resize', 'roi_resize',
    'rotate', 'sep_filter2d', 'sobel', 'threshold', 'transpose', 'warp_affine', 'warp_perspective',
    'corner_harris', 'remap', 'lut',
]


def bilateral_filter(
        soc: Submitter[T],
        src_buf: Buffer,
        dst_buf: Buffer,
        *,
        src: Any,
        dst: Any,
        d: int = 5,
        sigma_color: float = 50.0,
        sigma_space: float = 50.0,
        border: Literal['reflect101', 'constant', 'replicate', 'reflect', 'wrap'] = 'reflect101',
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Edge-preserving smoothing (cv::bilateralFilter) with a d x d neighbourhood.

    Operator 0x0800 ``cv.bilateralFilter``, buffers: 1 in, 1 out. Returns the submitted task (its values
    come from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``,
    ``priority``, ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - src (any; required): source image (image descriptor: format, width, height, stride, roi)
    - dst (any; required): destination image (image descriptor: format, width, height, stride, roi)
    - d (int; 1..31; default 5)
    - sigma_color (float; 0.0..1000000.0; default 50.0)
    - sigma_space (float; 0.0..1000000.0; default 50.0)
    - border (str; one of 'reflect101', 'constant', 'replicate', 'reflect', 'wrap'; default
      'reflect101'): border extrapolation (OpenCV BORDER_*)
    """
    params: dict[str, Any] = {
        'src': src,
        'dst': dst,
        'd': d,
        'sigma_color': sigma_color,
        'sigma_space': sigma_space,
        'border': border,
    }
    return soc.rpc(0x0800, [src_buf], [dst_buf], params, options=options, **task)


def box_filter(
        soc: Submitter[T],
        src_buf: Buffer,
        dst_buf: Buffer,
        *,
        src: Any,
        dst: Any,
        ksize: Sequence[int] = (3, 3),
        normalize: bool = True,
        anchor: Sequence[int] = (-1, -1),
        border: Literal['reflect101', 'constant', 'replicate', 'reflect'] = 'reflect101',
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Box filter (cv::boxFilter), normalized by default.

    Operator 0x0801 ``cv.boxFilter``, buffers: 1 in, 1 out. Returns the submitted task (its values come
    from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``, ``priority``,
    ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - src (any; required): source image (image descriptor: format, width, height, stride, roi)
    - dst (any; required): destination image (image descriptor: format, width, height, stride, roi)
    - ksize (int_list; 2 values; 1..255; default [3, 3]): kernel size [width, height]
    - normalize (bool; default True)
    - anchor (int_list; 2 values; -1..; default [-1, -1]): [x, y]; -1,-1 = centre
    - border (str; one of 'reflect101', 'constant', 'replicate', 'reflect'; default 'reflect101'):
      border extrapolation (OpenCV BORDER_*)
    """
    params: dict[str, Any] = {
        'src': src,
        'dst': dst,
        'ksize': list(ksize),
        'normalize': normalize,
        'anchor': list(anchor),
        'border': border,
    }
    return soc.rpc(0x0801, [src_buf], [dst_buf], params, options=options, **task)


def canny(
        soc: Submitter[T],
        src_buf: Buffer,
        dst_buf: Buffer,
        *,
        src: Any,
        dst: Any,
        threshold1: float = 100.0,
        threshold2: float = 200.0,
        aperture_size: int = 3,
        l2_gradient: bool = False,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Canny edges (cv::Canny): 255 on edges, 0 elsewhere.

    Operator 0x0802 ``cv.canny``, buffers: 1 in, 1 out. Returns the submitted task (its values come from
    ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``, ``priority``,
    ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - src (any; required): source image (image descriptor: format, width, height, stride, roi)
    - dst (any; required): destination image (image descriptor: format, width, height, stride, roi)
    - threshold1 (float; 0.0..1000000.0; default 100.0): hysteresis low
    - threshold2 (float; 0.0..1000000.0; default 200.0): hysteresis high
    - aperture_size (int; one of 3, 5, 7; default 3)
    - l2_gradient (bool; default False)
    """
    params: dict[str, Any] = {
        'src': src,
        'dst': dst,
        'threshold1': threshold1,
        'threshold2': threshold2,
        'aperture_size': aperture_size,
        'l2_gradient': l2_gradient,
    }
    return soc.rpc(0x0802, [src_buf], [dst_buf], params, options=options, **task)


def cvt_color(
        soc: Submitter[T],
        src_buf: Buffer,
        outputs: Sequence[Buffer],
        *,
        src: Any,
        dst: Any,
        code: Literal['RGB2GRAY', 'BGR2GRAY', 'RGB2NV12', 'BGR2NV12'],
        chroma: Literal['top_left', 'average'] = 'top_left',
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """RGB/BGR -> gray (cv::cvtColor) or -> NV12 / NV12_SEPARATE (BT.601 limited range).

    Operator 0x0803 ``cv.cvtColor``, buffers: 1 in, 1..2 out. Returns the submitted task (its values
    come from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``,
    ``priority``, ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - src (any; required): source image (image descriptor: format, width, height, stride, roi)
    - dst (any; required): destination image (image descriptor: format, width, height, stride, roi)
    - code (str; one of 'RGB2GRAY', 'BGR2GRAY', 'RGB2NV12', 'BGR2NV12'; required)
    - chroma (str; one of 'top_left', 'average'; default 'top_left'): NV12 chroma siting: a 2x2 block's
      top-left pixel, or its mean
    """
    params: dict[str, Any] = {'src': src, 'dst': dst, 'code': code, 'chroma': chroma}
    return soc.rpc(0x0803, [src_buf], list(outputs), params, options=options, **task)


def dilate(
        soc: Submitter[T],
        src_buf: Buffer,
        dst_buf: Buffer,
        *,
        src: Any,
        dst: Any,
        shape: Literal['rect', 'cross', 'ellipse'] = 'rect',
        ksize: Sequence[int] = (3, 3),
        anchor: Sequence[int] = (-1, -1),
        iterations: int = 1,
        border: Literal['reflect101', 'constant', 'replicate', 'reflect'] = 'constant',
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Dilation (cv::dilate): local maximum over the structuring element.

    Operator 0x0804 ``cv.dilate``, buffers: 1 in, 1 out. Returns the submitted task (its values come
    from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``, ``priority``,
    ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - src (any; required): source image (image descriptor: format, width, height, stride, roi)
    - dst (any; required): destination image (image descriptor: format, width, height, stride, roi)
    - shape (str; one of 'rect', 'cross', 'ellipse'; default 'rect')
    - ksize (int_list; 2 values; 1..255; default [3, 3]): structuring element size [width, height]
    - anchor (int_list; 2 values; -1..; default [-1, -1])
    - iterations (int; 1..100; default 1)
    - border (str; one of 'reflect101', 'constant', 'replicate', 'reflect'; default 'constant'): border
      extrapolation (OpenCV BORDER_*)
    """
    params: dict[str, Any] = {
        'src': src,
        'dst': dst,
        'shape': shape,
        'ksize': list(ksize),
        'anchor': list(anchor),
        'iterations': iterations,
        'border': border,
    }
    return soc.rpc(0x0804, [src_buf], [dst_buf], params, options=options, **task)


def equalize_hist(
        soc: Submitter[T],
        src_buf: Buffer,
        dst_buf: Buffer,
        *,
        src: Any,
        dst: Any,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Histogram equalization of an 8-bit gray image (cv::equalizeHist).

    Operator 0x0805 ``cv.equalizeHist``, buffers: 1 in, 1 out. Returns the submitted task (its values
    come from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``,
    ``priority``, ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - src (any; required): source image (image descriptor: format, width, height, stride, roi)
    - dst (any; required): destination image (image descriptor: format, width, height, stride, roi)
    """
    params: dict[str, Any] = {'src': src, 'dst': dst}
    return soc.rpc(0x0805, [src_buf], [dst_buf], params, options=options, **task)


def erode(
        soc: Submitter[T],
        src_buf: Buffer,
        dst_buf: Buffer,
        *,
        src: Any,
        dst: Any,
        shape: Literal['rect', 'cross', 'ellipse'] = 'rect',
        ksize: Sequence[int] = (3, 3),
        anchor: Sequence[int] = (-1, -1),
        iterations: int = 1,
        border: Literal['reflect101', 'constant', 'replicate', 'reflect'] = 'constant',
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Erosion (cv::erode): local minimum over the structuring element.

    Operator 0x0806 ``cv.erode``, buffers: 1 in, 1 out. Returns the submitted task (its values come from
    ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``, ``priority``,
    ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - src (any; required): source image (image descriptor: format, width, height, stride, roi)
    - dst (any; required): destination image (image descriptor: format, width, height, stride, roi)
    - shape (str; one of 'rect', 'cross', 'ellipse'; default 'rect')
    - ksize (int_list; 2 values; 1..255; default [3, 3]): structuring element size [width, height]
    - anchor (int_list; 2 values; -1..; default [-1, -1])
    - iterations (int; 1..100; default 1)
    - border (str; one of 'reflect101', 'constant', 'replicate', 'reflect'; default 'constant'): border
      extrapolation (OpenCV BORDER_*)
    """
    params: dict[str, Any] = {
        'src': src,
        'dst': dst,
        'shape': shape,
        'ksize': list(ksize),
        'anchor': list(anchor),
        'iterations': iterations,
        'border': border,
    }
    return soc.rpc(0x0806, [src_buf], [dst_buf], params, options=options, **task)


def filter2d(
        soc: Submitter[T],
        src_buf: Buffer,
        dst_buf: Buffer,
        *,
        src: Any,
        dst: Any,
        kernel: Sequence[float],
        ksize: Sequence[int],
        anchor: Sequence[int] = (-1, -1),
        delta: float = 0.0,
        border: Literal['reflect101', 'constant', 'replicate', 'reflect'] = 'reflect101',
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Correlation with an arbitrary kernel (cv::filter2D); kernel row-major, ksize [w, h].

    Operator 0x0807 ``cv.filter2D``, buffers: 1 in, 1 out. Returns the submitted task (its values come
    from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``, ``priority``,
    ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - src (any; required): source image (image descriptor: format, width, height, stride, roi)
    - dst (any; required): destination image (image descriptor: format, width, height, stride, roi)
    - kernel (float_list; required): kernel coefficients
    - ksize (int_list; 2 values; 1..255; required): kernel size [width, height]
    - anchor (int_list; 2 values; -1..; default [-1, -1]): [x, y]; -1,-1 = centre
    - delta (float; default 0.0): added to every result
    - border (str; one of 'reflect101', 'constant', 'replicate', 'reflect'; default 'reflect101'):
      border extrapolation (OpenCV BORDER_*)
    """
    params: dict[str, Any] = {
        'src': src,
        'dst': dst,
        'kernel': list(kernel),
        'ksize': list(ksize),
        'anchor': list(anchor),
        'delta': delta,
        'border': border,
    }
    return soc.rpc(0x0807, [src_buf], [dst_buf], params, options=options, **task)


def flip(
        soc: Submitter[T],
        inputs: Sequence[Buffer],
        outputs: Sequence[Buffer],
        *,
        src: Any,
        dst: Any,
        flip_code: int = 1,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Mirror (cv::flip): 0 around the x axis, 1 around the y axis, -1 both.

    Operator 0x0808 ``cv.flip``, buffers: 1..2 in, 1..2 out. Returns the submitted task (its values come
    from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``, ``priority``,
    ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - src (any; required): source image (image descriptor: format, width, height, stride, roi)
    - dst (any; required): destination image (image descriptor: format, width, height, stride, roi)
    - flip_code (int; one of 0, 1, -1; default 1)
    """
    params: dict[str, Any] = {'src': src, 'dst': dst, 'flip_code': flip_code}
    return soc.rpc(0x0808, list(inputs), list(outputs), params, options=options, **task)


def gaussian_blur(
        soc: Submitter[T],
        src_buf: Buffer,
        dst_buf: Buffer,
        *,
        src: Any,
        dst: Any,
        ksize: Sequence[int] = (5, 5),
        sigma_x: float = 0.0,
        sigma_y: float = 0.0,
        border: Literal['reflect101', 'constant', 'replicate', 'reflect'] = 'reflect101',
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Gaussian smoothing (cv::GaussianBlur); ksize odd, sigma 0 = derived from ksize.

    Operator 0x0809 ``cv.gaussianBlur``, buffers: 1 in, 1 out. Returns the submitted task (its values
    come from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``,
    ``priority``, ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - src (any; required): source image (image descriptor: format, width, height, stride, roi)
    - dst (any; required): destination image (image descriptor: format, width, height, stride, roi)
    - ksize (int_list; 2 values; 1..255; odd; default [5, 5]): kernel size, odd [width, height]
    - sigma_x (float; 0.0..1000.0; default 0.0)
    - sigma_y (float; 0.0..1000.0; default 0.0)
    - border (str; one of 'reflect101', 'constant', 'replicate', 'reflect'; default 'reflect101'):
      border extrapolation (OpenCV BORDER_*)
    """
    params: dict[str, Any] = {
        'src': src,
        'dst': dst,
        'ksize': list(ksize),
        'sigma_x': sigma_x,
        'sigma_y': sigma_y,
        'border': border,
    }
    return soc.rpc(0x0809, [src_buf], [dst_buf], params, options=options, **task)


def integral(
        soc: Submitter[T],
        src_buf: Buffer,
        dst_buf: Buffer,
        *,
        src: Any,
        dst: Any,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Integral image (cv::integral): dst is (w+1) x (h+1), S32 or F32, first row and column 0.

    Operator 0x080a ``cv.integral``, buffers: 1 in, 1 out. Returns the submitted task (its values come
    from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``, ``priority``,
    ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - src (any; required): source image (image descriptor: format, width, height, stride, roi)
    - dst (any; required): destination image (image descriptor: format, width, height, stride, roi)
    """
    params: dict[str, Any] = {'src': src, 'dst': dst}
    return soc.rpc(0x080a, [src_buf], [dst_buf], params, options=options, **task)


def median_blur(
        soc: Submitter[T],
        src_buf: Buffer,
        dst_buf: Buffer,
        *,
        src: Any,
        dst: Any,
        ksize: int = 3,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Median filter (cv::medianBlur) over a ksize x ksize square, ksize odd.

    Operator 0x080b ``cv.medianBlur``, buffers: 1 in, 1 out. Returns the submitted task (its values come
    from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``, ``priority``,
    ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - src (any; required): source image (image descriptor: format, width, height, stride, roi)
    - dst (any; required): destination image (image descriptor: format, width, height, stride, roi)
    - ksize (int; 1..255; odd; default 3)
    """
    params: dict[str, Any] = {'src': src, 'dst': dst, 'ksize': ksize}
    return soc.rpc(0x080b, [src_buf], [dst_buf], params, options=options, **task)


def pyr_down(
        soc: Submitter[T],
        inputs: Sequence[Buffer],
        outputs: Sequence[Buffer],
        *,
        src: Any,
        dst: Any,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Gaussian pyramid step down (cv::pyrDown, 5x5 kernel, BORDER_REFLECT_101).

    Operator 0x080c ``cv.pyrDown``, buffers: 1..2 in, 1..2 out. Returns the submitted task (its values
    come from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``,
    ``priority``, ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - src (any; required): source image (image descriptor: format, width, height, stride, roi)
    - dst (any; required): destination image (image descriptor: format, width, height, stride, roi)
    """
    params: dict[str, Any] = {'src': src, 'dst': dst}
    return soc.rpc(0x080c, list(inputs), list(outputs), params, options=options, **task)


def pyr_up(
        soc: Submitter[T],
        inputs: Sequence[Buffer],
        outputs: Sequence[Buffer],
        *,
        src: Any,
        dst: Any,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Gaussian pyramid step up (cv::pyrUp, BORDER_REFLECT_101).

    Operator 0x080d ``cv.pyrUp``, buffers: 1..2 in, 1..2 out. Returns the submitted task (its values
    come from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``,
    ``priority``, ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - src (any; required): source image (image descriptor: format, width, height, stride, roi)
    - dst (any; required): destination image (image descriptor: format, width, height, stride, roi)
    """
    params: dict[str, Any] = {'src': src, 'dst': dst}
    return soc.rpc(0x080d, list(inputs), list(outputs), params, options=options, **task)


def resize(
        soc: Submitter[T],
        inputs: Sequence[Buffer],
        outputs: Sequence[Buffer],
        *,
        src: Any,
        dst: Any,
        interpolation: Literal[
            'nearest', 'linear', 'cubic', 'area', 'lanczos4', 'linear_exact', 'nearest_exact'
        ] = 'linear',
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Scale the src region to the dst region's size (cv::resize).

    Operator 0x080e ``cv.resize``, buffers: 1..2 in, 1..2 out. Returns the submitted task (its values
    come from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``,
    ``priority``, ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - src (any; required): source image (image descriptor: format, width, height, stride, roi)
    - dst (any; required): destination image (image descriptor: format, width, height, stride, roi)
    - interpolation (str; one of 'nearest', 'linear', 'cubic', 'area', 'lanczos4', 'linear_exact',
      'nearest_exact'; default 'linear')
    """
    params: dict[str, Any] = {'src': src, 'dst': dst, 'interpolation': interpolation}
    return soc.rpc(0x080e, list(inputs), list(outputs), params, options=options, **task)


def roi_resize(
        soc: Submitter[T],
        inputs: Sequence[Buffer],
        outputs: Sequence[Buffer],
        *,
        src: Any,
        dst: Any,
        roi: Sequence[int],
        keep_aspect: bool = False,
        interpolation: Literal[
            'nearest', 'linear', 'cubic', 'area', 'lanczos4', 'linear_exact', 'nearest_exact'
        ] = 'linear',
        pad_value: Sequence[int] | None = None,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Crop ``roi`` (inclusive, in the src region), scale it into dst; returns its rect [x, y, w, h].

    Operator 0x080f ``cv.roiResize``, buffers: 1..2 in, 1..2 out. Returns the submitted task (its values
    come from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``,
    ``priority``, ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - src (any; required): source image (image descriptor: format, width, height, stride, roi)
    - dst (any; required): destination image (image descriptor: format, width, height, stride, roi)
    - roi (int_list; 4 values; 0..; required): [left, top, right, bottom] inclusive
    - keep_aspect (bool; default False): false: stretch to dst; true: keep the aspect ratio, centred and
      padded
    - interpolation (str; one of 'nearest', 'linear', 'cubic', 'area', 'lanczos4', 'linear_exact',
      'nearest_exact'; default 'linear')
    - pad_value (int_list; 0..255; default None): one value per channel (Y, U, V for NV12); default
      black
    """
    params: dict[str, Any] = {
        'src': src,
        'dst': dst,
        'roi': list(roi),
        'keep_aspect': keep_aspect,
        'interpolation': interpolation,
    }
    if pad_value is not None:
        params['pad_value'] = list(pad_value)
    return soc.rpc(0x080f, list(inputs), list(outputs), params, options=options, **task)


def rotate(
        soc: Submitter[T],
        inputs: Sequence[Buffer],
        outputs: Sequence[Buffer],
        *,
        src: Any,
        dst: Any,
        rotate_code: Literal['90cw', '180', '90ccw'] = '90cw',
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Rotation by a multiple of 90 degrees (cv::rotate).

    Operator 0x0810 ``cv.rotate``, buffers: 1..2 in, 1..2 out. Returns the submitted task (its values
    come from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``,
    ``priority``, ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - src (any; required): source image (image descriptor: format, width, height, stride, roi)
    - dst (any; required): destination image (image descriptor: format, width, height, stride, roi)
    - rotate_code (str; one of '90cw', '180', '90ccw'; default '90cw')
    """
    params: dict[str, Any] = {'src': src, 'dst': dst, 'rotate_code': rotate_code}
    return soc.rpc(0x0810, list(inputs), list(outputs), params, options=options, **task)


def sep_filter2d(
        soc: Submitter[T],
        src_buf: Buffer,
        dst_buf: Buffer,
        *,
        src: Any,
        dst: Any,
        kernel_x: Sequence[float],
        kernel_y: Sequence[float],
        anchor: Sequence[int] = (-1, -1),
        delta: float = 0.0,
        border: Literal['reflect101', 'constant', 'replicate', 'reflect'] = 'reflect101',
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Separable filter (cv::sepFilter2D): rows by kernel_x, then columns by kernel_y.

    Operator 0x0811 ``cv.sepFilter2D``, buffers: 1 in, 1 out. Returns the submitted task (its values
    come from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``,
    ``priority``, ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - src (any; required): source image (image descriptor: format, width, height, stride, roi)
    - dst (any; required): destination image (image descriptor: format, width, height, stride, roi)
    - kernel_x (float_list; required): row kernel (1..255 coefficients)
    - kernel_y (float_list; required): column kernel (1..255 coefficients)
    - anchor (int_list; 2 values; -1..; default [-1, -1]): [x, y]; -1,-1 = centre
    - delta (float; default 0.0): added to every result
    - border (str; one of 'reflect101', 'constant', 'replicate', 'reflect'; default 'reflect101'):
      border extrapolation (OpenCV BORDER_*)
    """
    params: dict[str, Any] = {
        'src': src,
        'dst': dst,
        'kernel_x': list(kernel_x),
        'kernel_y': list(kernel_y),
        'anchor': list(anchor),
        'delta': delta,
        'border': border,
    }
    return soc.rpc(0x0811, [src_buf], [dst_buf], params, options=options, **task)


def sobel(
        soc: Submitter[T],
        src_buf: Buffer,
        dst_buf: Buffer,
        *,
        src: Any,
        dst: Any,
        dx: int = 1,
        dy: int = 0,
        ksize: int = 3,
        scale: float = 1.0,
        delta: float = 0.0,
        border: Literal['reflect101', 'constant', 'replicate', 'reflect'] = 'reflect101',
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Image derivative (cv::Sobel; ksize -1 = Scharr 3x3) into an S16, F32 or 8-bit image.

    Operator 0x0812 ``cv.sobel``, buffers: 1 in, 1 out. Returns the submitted task (its values come from
    ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``, ``priority``,
    ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - src (any; required): source image (image descriptor: format, width, height, stride, roi)
    - dst (any; required): destination image (image descriptor: format, width, height, stride, roi)
    - dx (int; 0..2; default 1)
    - dy (int; 0..2; default 0)
    - ksize (int; one of -1, 1, 3, 5, 7; default 3)
    - scale (float; default 1.0)
    - delta (float; default 0.0): added to every result
    - border (str; one of 'reflect101', 'constant', 'replicate', 'reflect'; default 'reflect101'):
      border extrapolation (OpenCV BORDER_*)
    """
    params: dict[str, Any] = {
        'src': src,
        'dst': dst,
        'dx': dx,
        'dy': dy,
        'ksize': ksize,
        'scale': scale,
        'delta': delta,
        'border': border,
    }
    return soc.rpc(0x0812, [src_buf], [dst_buf], params, options=options, **task)


def threshold(
        soc: Submitter[T],
        src_buf: Buffer,
        dst_buf: Buffer,
        *,
        src: Any,
        dst: Any,
        thresh: float = 127.0,
        maxval: float = 255.0,
        type: Literal['binary', 'binary_inv', 'trunc', 'tozero', 'tozero_inv'] = 'binary',
        method: Literal['fixed', 'otsu', 'triangle'] = 'fixed',
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Fixed-level threshold (cv::threshold); method otsu/triangle picks the level. Returns it.

    Operator 0x0813 ``cv.threshold``, buffers: 1 in, 1 out. Returns the submitted task (its values come
    from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``, ``priority``,
    ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - src (any; required): source image (image descriptor: format, width, height, stride, roi)
    - dst (any; required): destination image (image descriptor: format, width, height, stride, roi)
    - thresh (float; default 127.0)
    - maxval (float; default 255.0)
    - type (str; one of 'binary', 'binary_inv', 'trunc', 'tozero', 'tozero_inv'; default 'binary')
    - method (str; one of 'fixed', 'otsu', 'triangle'; default 'fixed'): fixed: use thresh;
      otsu/triangle: computed (8-bit only)
    """
    params: dict[str, Any] = {
        'src': src,
        'dst': dst,
        'thresh': thresh,
        'maxval': maxval,
        'type': type,
        'method': method,
    }
    return soc.rpc(0x0813, [src_buf], [dst_buf], params, options=options, **task)


def transpose(
        soc: Submitter[T],
        inputs: Sequence[Buffer],
        outputs: Sequence[Buffer],
        *,
        src: Any,
        dst: Any,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Swap rows and columns (cv::transpose).

    Operator 0x0814 ``cv.transpose``, buffers: 1..2 in, 1..2 out. Returns the submitted task (its values
    come from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``,
    ``priority``, ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - src (any; required): source image (image descriptor: format, width, height, stride, roi)
    - dst (any; required): destination image (image descriptor: format, width, height, stride, roi)
    """
    params: dict[str, Any] = {'src': src, 'dst': dst}
    return soc.rpc(0x0814, list(inputs), list(outputs), params, options=options, **task)


def warp_affine(
        soc: Submitter[T],
        src_buf: Buffer,
        dst_buf: Buffer,
        *,
        src: Any,
        dst: Any,
        matrix: Sequence[float],
        interpolation: Literal['nearest', 'linear', 'cubic', 'lanczos4'] = 'linear',
        inverse_map: bool = False,
        border: Literal['constant', 'replicate', 'reflect', 'wrap', 'reflect101', 'transparent'] = 'constant',
        border_value: float = 0.0,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Affine warp (cv::warpAffine) by a 2x3 matrix given row-major (6 values).

    Operator 0x0815 ``cv.warpAffine``, buffers: 1 in, 1 out. Returns the submitted task (its values come
    from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``, ``priority``,
    ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - src (any; required): source image (image descriptor: format, width, height, stride, roi)
    - dst (any; required): destination image (image descriptor: format, width, height, stride, roi)
    - matrix (float_list; 6 values; required): 2x3 row-major
    - interpolation (str; one of 'nearest', 'linear', 'cubic', 'lanczos4'; default 'linear')
    - inverse_map (bool; default False)
    - border (str; one of 'constant', 'replicate', 'reflect', 'wrap', 'reflect101', 'transparent';
      default 'constant'): border extrapolation (OpenCV BORDER_*)
    - border_value (float; default 0.0): value of constant borders
    """
    params: dict[str, Any] = {
        'src': src,
        'dst': dst,
        'matrix': list(matrix),
        'interpolation': interpolation,
        'inverse_map': inverse_map,
        'border': border,
        'border_value': border_value,
    }
    return soc.rpc(0x0815, [src_buf], [dst_buf], params, options=options, **task)


def warp_perspective(
        soc: Submitter[T],
        src_buf: Buffer,
        dst_buf: Buffer,
        *,
        src: Any,
        dst: Any,
        matrix: Sequence[float],
        interpolation: Literal['nearest', 'linear', 'cubic', 'lanczos4'] = 'linear',
        inverse_map: bool = False,
        border: Literal['constant', 'replicate', 'reflect', 'wrap', 'reflect101', 'transparent'] = 'constant',
        border_value: float = 0.0,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Perspective warp (cv::warpPerspective) by a 3x3 matrix given row-major (9 values).

    Operator 0x0816 ``cv.warpPerspective``, buffers: 1 in, 1 out. Returns the submitted task (its values
    come from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``,
    ``priority``, ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - src (any; required): source image (image descriptor: format, width, height, stride, roi)
    - dst (any; required): destination image (image descriptor: format, width, height, stride, roi)
    - matrix (float_list; 9 values; required): 3x3 row-major
    - interpolation (str; one of 'nearest', 'linear', 'cubic', 'lanczos4'; default 'linear')
    - inverse_map (bool; default False)
    - border (str; one of 'constant', 'replicate', 'reflect', 'wrap', 'reflect101', 'transparent';
      default 'constant'): border extrapolation (OpenCV BORDER_*)
    - border_value (float; default 0.0): value of constant borders
    """
    params: dict[str, Any] = {
        'src': src,
        'dst': dst,
        'matrix': list(matrix),
        'interpolation': interpolation,
        'inverse_map': inverse_map,
        'border': border,
        'border_value': border_value,
    }
    return soc.rpc(0x0816, [src_buf], [dst_buf], params, options=options, **task)


def corner_harris(
        soc: Submitter[T],
        src_buf: Buffer,
        dst_buf: Buffer,
        *,
        src: Any,
        dst: Any,
        block_size: int = 2,
        ksize: int = 3,
        k: float = 0.04,
        border: Literal['reflect101', 'constant', 'replicate', 'reflect'] = 'reflect101',
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Harris corner response (cv::cornerHarris) as an F32 image.

    Operator 0x0817 ``cv.cornerHarris``, buffers: 1 in, 1 out. Returns the submitted task (its values
    come from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``,
    ``priority``, ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - src (any; required): source image (image descriptor: format, width, height, stride, roi)
    - dst (any; required): destination image (image descriptor: format, width, height, stride, roi)
    - block_size (int; 1..31; default 2)
    - ksize (int; one of 1, 3, 5, 7; default 3)
    - k (float; 0.0..1.0; default 0.04)
    - border (str; one of 'reflect101', 'constant', 'replicate', 'reflect'; default 'reflect101'):
      border extrapolation (OpenCV BORDER_*)
    """
    params: dict[str, Any] = {
        'src': src,
        'dst': dst,
        'block_size': block_size,
        'ksize': ksize,
        'k': k,
        'border': border,
    }
    return soc.rpc(0x0817, [src_buf], [dst_buf], params, options=options, **task)


def remap(
        soc: Submitter[T],
        src0: Buffer,
        src1: Buffer,
        src2: Buffer,
        dst_buf: Buffer,
        *,
        src: Any,
        map_x: Any,
        map_y: Any,
        dst: Any,
        interpolation: Literal['nearest', 'linear', 'cubic', 'lanczos4'] = 'linear',
        border: Literal['constant', 'replicate', 'reflect', 'wrap', 'reflect101', 'transparent'] = 'constant',
        border_value: float = 0.0,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Generic remap (cv::remap): dst(x, y) = src(map_x(x, y), map_y(x, y)); maps are F32 images.

    Operator 0x0818 ``cv.remap``, buffers: 3 in, 1 out. Returns the submitted task (its values come from
    ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``, ``priority``,
    ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - src (any; required): source image (image descriptor: format, width, height, stride, roi)
    - map_x (any; required): F32 x coordinates, dst-sized
    - map_y (any; required): F32 y coordinates, dst-sized
    - dst (any; required): destination image (image descriptor: format, width, height, stride, roi)
    - interpolation (str; one of 'nearest', 'linear', 'cubic', 'lanczos4'; default 'linear')
    - border (str; one of 'constant', 'replicate', 'reflect', 'wrap', 'reflect101', 'transparent';
      default 'constant'): border extrapolation (OpenCV BORDER_*)
    - border_value (float; default 0.0): value of constant borders
    """
    params: dict[str, Any] = {
        'src': src,
        'map_x': map_x,
        'map_y': map_y,
        'dst': dst,
        'interpolation': interpolation,
        'border': border,
        'border_value': border_value,
    }
    return soc.rpc(0x0818, [src0, src1, src2], [dst_buf], params, options=options, **task)


def lut(
        soc: Submitter[T],
        src_buf: Buffer,
        dst_buf: Buffer,
        *,
        src: Any,
        dst: Any,
        table: Sequence[int],
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Table lookup (cv::LUT): every 8-bit value v of every channel becomes table[v].

    Operator 0x0819 ``cv.LUT``, buffers: 1 in, 1 out. Returns the submitted task (its values come from
    ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``, ``priority``,
    ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - src (any; required): source image (image descriptor: format, width, height, stride, roi)
    - dst (any; required): destination image (image descriptor: format, width, height, stride, roi)
    - table (int_list; 256 values; 0..255; required): the output for each value
    """
    params: dict[str, Any] = {'src': src, 'dst': dst, 'table': list(table)}
    return soc.rpc(0x0819, [src_buf], [dst_buf], params, options=options, **task)
