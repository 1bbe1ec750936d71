/*
 * hb_dsp_ops.h: the operators of the stock firmware, for hbDSPRpcV2 / hbDSPRpcV2Param.
 * Generated from the operator contract (protocol/contract) by python -m vdsp_sim.regen; do not edit.
 * Each operator with parameters has a struct hbDSP<Name>Param: initialize it with
 * HB_DSP_INITIALIZE_<NAME>_PARAM(&param) (the declared defaults), set what you need, and pass
 * it with sizeof(it) to hbDSPRpcV2Param. Ranges and choices are checked by the firmware.
 */
#ifndef VDSP_HB_DSP_OPS_H_
#define VDSP_HB_DSP_OPS_H_

#include <stdint.h>
#include <string.h>

#include "hb_dnn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Operator ids (rpcCmd). */
#define HB_DSP_OP_PING 0x0000                    /* ping */
#define HB_DSP_OP_MEMCPY 0x0001                  /* memcpy */
#define HB_DSP_OP_FILL 0x0002                    /* fill */
#define HB_DSP_OP_CHECKSUM 0x0003                /* checksum */
#define HB_DSP_OP_SLEEP 0x0004                   /* sleep */
#define HB_DSP_OP_COUNT 0x0005                   /* count */
#define HB_DSP_OP_QUANTIZE 0x0400                /* quantize */
#define HB_DSP_OP_DEQUANTIZE 0x0401              /* dequantize */
#define HB_DSP_OP_SOFTMAX 0x0402                 /* softmax */
#define HB_DSP_OP_LAYOUT 0x0403                  /* layout */
#define HB_DSP_OP_YOLOV3_DETECTION_OUTPUT 0x0410 /* yolov3_detection_output */
#define HB_DSP_OP_YOLO_DECODE 0x0411             /* yolo_decode */
#define HB_DSP_OP_YOLO_FILTER 0x0412             /* yolo_filter */
#define HB_DSP_OP_YOLO_NMS 0x0413                /* yolo_nms */
#define HB_DSP_OP_YOLO_TOPK 0x0414               /* yolo_topk */
#define HB_DSP_OP_POINTCLOUD_ENCODE 0x0600       /* pointcloud_encode */
#define HB_DSP_OP_POINTCLOUD_TRANSPOSE 0x0601    /* pointcloud_transpose */
#define HB_DSP_OP_BILATERAL_FILTER 0x0800        /* cv.bilateralFilter */
#define HB_DSP_OP_BOX_FILTER 0x0801              /* cv.boxFilter */
#define HB_DSP_OP_CANNY 0x0802                   /* cv.canny */
#define HB_DSP_OP_CVT_COLOR 0x0803               /* cv.cvtColor */
#define HB_DSP_OP_DILATE 0x0804                  /* cv.dilate */
#define HB_DSP_OP_EQUALIZE_HIST 0x0805           /* cv.equalizeHist */
#define HB_DSP_OP_ERODE 0x0806                   /* cv.erode */
#define HB_DSP_OP_FILTER2D 0x0807                /* cv.filter2D */
#define HB_DSP_OP_FLIP 0x0808                    /* cv.flip */
#define HB_DSP_OP_GAUSSIAN_BLUR 0x0809           /* cv.gaussianBlur */
#define HB_DSP_OP_INTEGRAL 0x080a                /* cv.integral */
#define HB_DSP_OP_MEDIAN_BLUR 0x080b             /* cv.medianBlur */
#define HB_DSP_OP_PYR_DOWN 0x080c                /* cv.pyrDown */
#define HB_DSP_OP_PYR_UP 0x080d                  /* cv.pyrUp */
#define HB_DSP_OP_RESIZE 0x080e                  /* cv.resize */
#define HB_DSP_OP_ROI_RESIZE 0x080f              /* cv.roiResize */
#define HB_DSP_OP_ROTATE 0x0810                  /* cv.rotate */
#define HB_DSP_OP_SEP_FILTER2D 0x0811            /* cv.sepFilter2D */
#define HB_DSP_OP_SOBEL 0x0812                   /* cv.sobel */
#define HB_DSP_OP_THRESHOLD 0x0813               /* cv.threshold */
#define HB_DSP_OP_TRANSPOSE 0x0814               /* cv.transpose */
#define HB_DSP_OP_WARP_AFFINE 0x0815             /* cv.warpAffine */
#define HB_DSP_OP_WARP_PERSPECTIVE 0x0816        /* cv.warpPerspective */
#define HB_DSP_OP_CORNER_HARRIS 0x0817           /* cv.cornerHarris */
#define HB_DSP_OP_REMAP 0x0818                   /* cv.remap */
#define HB_DSP_OP_LUT 0x0819                     /* cv.LUT */

typedef enum {
  HB_DSP_IMAGE_NONE = 0, /* no image: the parameter is not sent */
  HB_DSP_IMAGE_Y = 1,
  HB_DSP_IMAGE_U8 = 2,
  HB_DSP_IMAGE_U16 = 3,
  HB_DSP_IMAGE_S16 = 4,
  HB_DSP_IMAGE_S32 = 5,
  HB_DSP_IMAGE_F32 = 6,
  HB_DSP_IMAGE_RGB = 7,
  HB_DSP_IMAGE_BGR = 8,
  HB_DSP_IMAGE_YUV444 = 9,
  HB_DSP_IMAGE_NV12 = 10,
  HB_DSP_IMAGE_NV12_SEPARATE = 11
} hbDSPImageFormat;

/* A region of interest, inclusive: the operator sees only this rectangle. */
typedef struct {
  int32_t left;
  int32_t top;
  int32_t right;
  int32_t bottom;
} hbDSPRoi;

