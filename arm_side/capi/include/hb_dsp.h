/*
 * hb_dsp.h: DSP RPC of the simulated SoC (vdsp-sim) with the J5 DSP SDK's names: submit an
 * operator of the firmware on vdsp0/vdsp1 (hbDSPRpcV2), wait for it, release it.
 * hb_dsp_ops.h (included) holds every operator id of the stock firmware and one parameter
 * struct per operator, generated from the operator contract.
 * Link with libvdsp_hb (pkg-config vdsp-hb). docs/capi.md maps each function to its behaviour.
 */
#ifndef VDSP_HB_DSP_H_
#define VDSP_HB_DSP_H_

#include <stdint.h>

#include "hb_sys.h"
#include "hb_dnn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void *hbDSPTask_t; /* one submitted task: NULL before hbDSPRpcV2 */

typedef enum {
  HB_DSP_CORE_ANY = 0, /* the relay picks (direct mode: vdsp0) */
  HB_DSP_CORE_0 = 1,   /* vdsp0 */
  HB_DSP_CORE_1 = 2    /* vdsp1 */
} hbDSPCore;

typedef enum {
  HB_DSP_PRIORITY_LOWEST = 0,
  HB_DSP_PRIORITY_HIGHEST = 255, /* pre-emptive: jumps the queue */
  HB_DSP_PRIORITY_PREEMP = HB_DSP_PRIORITY_HIGHEST
} hbDSPTaskPriority;

/* Where and how urgently a task runs: among equal priorities a smaller customId goes first. */
typedef struct {
  int32_t dspCoreId;
  int32_t priority;
  int64_t customId;
  int32_t reserved1;
  int32_t reserved2;
} hbDSPRpcCtrlParam;

#define HB_DSP_INITIALIZE_RPC_CTRL_PARAM(param) \
  {                                             \
    (param)->dspCoreId = HB_DSP_CORE_ANY;       \
    (param)->priority = HB_DSP_PRIORITY_LOWEST; \
    (param)->customId = 0;                      \
    (param)->reserved1 = 0;                     \
    (param)->reserved2 = 0;                     \
  }

/* Parameters packed into the input, as the J5 sample packs them (docs/capi.md shows each
 * operator's layout): hbDSPRpcV2's input holds the operator's struct of hb_dsp_ops.h at byte 0,
 * then its data from the struct's end rounded up to HB_DSP_PACKED_ALIGN bytes. An operator that
 * takes more than one input or output buffer has an hbDSPPackedBuffers right after its struct:
 * how many buffers the data and the output hold and their sizes, each buffer from an
 * HB_DSP_PACKED_ALIGN boundary (counts 0: one, the whole data / the whole output). */
#define HB_DSP_PACKED_ALIGN 64
#define HB_DSP_PACKED_MAX_BUFFERS 8
#define HB_DSP_PACKED_DATA(structSize) \
  (((structSize) + HB_DSP_PACKED_ALIGN - 1) / HB_DSP_PACKED_ALIGN * HB_DSP_PACKED_ALIGN)
typedef struct {
  uint32_t inputCount;  /* 0: one input, the data to the end of the input */
  uint32_t outputCount; /* 0: one output, the whole output buffer */
  uint32_t inputSize[HB_DSP_PACKED_MAX_BUFFERS];
  uint32_t outputSize[HB_DSP_PACKED_MAX_BUFFERS];
} hbDSPPackedBuffers;

/* Submit operator rpcCmd on one input and one output buffer (NULL: none); *task receives the
 * handle. An operator with a struct in hb_dsp_ops.h reads its parameters packed in the input
 * (above); one without (ping, custom operators) gets the buffers as they are and no parameters.
 * ctrl NULL: any core, lowest priority. */
int32_t hbDSPRpcV2(hbDSPTask_t *task, hbSysMem *input, hbSysMem *output, int32_t rpcCmd,
                   hbDSPRpcCtrlParam *ctrl);
/* > 0: wait that many ms (HB_DNN_TIMEOUT after it, the task goes on); <= 0: for ever.
 * A task that failed returns its error's code. */
int32_t hbDSPWaitTaskDone(hbDSPTask_t task, int32_t timeout_ms);
/* A queued task never runs, a running one's result is dropped; the handle is invalid after. */
int32_t hbDSPReleaseTask(hbDSPTask_t task);

/* The simulator's additions (the parameters travel beside the buffers):
 * hbDSPRpcV2Param: any number of inputs and outputs (arrays of inputCount / outputCount
 * hbSysMem), and the operator's parameter struct of hb_dsp_ops.h (param NULL: none; paramSize
 * must be sizeof the operator's struct, e.g. sizeof(hbDSPGaussianBlurParam)). */
int32_t hbDSPRpcV2Param(hbDSPTask_t *task, hbSysMem *inputs, int32_t inputCount, hbSysMem *outputs,
                        int32_t outputCount, int32_t rpcCmd, void const *param, uint32_t paramSize,
                        hbDSPRpcCtrlParam *ctrl);
/* The same with the parameters as a JSON object (any operator, custom ones included), e.g.
 * "{\"value\": 7}"; NULL: none. */
int32_t hbDSPRpcV2Json(hbDSPTask_t *task, hbSysMem *inputs, int32_t inputCount, hbSysMem *outputs,
                       int32_t outputCount, int32_t rpcCmd, char const *paramJson, hbDSPRpcCtrlParam *ctrl);
/* After hbDSPWaitTaskDone returned 0: a result value of the operator by name (e.g. "crc32" of
 * checksum, "level" of threshold), as an integer or a number; HB_DNN_INVALID_ARGUMENT when the
 * task has no such value or it is not a number. */
int32_t hbDSPGetTaskValueInt(hbDSPTask_t task, char const *name, int64_t *value);
int32_t hbDSPGetTaskValueDouble(hbDSPTask_t task, char const *name, double *value);
/* All result values as a JSON object, NUL-terminated in buf (HB_DNN_INVALID_ARGUMENT when
 * bufSize is too small); the core that ran the task: HB_DSP_CORE_0 or HB_DSP_CORE_1. */
int32_t hbDSPGetTaskValuesJson(hbDSPTask_t task, char *buf, uint32_t bufSize);
int32_t hbDSPGetTaskCore(hbDSPTask_t task, int32_t *dspCoreId);
/* After hbDSPWaitTaskDone returned 0: the firmware's estimate of the task's time on a J5 DSP, in
 * microseconds (docs/dsp_kernels.md, "Board time"), and in *counted (may be NULL) 1 when it was
 * counted from a C kernel's work, 0 when it comes from a Python operator's table entry;
 * HB_DNN_INVALID_ARGUMENT when the task has no estimate. */
int32_t hbDSPGetTaskBoardTime(hbDSPTask_t task, double *boardUs, int32_t *counted);

#ifdef __cplusplus
}
#endif

#include "hb_dsp_ops.h"

#endif /* VDSP_HB_DSP_H_ */
