/*
 * hb_dnn.h: the model runtime of the simulated SoC (vdsp-sim) with the hbDNN* names, structs,
 * macros and codes of the BPU SDK API manual. The BPU part of a model runs on the host;
 * HB_DNN_ENABLE_DSP=1 runs its Quantize/Dequantize layers on the DSP cores, as arm_side.dnn does.
 * Link with libvdsp_hb (pkg-config vdsp-hb). docs/capi.md maps each function to its behaviour.
 */
#ifndef VDSP_HB_DNN_H_
#define VDSP_HB_DNN_H_

#include <stdint.h>

#include "hb_sys.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HB_DNN_VERSION_MAJOR 1U
#define HB_DNN_VERSION_MINOR 0U
#define HB_DNN_VERSION_PATCH 0U

/* Return codes (the manual's values). */
#define HB_DNN_SUCCESS 0
#define HB_DNN_INVALID_ARGUMENT (-6000001)
#define HB_DNN_INVALID_MODEL (-6000002)
#define HB_DNN_MODEL_NUMBER_EXCEED_LIMIT (-6000003)
#define HB_DNN_INVALID_PACKED_DNN_HANDLE (-6000004)
#define HB_DNN_INVALID_DNN_HANDLE (-6000005)
#define HB_DNN_CAN_NOT_OPEN_FILE (-6000006)
#define HB_DNN_OUT_OF_MEMORY (-6000007)
#define HB_DNN_TIMEOUT (-6000008)
#define HB_DNN_TASK_NUM_EXCEED_LIMIT (-6000009)
#define HB_DNN_TASK_BATCH_SIZE_EXCEED_LIMIT (-6000010)
#define HB_DNN_INVALID_TASK_HANDLE (-6000011)
#define HB_DNN_RUN_TASK_FAILED (-6000012)
#define HB_DNN_MODEL_IS_RUNNING (-6000013)
#define HB_DNN_INCOMPATIBLE_MODEL (-6000014)
#define HB_DNN_API_USE_ERROR (-6000015)
#define HB_DNN_MULTI_PROGRESS_USE_ERROR (-6000016)

#define HB_DNN_TENSOR_MAX_DIMENSIONS 8

#define HB_DNN_INITIALIZE_INFER_CTRL_PARAM(param) \
  {                                               \
    (param)->bpuCoreId = HB_BPU_CORE_ANY;         \
    (param)->priority = HB_DNN_PRIORITY_LOWEST;   \
    (param)->more = 0;                            \
    (param)->customId = 0;                        \
    (param)->reserved1 = 0;                       \
    (param)->reserved2 = 0;                       \
  }

typedef void *hbPackedDNNHandle_t; /* the models of one hbDNNInitializeFrom* call */
typedef void *hbDNNHandle_t;       /* one model */
typedef void *hbDNNTaskHandle_t;   /* one task: NULL before hbDNNInfer */

typedef void (*hbDNNTaskDoneCb)(hbDNNTaskHandle_t taskHandle, int32_t status, void *userdata);

typedef enum {
  HB_DNN_LAYOUT_NHWC = 0,
  HB_DNN_LAYOUT_NCHW = 2,
  HB_DNN_LAYOUT_NC1HWC2 = 3, /* the simulator's NN operators also take RKNPU's NC1HWC2 */
  HB_DNN_LAYOUT_NONE = 255
} hbDNNTensorLayout;

typedef enum {
  HB_DNN_IMG_TYPE_Y,
  HB_DNN_IMG_TYPE_NV12,
  HB_DNN_IMG_TYPE_NV12_SEPARATE,
  HB_DNN_IMG_TYPE_YUV444,
  HB_DNN_IMG_TYPE_RGB,
  HB_DNN_IMG_TYPE_BGR,
  HB_DNN_TENSOR_TYPE_S4,
  HB_DNN_TENSOR_TYPE_U4,
  HB_DNN_TENSOR_TYPE_S8,
  HB_DNN_TENSOR_TYPE_U8,
  HB_DNN_TENSOR_TYPE_F16,
  HB_DNN_TENSOR_TYPE_S16,
  HB_DNN_TENSOR_TYPE_U16,
  HB_DNN_TENSOR_TYPE_F32,
  HB_DNN_TENSOR_TYPE_S32,
  HB_DNN_TENSOR_TYPE_U32,
  HB_DNN_TENSOR_TYPE_F64,
  HB_DNN_TENSOR_TYPE_S64,
  HB_DNN_TENSOR_TYPE_U64,
  HB_DNN_TENSOR_TYPE_MAX
} hbDNNDataType;

typedef struct {
  int32_t dimensionSize[HB_DNN_TENSOR_MAX_DIMENSIONS];
  int32_t numDimensions;
} hbDNNTensorShape;

typedef struct {
  int32_t shiftLen;
  uint8_t *shiftData;
} hbDNNQuantiShift;

typedef struct {
  int32_t scaleLen;
  float *scaleData;
  int32_t zeroPointLen;
  int8_t *zeroPointData;
} hbDNNQuantiScale;

typedef enum {
  NONE,
  SHIFT,
  SCALE
} hbDNNQuantiType;