/* An image in shared memory, as the CV operators take it (see docs/cv.md for the layouts). */
typedef struct {
  int32_t format; /* hbDSPImageFormat */
  int32_t width;
  int32_t height;
  int32_t stride; /* bytes per row; 0: the smallest for the width */
  int32_t hasRoi; /* non-zero: roi applies */
  hbDSPRoi roi;
} hbDSPImage;


/* 0x0001 memcpy: Copy ``size`` bytes (default: all of the smaller buffer) from input 0 to output 0.
 * Buffers: 1 in, 1 out. */
typedef struct {
  int64_t size; /* bytes; -1 = whole buffer; -1..; default -1 */
} hbDSPMemcpyParam;
#define HB_DSP_INITIALIZE_MEMCPY_PARAM(param) \
  do {                                        \
    memset((param), 0, sizeof(*(param)));     \
    (param)->size = -1;                       \
  } while (0)

/* 0x0002 fill: Set ``size`` bytes of output 0 (default: all) to ``value``. Buffers: 0 in, 1 out. */
typedef struct {
  int64_t value; /* 0..255; required */
  int64_t size; /* bytes; -1 = whole buffer; -1..; default -1 */
} hbDSPFillParam;
#define HB_DSP_INITIALIZE_FILL_PARAM(param) \
  do {                                      \
    memset((param), 0, sizeof(*(param)));   \
    (param)->size = -1;                     \
  } while (0)

/* 0x0003 checksum: CRC-32 and byte sum of input 0 (read-only). Buffers: 1 in, 0 out. */
typedef struct {
  int64_t size; /* bytes; -1 = whole buffer; -1..; default -1 */
} hbDSPChecksumParam;
#define HB_DSP_INITIALIZE_CHECKSUM_PARAM(param) \
  do {                                          \
    memset((param), 0, sizeof(*(param)));       \
    (param)->size = -1;                         \
  } while (0)

/* 0x0004 sleep: Occupy the core for ``ms`` milliseconds (scheduling tests and load). Buffers: 0 in,
 * 0 out. */
typedef struct {
  double ms; /* 0.0..24000.0; required */
} hbDSPSleepParam;
#define HB_DSP_INITIALIZE_SLEEP_PARAM(param) \
  do {                                       \
    memset((param), 0, sizeof(*(param)));    \
  } while (0)

/* 0x0005 count: Add 1 to the uint32 counter ``slot`` of output 0, after ``ms`` of work; returns its
 * new value. Buffers: 0 in, 1 out. */
typedef struct {
  int64_t slot; /* 0..; required */
  double ms; /* 0.0..24000.0; default 0.0 */
} hbDSPCountParam;
#define HB_DSP_INITIALIZE_COUNT_PARAM(param) \
  do {                                       \
    memset((param), 0, sizeof(*(param)));    \
    (param)->ms = 0.0;                       \
  } while (0)

/* 0x0400 quantize: Quantize a float tensor into an integer tensor (SCALE or SHIFT), honouring both
 * descriptors' strides. Buffers: 1 in, 1 out. */
typedef struct {
  hbDNNTensorProperties input; /* tensor descriptor (hbDNNTensorProperties); required;
      validShape.numDimensions 0: not sent */
  hbDNNTensorProperties output; /* tensor descriptor (hbDNNTensorProperties); required;
      validShape.numDimensions 0: not sent */
} hbDSPQuantizeParam;
#define HB_DSP_INITIALIZE_QUANTIZE_PARAM(param) \
  do {                                          \
    memset((param), 0, sizeof(*(param)));       \
  } while (0)

/* 0x0401 dequantize: Dequantize an integer tensor (SCALE or SHIFT) into a float tensor, honouring
 * both descriptors' strides. Buffers: 1 in, 1 out. */
typedef struct {
  hbDNNTensorProperties input; /* tensor descriptor (hbDNNTensorProperties); required;
      validShape.numDimensions 0: not sent */
  hbDNNTensorProperties output; /* tensor descriptor (hbDNNTensorProperties); required;
      validShape.numDimensions 0: not sent */
} hbDSPDequantizeParam;
#define HB_DSP_INITIALIZE_DEQUANTIZE_PARAM(param) \
  do {                                            \
    memset((param), 0, sizeof(*(param)));         \
  } while (0)

/* 0x0402 softmax: Softmax of a float or quantised tensor along ``axis`` (negative counts from the
 * end). Buffers: 1 in, 1 out. */
typedef struct {
  hbDNNTensorProperties input; /* tensor descriptor (hbDNNTensorProperties); required;
      validShape.numDimensions 0: not sent */
  hbDNNTensorProperties output; /* tensor descriptor (hbDNNTensorProperties); required;
      validShape.numDimensions 0: not sent */
  int64_t axis; /* default -1 */
} hbDSPSoftmaxParam;
#define HB_DSP_INITIALIZE_SOFTMAX_PARAM(param) \
  do {                                         \
    memset((param), 0, sizeof(*(param)));      \
    (param)->axis = -1;                        \
  } while (0)

/* 0x0403 layout: Convert between NCHW, NHWC and NC1HWC2 (or repack one layout between strides).
 * Buffers: 1 in, 1 out. */
typedef struct {
  hbDNNTensorProperties input; /* tensor descriptor (hbDNNTensorProperties); required;
      validShape.numDimensions 0: not sent */
  hbDNNTensorProperties output; /* tensor descriptor (hbDNNTensorProperties); required;
      validShape.numDimensions 0: not sent */
  int64_t channels; /* C; -1 = from the NCHW/NHWC side; -1..; default -1 */
  char const *platform; /* check C2 against this platform's table; one of "", "RK2118", "RK3566", "RK3568",
      "RK3588", "RK3576", "RV1103B", "RV1106B", "RV1103", "RV1106", "RK3562"; default ""; NULL: not sent */
} hbDSPLayoutParam;
#define HB_DSP_INITIALIZE_LAYOUT_PARAM(param) \
  do {                                        \
    memset((param), 0, sizeof(*(param)));     \
    (param)->channels = -1;                   \
    (param)->platform = "";                   \
  } while (0)

