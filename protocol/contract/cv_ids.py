"""Command ids of the CV operators (range 0x0800-0x0fff) and their registry names.

Pure data: the ARM-side API imports it too, so both sides agree.
"""
BILATERAL_FILTER = 0x0800
BOX_FILTER = 0x0801
CANNY = 0x0802
CVT_COLOR = 0x0803
DILATE = 0x0804
EQUALIZE_HIST = 0x0805
ERODE = 0x0806
FILTER2D = 0x0807
FLIP = 0x0808
GAUSSIAN_BLUR = 0x0809
INTEGRAL = 0x080A
MEDIAN_BLUR = 0x080B
PYR_DOWN = 0x080C
PYR_UP = 0x080D
RESIZE = 0x080E
ROI_RESIZE = 0x080F
ROTATE = 0x0810
SEP_FILTER2D = 0x0811
SOBEL = 0x0812
THRESHOLD = 0x0813
TRANSPOSE = 0x0814
WARP_AFFINE = 0x0815
WARP_PERSPECTIVE = 0x0816
CORNER_HARRIS = 0x0817
REMAP = 0x0818

# J5 sample name -> command id, in the J5 sample's order.
BY_NAME = {
    "bilateralFilter": BILATERAL_FILTER, "boxFilter": BOX_FILTER, "canny": CANNY, "cvtColor": CVT_COLOR,
    "dilate": DILATE, "equalizeHist": EQUALIZE_HIST, "erode": ERODE, "filter2D": FILTER2D, "flip": FLIP,
    "gaussianBlur": GAUSSIAN_BLUR, "integral": INTEGRAL, "medianBlur": MEDIAN_BLUR, "pyrDown": PYR_DOWN,
    "pyrUp": PYR_UP, "resize": RESIZE, "roiResize": ROI_RESIZE, "rotate": ROTATE, "sepFilter2D": SEP_FILTER2D,
    "sobel": SOBEL, "threshold": THRESHOLD, "transpose": TRANSPOSE, "warpAffine": WARP_AFFINE,
    "warpPerspective": WARP_PERSPECTIVE, "cornerHarris": CORNER_HARRIS, "remap": REMAP,
}