typedef struct {
  hbDNNTensorShape validShape;
  hbDNNTensorShape alignedShape;
  int32_t tensorLayout;
  int32_t tensorType;
  hbDNNQuantiShift shift;
  hbDNNQuantiScale scale;
  hbDNNQuantiType quantiType;
  int32_t quantizeAxis;
  int32_t alignedByteSize;
  int32_t stride[HB_DNN_TENSOR_MAX_DIMENSIONS];
} hbDNNTensorProperties;

typedef enum {
  HB_DNN_PRIORITY_LOWEST = 0,
  HB_DNN_PRIORITY_HIGHEST = 255,
  HB_DNN_PRIORITY_PREEMP = HB_DNN_PRIORITY_HIGHEST
} hbDNNTaskPriority;

typedef struct {
  hbSysMem sysMem[4]; /* sysMem[0] holds the tensor */
  hbDNNTensorProperties properties;
} hbDNNTensor;

typedef struct {
  int32_t left;
  int32_t top;
  int32_t right;
  int32_t bottom;
} hbDNNRoi;

typedef struct {
  int32_t bpuCoreId;
  int32_t priority;
  int32_t more;
  int64_t customId;
  int32_t reserved1;
  int32_t reserved2;
} hbDNNInferCtrlParam;

typedef enum {
  HB_BPU_CORE_ANY = 0,
  HB_BPU_CORE_0 = (1 << 0),
  HB_BPU_CORE_1 = (1 << 1)
} hbBPUCore;

/* A layer of your own, in C (the manual's creator returns a C++ hobot::dnn::Layer): the
 * runtime calls forward() for every inference of a model loaded after the registration, with
 * the layer's tensors in shared memory (read and write them through sysMem[0].virAddr: inputs
 * are invalidated before the call, outputs cleaned after it), and destroy() when the model is
 * released. forward returns 0 or a negative code, which fails the task. */
typedef struct hbDNNLayer hbDNNLayer;
struct hbDNNLayer {
  int32_t (*forward)(hbDNNLayer *self, hbDNNTensor const *inputs, int32_t inputCount, hbDNNTensor *outputs,
                     int32_t outputCount);
  void (*destroy)(hbDNNLayer *self); /* may be NULL */
  void *userdata;
};
typedef hbDNNLayer *(*hbDNNLayerCreator)(void);

char const *hbDNNGetVersion(void);

int32_t hbDNNInitializeFromFiles(hbPackedDNNHandle_t *packedDNNHandle, char const **modelFileNames,
                                 int32_t modelFileCount);
int32_t hbDNNInitializeFromDDR(hbPackedDNNHandle_t *packedDNNHandle, const void **modelData,
                               int32_t *modelDataLengths, int32_t modelDataCount);
int32_t hbDNNRelease(hbPackedDNNHandle_t packedDNNHandle);

int32_t hbDNNGetModelNameList(char const ***modelNameList, int32_t *modelNameCount,
                              hbPackedDNNHandle_t packedDNNHandle);
int32_t hbDNNGetModelHandle(hbDNNHandle_t *dnnHandle, hbPackedDNNHandle_t packedDNNHandle, char const *modelName);
int32_t hbDNNGetInputCount(int32_t *inputCount, hbDNNHandle_t dnnHandle);
int32_t hbDNNGetInputName(char const **name, hbDNNHandle_t dnnHandle, int32_t inputIndex);
int32_t hbDNNGetInputTensorProperties(hbDNNTensorProperties *properties, hbDNNHandle_t dnnHandle,
                                      int32_t inputIndex);
int32_t hbDNNGetOutputCount(int32_t *outputCount, hbDNNHandle_t dnnHandle);
int32_t hbDNNGetOutputName(char const **name, hbDNNHandle_t dnnHandle, int32_t outputIndex);
int32_t hbDNNGetOutputTensorProperties(hbDNNTensorProperties *properties, hbDNNHandle_t dnnHandle,
                                       int32_t outputIndex);

int32_t hbDNNInfer(hbDNNTaskHandle_t *taskHandle, hbDNNTensor **output, hbDNNTensor const *input,
                   hbDNNHandle_t dnnHandle, hbDNNInferCtrlParam *inferCtrlParam);
/* Not offered (the runtime has no resizer inputs): returns HB_DNN_API_USE_ERROR. */
int32_t hbDNNRoiInfer(hbDNNTaskHandle_t *taskHandle, hbDNNTensor **output, hbDNNTensor const *input,
                      hbDNNRoi *rois, int32_t roiCount, hbDNNHandle_t dnnHandle,
                      hbDNNInferCtrlParam *inferCtrlParam);
int32_t hbDNNWaitTaskDone(hbDNNTaskHandle_t taskHandle, int32_t timeout);
int32_t hbDNNReleaseTask(hbDNNTaskHandle_t taskHandle);
int32_t hbDNNSetTaskDoneCb(hbDNNTaskHandle_t taskHandle, hbDNNTaskDoneCb cb, void *userdata);

int32_t hbDNNRegisterLayerCreator(char const *layerType, hbDNNLayerCreator layerCreator);
int32_t hbDNNUnregisterLayerCreator(char const *layerType);

/* The code's name and meaning; for this thread's last failure, its message too (for example
 * what to start when no SoC runs). The text stays valid until at least 1024 other texts have
 * been returned. */
char const *hbDNNGetErrorDesc(int32_t errorCode);

#ifdef __cplusplus
}
#endif

#endif /* VDSP_HB_DNN_H_ */