/* 0x0410 yolov3_detection_output: Yolov3DetectionOutput: decode, filter, per-class NMS and top-k in
 * one task. Buffers: 1..7 in, 1 out. */
typedef struct {
  int64_t class_num; /* 1..4096; required */
  int64_t anchor_num; /* anchors per map; 1..16; required */
  int64_t const *map_w; /* W of each map; required; map_w_count values; NULL: not sent */
  int32_t map_w_count;
  int64_t const *map_h; /* H of each map; required; map_h_count values; NULL: not sent */
  int32_t map_h_count;
  int64_t net_w; /* 1..65536; required */
  int64_t net_h; /* 1..65536; required */
  double const *biases; /* anchor sizes [map][anchor][w, h] in network pixels; required; biases_count values;
      NULL: not sent */
  int32_t biases_count;
  int64_t batch; /* batches in this task; 1..65536; required */
  int64_t max_box_num; /* 1..65536; required */
  double confidence_thresh; /* 0.0..1.0; required */
  double nms_thresh; /* 0.0..1.0; required */
  int64_t batch_offset; /* batch index written in the records of the first batch; 0..; default 0 */
} hbDSPYolov3DetectionOutputParam;
#define HB_DSP_INITIALIZE_YOLOV3_DETECTION_OUTPUT_PARAM(param) \
  do {                                                         \
    memset((param), 0, sizeof(*(param)));                      \
    (param)->batch_offset = 0;                                 \
  } while (0)

/* 0x0411 yolo_decode: Chain step 1: every box of every map decoded to [batch, boxes, 5 + C]
 * float32. Buffers: 1..7 in, 1 out. */
typedef struct {
  int64_t class_num; /* 1..4096; required */
  int64_t anchor_num; /* anchors per map; 1..16; required */
  int64_t const *map_w; /* W of each map; required; map_w_count values; NULL: not sent */
  int32_t map_w_count;
  int64_t const *map_h; /* H of each map; required; map_h_count values; NULL: not sent */
  int32_t map_h_count;
  int64_t net_w; /* 1..65536; required */
  int64_t net_h; /* 1..65536; required */
  double const *biases; /* anchor sizes [map][anchor][w, h] in network pixels; required; biases_count values;
      NULL: not sent */
  int32_t biases_count;
  int64_t batch; /* batches in this task; 1..65536; required */
} hbDSPYoloDecodeParam;
#define HB_DSP_INITIALIZE_YOLO_DECODE_PARAM(param) \
  do {                                             \
    memset((param), 0, sizeof(*(param)));          \
  } while (0)

/* 0x0412 yolo_filter: Chain step 2: (box, class) candidates past the confidence threshold. Buffers:
 * 1 in, 1 out. */
typedef struct {
  int64_t class_num; /* 1..4096; required */
  int64_t boxes; /* 1..; required */
  double confidence_thresh; /* 0.0..1.0; required */
  int64_t capacity; /* records per batch block; 1..1048576; required */
  int64_t batch; /* batches in this task; 1..65536; required */
} hbDSPYoloFilterParam;
#define HB_DSP_INITIALIZE_YOLO_FILTER_PARAM(param) \
  do {                                             \
    memset((param), 0, sizeof(*(param)));          \
  } while (0)

/* 0x0413 yolo_nms: Chain step 3: greedy per-class NMS of candidate blocks. Buffers: 1 in, 1 out. */
typedef struct {
  double nms_thresh; /* 0.0..1.0; required */
  int64_t capacity; /* records per batch block; 1..1048576; required */
  int64_t batch; /* batches in this task; 1..65536; required */
} hbDSPYoloNmsParam;
#define HB_DSP_INITIALIZE_YOLO_NMS_PARAM(param) \
  do {                                          \
    memset((param), 0, sizeof(*(param)));       \
  } while (0)

/* 0x0414 yolo_topk: Chain step 4: the max_box_num best boxes in the Yolov3DetectionOutput result
 * format. Buffers: 1 in, 1 out. */
typedef struct {
  int64_t max_box_num; /* 1..65536; required */
  int64_t capacity; /* records per batch block; 1..1048576; required */
  int64_t batch; /* batches in this task; 1..65536; required */
  int64_t batch_offset; /* batch index written in the records of the first batch; 0..; default 0 */
} hbDSPYoloTopkParam;
#define HB_DSP_INITIALIZE_YOLO_TOPK_PARAM(param) \
  do {                                           \
    memset((param), 0, sizeof(*(param)));        \
    (param)->batch_offset = 0;                   \
  } while (0)

/* 0x0600 pointcloud_encode: pillar preprocessing stage 1: packed cell index and quantised features
 * per point Buffers: 1 in, 2..3 out. */
typedef struct {
  int64_t dim; /* values per point; one of 4, 5; required */
  int64_t num_points; /* points in input 0; 0..; required */
  double back; /* x lower bound (open); required */
  double front; /* x upper bound (open); required */
  double right; /* y lower bound (open); required */
  double left; /* y upper bound (open); required */
  double bottom; /* z lower bound (open); required */
  double top; /* z upper bound (open); required */
  double lower; /* intensity lower bound; required */
  double upper; /* intensity upper bound; required */
  double x_scale; /* cell size along x; required */
  double y_scale; /* cell size along y; required */
  double scale; /* input quantisation scale; required */
} hbDSPPointcloudEncodeParam;
#define HB_DSP_INITIALIZE_POINTCLOUD_ENCODE_PARAM(param) \
  do {                                                   \
    memset((param), 0, sizeof(*(param)));                \
  } while (0)

/* 0x0601 pointcloud_transpose: pillar preprocessing stage 2: pillar-major voxels -> model layout
 * Buffers: 1..2 in, 1 out. */
typedef struct {
  int64_t dim; /* one of 4, 5; required */
  char const *layout; /* cmp: [dim][M][stride]; cpm: [dim][stride][M]; one of "cmp", "cpm"; required; NULL:
      not sent */
  int64_t max_pillars; /* 1..; required */
  int64_t max_points; /* 1..; required */
  int64_t pillar_stride; /* allocated pillar axis length (>= max_pillars); 1..; required */
  int64_t num_pillars; /* pillars in use (<= max_pillars); 0..; required */
} hbDSPPointcloudTransposeParam;
#define HB_DSP_INITIALIZE_POINTCLOUD_TRANSPOSE_PARAM(param) \
  do {                                                      \
    memset((param), 0, sizeof(*(param)));                   \
  } while (0)

/* 0x0800 cv.bilateralFilter: Edge-preserving smoothing (cv::bilateralFilter) with a d x d
 * neighbourhood. Buffers: 1 in, 1 out. */
typedef struct {
  hbDSPImage src; /* source image (image descriptor: format, width, height, stride, roi); required; format 0:
      not sent */
  hbDSPImage dst; /* destination image (image descriptor: format, width, height, stride, roi); required;
      format 0: not sent */
  int64_t d; /* 1..31; default 5 */
  double sigma_color; /* 0.0..1000000.0; default 50.0 */
  double sigma_space; /* 0.0..1000000.0; default 50.0 */
  char const *border; /* border extrapolation (OpenCV BORDER_*); one of "reflect101", "constant", "replicate",
      "reflect", "wrap"; default "reflect101"; NULL: not sent */
} hbDSPBilateralFilterParam;
#define HB_DSP_INITIALIZE_BILATERAL_FILTER_PARAM(param) \
  do {                                                  \
    memset((param), 0, sizeof(*(param)));               \
    (param)->d = 5;                                     \
    (param)->sigma_color = 50.0;                        \
    (param)->sigma_space = 50.0;                        \
    (param)->border = "reflect101";                     \
  } while (0)

/* 0x0801 cv.boxFilter: Box filter (cv::boxFilter), normalized by default. Buffers: 1 in, 1 out. */
typedef struct {
  hbDSPImage src; /* source image (image descriptor: format, width, height, stride, roi); required; format 0:
      not sent */
  hbDSPImage dst; /* destination image (image descriptor: format, width, height, stride, roi); required;
      format 0: not sent */
  int64_t ksize[2]; /* kernel size [width, height]; 1..255; default {3, 3} */
  int32_t normalize; /* default 1 */
  int64_t anchor[2]; /* [x, y]; -1,-1 = centre; -1..; default {-1, -1} */
  char const *border; /* border extrapolation (OpenCV BORDER_*); one of "reflect101", "constant", "replicate",
      "reflect"; default "reflect101"; NULL: not sent */
} hbDSPBoxFilterParam;
#define HB_DSP_INITIALIZE_BOX_FILTER_PARAM(param) \
  do {                                            \
    memset((param), 0, sizeof(*(param)));         \
    (param)->ksize[0] = 3;                        \
    (param)->ksize[1] = 3;                        \
    (param)->normalize = 1;                       \
    (param)->anchor[0] = -1;                      \
    (param)->anchor[1] = -1;                      \
    (param)->border = "reflect101";               \
  } while (0)

/* 0x0802 cv.canny: Canny edges (cv::Canny): 255 on edges, 0 elsewhere. Buffers: 1 in, 1 out. */
typedef struct {
  hbDSPImage src; /* source image (image descriptor: format, width, height, stride, roi); required; format 0:
      not sent */
  hbDSPImage dst; /* destination image (image descriptor: format, width, height, stride, roi); required;
      format 0: not sent */
  double threshold1; /* hysteresis low; 0.0..1000000.0; default 100.0 */
  double threshold2; /* hysteresis high; 0.0..1000000.0; default 200.0 */
  int64_t aperture_size; /* one of 3, 5, 7; default 3 */
  int32_t l2_gradient; /* default 0 */
} hbDSPCannyParam;
#define HB_DSP_INITIALIZE_CANNY_PARAM(param) \
  do {                                       \
    memset((param), 0, sizeof(*(param)));    \
    (param)->threshold1 = 100.0;             \
    (param)->threshold2 = 200.0;             \
    (param)->aperture_size = 3;              \
    (param)->l2_gradient = 0;                \
  } while (0)

/* 0x0803 cv.cvtColor: RGB/BGR -> gray (cv::cvtColor) or -> NV12 / NV12_SEPARATE (BT.601 limited
 * range). Buffers: 1 in, 1..2 out. */
typedef struct {
  hbDSPImage src; /* source image (image descriptor: format, width, height, stride, roi); required; format 0:
      not sent */
  hbDSPImage dst; /* destination image (image descriptor: format, width, height, stride, roi); required;
      format 0: not sent */
  char const *code; /* one of "RGB2GRAY", "BGR2GRAY", "RGB2NV12", "BGR2NV12"; required; NULL: not sent */
  char const *chroma; /* NV12 chroma siting: a 2x2 block's top-left pixel, or its mean; one of "top_left",
      "average"; default "top_left"; NULL: not sent */
} hbDSPCvtColorParam;
#define HB_DSP_INITIALIZE_CVT_COLOR_PARAM(param) \
  do {                                           \
    memset((param), 0, sizeof(*(param)));        \
    (param)->chroma = "top_left";                \
  } while (0)

/* 0x0804 cv.dilate: Dilation (cv::dilate): local maximum over the structuring element. Buffers: 1
 * in, 1 out. */
typedef struct {
  hbDSPImage src; /* source image (image descriptor: format, width, height, stride, roi); required; format 0:
      not sent */
  hbDSPImage dst; /* destination image (image descriptor: format, width, height, stride, roi); required;
      format 0: not sent */
  char const *shape; /* one of "rect", "cross", "ellipse"; default "rect"; NULL: not sent */
  int64_t ksize[2]; /* structuring element size [width, height]; 1..255; default {3, 3} */
  int64_t anchor[2]; /* -1..; default {-1, -1} */
  int64_t iterations; /* 1..100; default 1 */
  char const *border; /* border extrapolation (OpenCV BORDER_*); one of "reflect101", "constant", "replicate",
      "reflect"; default "constant"; NULL: not sent */
} hbDSPDilateParam;
#define HB_DSP_INITIALIZE_DILATE_PARAM(param) \
  do {                                        \
    memset((param), 0, sizeof(*(param)));     \
    (param)->shape = "rect";                  \
    (param)->ksize[0] = 3;                    \
    (param)->ksize[1] = 3;                    \
    (param)->anchor[0] = -1;                  \
    (param)->anchor[1] = -1;                  \
    (param)->iterations = 1;                  \
    (param)->border = "constant";             \
  } while (0)

/* 0x0805 cv.equalizeHist: Histogram equalization of an 8-bit gray image (cv::equalizeHist).
 * Buffers: 1 in, 1 out. */
typedef struct {
  hbDSPImage src; /* source image (image descriptor: format, width, height, stride, roi); required; format 0:
      not sent */
  hbDSPImage dst; /* destination image (image descriptor: format, width, height, stride, roi); required;
      format 0: not sent */
} hbDSPEqualizeHistParam;
#define HB_DSP_INITIALIZE_EQUALIZE_HIST_PARAM(param) \
  do {                                               \
    memset((param), 0, sizeof(*(param)));            \
  } while (0)

/* 0x0806 cv.erode: Erosion (cv::erode): local minimum over the structuring element. Buffers: 1 in,
 * 1 out. */
typedef struct {
  hbDSPImage src; /* source image (image descriptor: format, width, height, stride, roi); required; format 0:
      not sent */
  hbDSPImage dst; /* destination image (image descriptor: format, width, height, stride, roi); required;
      format 0: not sent */
  char const *shape; /* one of "rect", "cross", "ellipse"; default "rect"; NULL: not sent */
  int64_t ksize[2]; /* structuring element size [width, height]; 1..255; default {3, 3} */
  int64_t anchor[2]; /* -1..; default {-1, -1} */
  int64_t iterations; /* 1..100; default 1 */
  char const *border; /* border extrapolation (OpenCV BORDER_*); one of "reflect101", "constant", "replicate",
      "reflect"; default "constant"; NULL: not sent */
} hbDSPErodeParam;
#define HB_DSP_INITIALIZE_ERODE_PARAM(param) \
  do {                                       \
    memset((param), 0, sizeof(*(param)));    \
    (param)->shape = "rect";                 \
    (param)->ksize[0] = 3;                   \
    (param)->ksize[1] = 3;                   \
    (param)->anchor[0] = -1;                 \
    (param)->anchor[1] = -1;                 \
    (param)->iterations = 1;                 \
    (param)->border = "constant";            \
  } while (0)

/* 0x0807 cv.filter2D: Correlation with an arbitrary kernel (cv::filter2D); kernel row-major, ksize
 * [w, h]. Buffers: 1 in, 1 out. */
typedef struct {
  hbDSPImage src; /* source image (image descriptor: format, width, height, stride, roi); required; format 0:
      not sent */
  hbDSPImage dst; /* destination image (image descriptor: format, width, height, stride, roi); required;
      format 0: not sent */
  double const *kernel; /* kernel coefficients; required; kernel_count values; NULL: not sent */
  int32_t kernel_count;
  int64_t ksize[2]; /* kernel size [width, height]; 1..255; required */
  int64_t anchor[2]; /* [x, y]; -1,-1 = centre; -1..; default {-1, -1} */
  double delta; /* added to every result; default 0.0 */
  char const *border; /* border extrapolation (OpenCV BORDER_*); one of "reflect101", "constant", "replicate",
      "reflect"; default "reflect101"; NULL: not sent */
} hbDSPFilter2dParam;
#define HB_DSP_INITIALIZE_FILTER2D_PARAM(param) \
  do {                                          \
    memset((param), 0, sizeof(*(param)));       \
    (param)->anchor[0] = -1;                    \
    (param)->anchor[1] = -1;                    \
    (param)->delta = 0.0;                       \
    (param)->border = "reflect101";             \
  } while (0)

/* 0x0808 cv.flip: Mirror (cv::flip): 0 around the x axis, 1 around the y axis, -1 both. Buffers:
 * 1..2 in, 1..2 out. */
typedef struct {
  hbDSPImage src; /* source image (image descriptor: format, width, height, stride, roi); required; format 0:
      not sent */
  hbDSPImage dst; /* destination image (image descriptor: format, width, height, stride, roi); required;
      format 0: not sent */
  int64_t flip_code; /* one of 0, 1, -1; default 1 */
} hbDSPFlipParam;
#define HB_DSP_INITIALIZE_FLIP_PARAM(param) \
  do {                                      \
    memset((param), 0, sizeof(*(param)));   \
    (param)->flip_code = 1;                 \
  } while (0)

/* 0x0809 cv.gaussianBlur: Gaussian smoothing (cv::GaussianBlur); ksize odd, sigma 0 = derived from
 * ksize. Buffers: 1 in, 1 out. */
typedef struct {
  hbDSPImage src; /* source image (image descriptor: format, width, height, stride, roi); required; format 0:
      not sent */
  hbDSPImage dst; /* destination image (image descriptor: format, width, height, stride, roi); required;
      format 0: not sent */
  int64_t ksize[2]; /* kernel size, odd [width, height]; 1..255; odd; default {5, 5} */
  double sigma_x; /* 0.0..1000.0; default 0.0 */
  double sigma_y; /* 0.0..1000.0; default 0.0 */
  char const *border; /* border extrapolation (OpenCV BORDER_*); one of "reflect101", "constant", "replicate",
      "reflect"; default "reflect101"; NULL: not sent */
} hbDSPGaussianBlurParam;
#define HB_DSP_INITIALIZE_GAUSSIAN_BLUR_PARAM(param) \
  do {                                               \
    memset((param), 0, sizeof(*(param)));            \
    (param)->ksize[0] = 5;                           \
    (param)->ksize[1] = 5;                           \
    (param)->sigma_x = 0.0;                          \
    (param)->sigma_y = 0.0;                          \
    (param)->border = "reflect101";                  \
  } while (0)

/* 0x080a cv.integral: Integral image (cv::integral): dst is (w+1) x (h+1), S32 or F32, first row
 * and column 0. Buffers: 1 in, 1 out. */
typedef struct {
  hbDSPImage src; /* source image (image descriptor: format, width, height, stride, roi); required; format 0:
      not sent */
  hbDSPImage dst; /* destination image (image descriptor: format, width, height, stride, roi); required;
      format 0: not sent */
} hbDSPIntegralParam;
#define HB_DSP_INITIALIZE_INTEGRAL_PARAM(param) \
  do {                                          \
    memset((param), 0, sizeof(*(param)));       \
  } while (0)

/* 0x080b cv.medianBlur: Median filter (cv::medianBlur) over a ksize x ksize square, ksize odd.
 * Buffers: 1 in, 1 out. */
typedef struct {
  hbDSPImage src; /* source image (image descriptor: format, width, height, stride, roi); required; format 0:
      not sent */
  hbDSPImage dst; /* destination image (image descriptor: format, width, height, stride, roi); required;
      format 0: not sent */
  int64_t ksize; /* 1..255; odd; default 3 */
} hbDSPMedianBlurParam;
#define HB_DSP_INITIALIZE_MEDIAN_BLUR_PARAM(param) \
  do {                                             \
    memset((param), 0, sizeof(*(param)));          \
    (param)->ksize = 3;                            \
  } while (0)

/* 0x080c cv.pyrDown: Gaussian pyramid step down (cv::pyrDown, 5x5 kernel, BORDER_REFLECT_101).
 * Buffers: 1..2 in, 1..2 out. */
typedef struct {
  hbDSPImage src; /* source image (image descriptor: format, width, height, stride, roi); required; format 0:
      not sent */
  hbDSPImage dst; /* destination image (image descriptor: format, width, height, stride, roi); required;
      format 0: not sent */
} hbDSPPyrDownParam;
#define HB_DSP_INITIALIZE_PYR_DOWN_PARAM(param) \
  do {                                          \
    memset((param), 0, sizeof(*(param)));       \
  } while (0)

/* 0x080d cv.pyrUp: Gaussian pyramid step up (cv::pyrUp, BORDER_REFLECT_101). Buffers: 1..2 in, 1..2
 * out. */
typedef struct {
  hbDSPImage src; /* source image (image descriptor: format, width, height, stride, roi); required; format 0:
      not sent */
  hbDSPImage dst; /* destination image (image descriptor: format, width, height, stride, roi); required;
      format 0: not sent */
} hbDSPPyrUpParam;
#define HB_DSP_INITIALIZE_PYR_UP_PARAM(param) \
  do {                                        \
    memset((param), 0, sizeof(*(param)));     \
  } while (0)

/* 0x080e cv.resize: Scale the src region to the dst region's size (cv::resize). Buffers: 1..2 in,
 * 1..2 out. */
typedef struct {
  hbDSPImage src; /* source image (image descriptor: format, width, height, stride, roi); required; format 0:
      not sent */
  hbDSPImage dst; /* destination image (image descriptor: format, width, height, stride, roi); required;
      format 0: not sent */
  char const *interpolation; /* one of "nearest", "linear", "cubic", "area", "lanczos4", "linear_exact",
      "nearest_exact"; default "linear"; NULL: not sent */
} hbDSPResizeParam;
#define HB_DSP_INITIALIZE_RESIZE_PARAM(param) \
  do {                                        \
    memset((param), 0, sizeof(*(param)));     \
    (param)->interpolation = "linear";        \
  } while (0)

/* 0x080f cv.roiResize: Crop ``roi`` (inclusive, in the src region), scale it into dst; returns its
 * rect [x, y, w, h]. Buffers: 1..2 in, 1..2 out. */
typedef struct {
  hbDSPImage src; /* source image (image descriptor: format, width, height, stride, roi); required; format 0:
      not sent */
  hbDSPImage dst; /* destination image (image descriptor: format, width, height, stride, roi); required;
      format 0: not sent */
  int64_t roi[4]; /* [left, top, right, bottom] inclusive; 0..; required */
  int32_t keep_aspect; /* false: stretch to dst; true: keep the aspect ratio, centred and padded; default 0 */
  char const *interpolation; /* one of "nearest", "linear", "cubic", "area", "lanczos4", "linear_exact",
      "nearest_exact"; default "linear"; NULL: not sent */
  int64_t const *pad_value; /* one value per channel (Y, U, V for NV12); default black; 0..255; default: not
      sent; pad_value_count values; NULL: not sent */
  int32_t pad_value_count;
} hbDSPRoiResizeParam;
#define HB_DSP_INITIALIZE_ROI_RESIZE_PARAM(param) \
  do {                                            \
    memset((param), 0, sizeof(*(param)));         \
    (param)->keep_aspect = 0;                     \
    (param)->interpolation = "linear";            \
  } while (0)

/* 0x0810 cv.rotate: Rotation by a multiple of 90 degrees (cv::rotate). Buffers: 1..2 in, 1..2 out. */
typedef struct {
  hbDSPImage src; /* source image (image descriptor: format, width, height, stride, roi); required; format 0:
      not sent */
  hbDSPImage dst; /* destination image (image descriptor: format, width, height, stride, roi); required;
      format 0: not sent */
  char const *rotate_code; /* one of "90cw", "180", "90ccw"; default "90cw"; NULL: not sent */
} hbDSPRotateParam;
#define HB_DSP_INITIALIZE_ROTATE_PARAM(param) \
  do {                                        \
    memset((param), 0, sizeof(*(param)));     \
    (param)->rotate_code = "90cw";            \
  } while (0)

/* 0x0811 cv.sepFilter2D: Separable filter (cv::sepFilter2D): rows by kernel_x, then columns by
 * kernel_y. Buffers: 1 in, 1 out. */
typedef struct {
  hbDSPImage src; /* source image (image descriptor: format, width, height, stride, roi); required; format 0:
      not sent */
  hbDSPImage dst; /* destination image (image descriptor: format, width, height, stride, roi); required;
      format 0: not sent */
  double const *kernel_x; /* row kernel (1..255 coefficients); required; kernel_x_count values; NULL: not sent
      */
  int32_t kernel_x_count;
  double const *kernel_y; /* column kernel (1..255 coefficients); required; kernel_y_count values; NULL: not
      sent */
  int32_t kernel_y_count;
  int64_t anchor[2]; /* [x, y]; -1,-1 = centre; -1..; default {-1, -1} */
  double delta; /* added to every result; default 0.0 */
  char const *border; /* border extrapolation (OpenCV BORDER_*); one of "reflect101", "constant", "replicate",
      "reflect"; default "reflect101"; NULL: not sent */
} hbDSPSepFilter2dParam;
#define HB_DSP_INITIALIZE_SEP_FILTER2D_PARAM(param) \
  do {                                              \
    memset((param), 0, sizeof(*(param)));           \
    (param)->anchor[0] = -1;                        \
    (param)->anchor[1] = -1;                        \
    (param)->delta = 0.0;                           \
    (param)->border = "reflect101";                 \
  } while (0)

/* 0x0812 cv.sobel: Image derivative (cv::Sobel; ksize -1 = Scharr 3x3) into an S16, F32 or 8-bit
 * image. Buffers: 1 in, 1 out. */
typedef struct {
  hbDSPImage src; /* source image (image descriptor: format, width, height, stride, roi); required; format 0:
      not sent */
  hbDSPImage dst; /* destination image (image descriptor: format, width, height, stride, roi); required;
      format 0: not sent */
  int64_t dx; /* 0..2; default 1 */
  int64_t dy; /* 0..2; default 0 */
  int64_t ksize; /* one of -1, 1, 3, 5, 7; default 3 */
  double scale; /* default 1.0 */
  double delta; /* added to every result; default 0.0 */
  char const *border; /* border extrapolation (OpenCV BORDER_*); one of "reflect101", "constant", "replicate",
      "reflect"; default "reflect101"; NULL: not sent */
} hbDSPSobelParam;
#define HB_DSP_INITIALIZE_SOBEL_PARAM(param) \
  do {                                       \
    memset((param), 0, sizeof(*(param)));    \
    (param)->dx = 1;                         \
    (param)->dy = 0;                         \
    (param)->ksize = 3;                      \
    (param)->scale = 1.0;                    \
    (param)->delta = 0.0;                    \
    (param)->border = "reflect101";          \
  } while (0)

/* 0x0813 cv.threshold: Fixed-level threshold (cv::threshold); method otsu/triangle picks the level.
 * Returns it. Buffers: 1 in, 1 out. */
typedef struct {
  hbDSPImage src; /* source image (image descriptor: format, width, height, stride, roi); required; format 0:
      not sent */
  hbDSPImage dst; /* destination image (image descriptor: format, width, height, stride, roi); required;
      format 0: not sent */
  double thresh; /* default 127.0 */
  double maxval; /* default 255.0 */
  char const *type; /* one of "binary", "binary_inv", "trunc", "tozero", "tozero_inv"; default "binary"; NULL:
      not sent */
  char const *method; /* fixed: use thresh; otsu/triangle: computed (8-bit only); one of "fixed", "otsu",
      "triangle"; default "fixed"; NULL: not sent */
} hbDSPThresholdParam;
#define HB_DSP_INITIALIZE_THRESHOLD_PARAM(param) \
  do {                                           \
    memset((param), 0, sizeof(*(param)));        \
    (param)->thresh = 127.0;                     \
    (param)->maxval = 255.0;                     \
    (param)->type = "binary";                    \
    (param)->method = "fixed";                   \
  } while (0)

/* 0x0814 cv.transpose: Swap rows and columns (cv::transpose). Buffers: 1..2 in, 1..2 out. */
typedef struct {
  hbDSPImage src; /* source image (image descriptor: format, width, height, stride, roi); required; format 0:
      not sent */
  hbDSPImage dst; /* destination image (image descriptor: format, width, height, stride, roi); required;
      format 0: not sent */
} hbDSPTransposeParam;
#define HB_DSP_INITIALIZE_TRANSPOSE_PARAM(param) \
  do {                                           \
    memset((param), 0, sizeof(*(param)));        \
  } while (0)

/* 0x0815 cv.warpAffine: Affine warp (cv::warpAffine) by a 2x3 matrix given row-major (6 values).
 * Buffers: 1 in, 1 out. */
typedef struct {
  hbDSPImage src; /* source image (image descriptor: format, width, height, stride, roi); required; format 0:
      not sent */
  hbDSPImage dst; /* destination image (image descriptor: format, width, height, stride, roi); required;
      format 0: not sent */
  double matrix[6]; /* 2x3 row-major; required */
  char const *interpolation; /* one of "nearest", "linear", "cubic", "lanczos4"; default "linear"; NULL: not
      sent */
  int32_t inverse_map; /* default 0 */
  char const *border; /* border extrapolation (OpenCV BORDER_*); one of "constant", "replicate", "reflect",
      "wrap", "reflect101", "transparent"; default "constant"; NULL: not sent */
  double border_value; /* value of constant borders; default 0.0 */
} hbDSPWarpAffineParam;
#define HB_DSP_INITIALIZE_WARP_AFFINE_PARAM(param) \
  do {                                             \
    memset((param), 0, sizeof(*(param)));          \
    (param)->interpolation = "linear";             \
    (param)->inverse_map = 0;                      \
    (param)->border = "constant";                  \
    (param)->border_value = 0.0;                   \
  } while (0)

/* 0x0816 cv.warpPerspective: Perspective warp (cv::warpPerspective) by a 3x3 matrix given row-major
 * (9 values). Buffers: 1 in, 1 out. */
typedef struct {
  hbDSPImage src; /* source image (image descriptor: format, width, height, stride, roi); required; format 0:
      not sent */
  hbDSPImage dst; /* destination image (image descriptor: format, width, height, stride, roi); required;
      format 0: not sent */
  double matrix[9]; /* 3x3 row-major; required */
  char const *interpolation; /* one of "nearest", "linear", "cubic", "lanczos4"; default "linear"; NULL: not
      sent */
  int32_t inverse_map; /* default 0 */
  char const *border; /* border extrapolation (OpenCV BORDER_*); one of "constant", "replicate", "reflect",
      "wrap", "reflect101", "transparent"; default "constant"; NULL: not sent */
  double border_value; /* value of constant borders; default 0.0 */
} hbDSPWarpPerspectiveParam;
#define HB_DSP_INITIALIZE_WARP_PERSPECTIVE_PARAM(param) \
  do {                                                  \
    memset((param), 0, sizeof(*(param)));               \
    (param)->interpolation = "linear";                  \
    (param)->inverse_map = 0;                           \
    (param)->border = "constant";                       \
    (param)->border_value = 0.0;                        \
  } while (0)

/* 0x0817 cv.cornerHarris: Harris corner response (cv::cornerHarris) as an F32 image. Buffers: 1 in,
 * 1 out. */
typedef struct {
  hbDSPImage src; /* source image (image descriptor: format, width, height, stride, roi); required; format 0:
      not sent */
  hbDSPImage dst; /* destination image (image descriptor: format, width, height, stride, roi); required;
      format 0: not sent */
  int64_t block_size; /* 1..31; default 2 */
  int64_t ksize; /* one of 1, 3, 5, 7; default 3 */
  double k; /* 0.0..1.0; default 0.04 */
  char const *border; /* border extrapolation (OpenCV BORDER_*); one of "reflect101", "constant", "replicate",
      "reflect"; default "reflect101"; NULL: not sent */
} hbDSPCornerHarrisParam;
#define HB_DSP_INITIALIZE_CORNER_HARRIS_PARAM(param) \
  do {                                               \
    memset((param), 0, sizeof(*(param)));            \
    (param)->block_size = 2;                         \
    (param)->ksize = 3;                              \
    (param)->k = 0.04;                               \
    (param)->border = "reflect101";                  \
  } while (0)

/* 0x0818 cv.remap: Generic remap (cv::remap): dst(x, y) = src(map_x(x, y), map_y(x, y)); maps are
 * F32 images. Buffers: 3 in, 1 out. */
typedef struct {
  hbDSPImage src; /* source image (image descriptor: format, width, height, stride, roi); required; format 0:
      not sent */
  hbDSPImage map_x; /* F32 x coordinates, dst-sized; required; format 0: not sent */
  hbDSPImage map_y; /* F32 y coordinates, dst-sized; required; format 0: not sent */
  hbDSPImage dst; /* destination image (image descriptor: format, width, height, stride, roi); required;
      format 0: not sent */
  char const *interpolation; /* one of "nearest", "linear", "cubic", "lanczos4"; default "linear"; NULL: not
      sent */
  char const *border; /* border extrapolation (OpenCV BORDER_*); one of "constant", "replicate", "reflect",
      "wrap", "reflect101", "transparent"; default "constant"; NULL: not sent */
  double border_value; /* value of constant borders; default 0.0 */
} hbDSPRemapParam;
#define HB_DSP_INITIALIZE_REMAP_PARAM(param) \
  do {                                       \
    memset((param), 0, sizeof(*(param)));    \
    (param)->interpolation = "linear";       \
    (param)->border = "constant";            \
    (param)->border_value = 0.0;             \
  } while (0)

/* 0x0819 cv.LUT: Table lookup (cv::LUT): every 8-bit value v of every channel becomes table[v].
 * Buffers: 1 in, 1 out. */
typedef struct {
  hbDSPImage src; /* source image (image descriptor: format, width, height, stride, roi); required; format 0:
      not sent */
  hbDSPImage dst; /* destination image (image descriptor: format, width, height, stride, roi); required;
      format 0: not sent */
  int64_t table[256]; /* the output for each value; 0..255; required */
} hbDSPLutParam;
#define HB_DSP_INITIALIZE_LUT_PARAM(param) \
  do {                                     \
    memset((param), 0, sizeof(*(param)));  \
  } while (0)

#ifdef __cplusplus
}
#endif

#endif /* VDSP_HB_DSP_OPS_H_ */
