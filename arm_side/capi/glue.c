/*
 * libvdsp_hb_python: the embedded Python SDK of libvdsp_hb (vdsp_sim.capi_build compiles this
 * file with cffi's embedding mode). libvdsp_hb's front (front.c) loads it at the first call that
 * needs it (an hbDNN function, or every call where the native side does not serve the process)
 * and calls vdsp_embedded_<name> for the public function <name> of hb_sys.h, hb_dsp.h, hb_dnn.h;
 * where the native side serves hbSys/hbDSP, the front first hands it the native side
 * (vdsp_embedded_attach), whose DDR owner and buffers the SDK then uses (arm_side.capi.bridge).
 *
 * Each function starts the embedded Python SDK once (vdsp_ready), then calls its Python half
 * (arm_side.capi.bridge, declared in capi.cdef as extern "Python"), which does the work with the
 * same code as arm_side.hb: one implementation of the protocol, ownership, CURVE, autostart
 * and cache semantics. The interpreter is configured here, before cffi would start one with
 * the defaults: isolated from PYTHON* variables and the user's site directory, no signal
 * handlers, and the virtual environment the library was built for (CAPI_SDK_PYTHON, its
 * python executable: the interpreter finds its pyvenv.cfg and site-packages from it). At exit
 * the SDK's exit handlers run (the Soc closes, this process's buffers are freed), as they do at
 * the end of a Python program.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hb_dsp.h"
#include "hb_dnn.h"
#include "hb_sys.h"
#include "vdsp_hb.h"

#ifndef CAPI_SDK_PYTHON
#error "CAPI_SDK_PYTHON (the python executable of the SDK's environment) must be defined"
#endif

static pthread_once_t vdsp_once = PTHREAD_ONCE_INIT;
static int vdsp_state; /* 1: the SDK is ready; -1: it could not start (said on stderr) */
static char const vdsp_unavailable[] =
    "HB_DNN_API_USE_ERROR: libvdsp_hb could not start its embedded Python SDK (the reason is on stderr; "
    "'vdsp capi --build' rebuilds the library for the current environment)";

static void vdsp_exit(void) { vdsp_py_exit(); }

static int vdsp_start_python(void) {
  PyConfig config;
  PyStatus status;
  PyConfig_InitIsolatedConfig(&config);
  config.install_signal_handlers = 0; /* the program's signals stay its own */
  config.parse_argv = 0;
  status = PyConfig_SetBytesString(&config, &config.program_name, CAPI_SDK_PYTHON);
  if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) {
    fprintf(stderr, "libvdsp_hb: cannot start Python for %s: %s\n", CAPI_SDK_PYTHON,
            status.err_msg ? status.err_msg : "unknown error");
    return -1;
  }
  PyEval_SaveThread(); /* release the GIL: threads of the SDK and of the program take turns */
  return 0;
}

static void vdsp_start(void) {
  int own = !Py_IsInitialized(); /* else: loaded into a Python program, which has its own exit */
  if (own && vdsp_start_python() != 0) {
    vdsp_state = -1;
    return;
  }
  if (vdsp_py_start() != 1) { /* cffi runs the init code first; 0 or -1 if it failed */
    fprintf(stderr, "libvdsp_hb: the Python half of the library (arm_side.capi.bridge) did not start\n");
    vdsp_state = -1;
    return;
  }
  if (own) atexit(vdsp_exit);
  vdsp_state = 1;
}

static int vdsp_ready(void) {
  pthread_once(&vdsp_once, vdsp_start);
  return vdsp_state == 1;
}

#define VDSP_CALL(call) (vdsp_ready() ? (call) : HB_DNN_API_USE_ERROR)

/* --- the native side, where the front hands it over (before the first call) ------------------- */
static vdsp_hb_native_api vdsp_native_api;
static int vdsp_native_attached_flag;

void vdsp_embedded_attach(vdsp_hb_native_api const *api) {
  vdsp_native_api = *api;
  vdsp_native_attached_flag = 1;
}
int vdsp_native_attached(uint32_t *id, int *lockFd, char *dir, size_t len) {
  return vdsp_native_attached_flag ? vdsp_native_api.owner(id, lockFd, dir, len) : -1;
}
int vdsp_native_find(uint64_t phys, void *vir, uint32_t size, char const *what, vdsp_hb_native_buffer *out) {
  return vdsp_native_attached_flag ? vdsp_native_api.find(phys, vir, size, what, out) : 1;
}
int vdsp_native_last(char *message, size_t len) {
  return vdsp_native_attached_flag ? vdsp_native_api.last(message, len) : 0;
}

/* --- hb_sys.h ------------------------------------------------------------------------------- */
int32_t vdsp_embedded_hbSysAllocMem(hbSysMem *mem, uint32_t size) { return VDSP_CALL(vdsp_py_alloc(mem, size, 0)); }
int32_t vdsp_embedded_hbSysAllocCachedMem(hbSysMem *mem, uint32_t size) { return VDSP_CALL(vdsp_py_alloc(mem, size, 1)); }
int32_t vdsp_embedded_hbSysFlushMem(hbSysMem *mem, int32_t flag) { return VDSP_CALL(vdsp_py_flush(mem, flag)); }
int32_t vdsp_embedded_hbSysFreeMem(hbSysMem *mem) { return VDSP_CALL(vdsp_py_free(mem, 0)); }
int32_t vdsp_embedded_hbSysWriteMem(hbSysMem *dest, char *src, uint32_t size) { return VDSP_CALL(vdsp_py_write(dest, src, size)); }
int32_t vdsp_embedded_hbSysReadMem(char *dest, hbSysMem *src, uint32_t size) { return VDSP_CALL(vdsp_py_read(dest, src, size)); }
int32_t vdsp_embedded_hbSysRegisterMem(hbSysMem *mem) { return VDSP_CALL(vdsp_py_register(mem)); }
int32_t vdsp_embedded_hbSysUnregisterMem(hbSysMem *mem) { return VDSP_CALL(vdsp_py_free(mem, 1)); }

/* --- hb_dsp.h ------------------------------------------------------------------------------- */
#define VDSP_KEY_MAX 4096

struct vdsp_pointer_member {
  int32_t cmd;
  size_t size;         /* sizeof the operator's parameter struct */
  size_t offset;       /* of the pointer */
  int kind;            /* 1: a NUL-terminated string; 2: a list of count elements */
  size_t count_offset; /* of the int32_t count (lists) */
  size_t element;      /* bytes of an element (lists) */
};

/* CAPI_POINTER_MEMBERS */

/* Append what the pointers of a parameter struct point at; 0, or -1 when it does not fit. */
static int vdsp_key_pointed(unsigned char *key, uint32_t *len, int32_t cmd, void const *param, uint32_t size) {
  for (size_t i = 0; i < sizeof vdsp_pointer_members / sizeof vdsp_pointer_members[0]; i++) {
    struct vdsp_pointer_member const *m = &vdsp_pointer_members[i];
    if (m->cmd != cmd) continue;
    if (m->size != size) return -1; /* the bridge says what is wrong with it */
    void const *ptr;
    memcpy(&ptr, (char const *)param + m->offset, sizeof ptr);
    size_t n = 0;
    if (ptr != NULL && m->kind == 1) {
      n = strnlen((char const *)ptr, VDSP_KEY_MAX) + 1;
    } else if (ptr != NULL) {
      int32_t count;
      memcpy(&count, (char const *)param + m->count_offset, sizeof count);
      if (count < 0 || (size_t)count > VDSP_KEY_MAX / m->element) return -1;
      n = (size_t)count * m->element;
    }
    if (*len + 1 + n > VDSP_KEY_MAX) return -1;
    key[(*len)++] = ptr != NULL;
    if (n) memcpy(key + *len, ptr, n), *len += (uint32_t)n;
  }
  return 0;
}

/* A submission, with its bytes as one key (operator, counts, the hbSysMem structs, the control
 * and parameter structs) when they fit: a program submits the same few calls again and again, and
 * the bridge reuses what it made of the same bytes instead of reading the structs field by field
 * (it still checks that the buffers are live). The strings and lists a parameter struct points
 * at are part of the key. */
static int32_t vdsp_rpc(hbDSPTask_t *task, hbSysMem *inputs, int32_t n_in, hbSysMem *outputs, int32_t n_out,
                        int32_t cmd, void const *param, uint32_t size, char const *json, hbDSPRpcCtrlParam *ctrl) {
  unsigned char key[VDSP_KEY_MAX];
  uint32_t len = 0;
  if (json == NULL && n_in >= 0 && n_out >= 0 && n_in <= 64 && n_out <= 64 && (inputs != NULL || n_in == 0) &&
      (outputs != NULL || n_out == 0) && (param != NULL || size == 0)) {
    int32_t head[5] = {cmd, n_in, n_out, (int32_t)size, ctrl != NULL};
    size_t in_bytes = (size_t)n_in * sizeof(hbSysMem), out_bytes = (size_t)n_out * sizeof(hbSysMem);
    size_t ctrl_bytes = ctrl != NULL ? sizeof *ctrl : 0;
    if (size <= VDSP_KEY_MAX && sizeof head + in_bytes + out_bytes + ctrl_bytes + size <= VDSP_KEY_MAX) {
      memcpy(key, head, sizeof head);
      len = sizeof head;
      if (in_bytes) memcpy(key + len, inputs, in_bytes), len += (uint32_t)in_bytes;
      if (out_bytes) memcpy(key + len, outputs, out_bytes), len += (uint32_t)out_bytes;
      if (ctrl_bytes) memcpy(key + len, ctrl, ctrl_bytes), len += (uint32_t)ctrl_bytes;
      if (size) memcpy(key + len, param, size), len += size;
      if (size && vdsp_key_pointed(key, &len, cmd, param, size) != 0) len = 0;
    }
  }
  int64_t handle = len && task != NULL ? vdsp_py_rpc_again(key, len) : 0;
  if (handle == 0) handle = vdsp_py_rpc(task, inputs, n_in, outputs, n_out, cmd, param, size, json, ctrl, key, len);
  if (handle < 0) return (int32_t)handle;
  *task = (hbDSPTask_t)(uintptr_t)handle;
  return 0;
}

/* hbDSPRpcV2: the parameters packed in the input (arm_side.capi.packing; the bridge reads them
 * from the input's DDR, for an operator with a struct of hb_dsp_ops.h), never memoized: the
 * struct's bytes are in the buffer, not in the call. */
static int32_t vdsp_rpc_packed(hbDSPTask_t *task, hbSysMem *input, hbSysMem *output, int32_t cmd,
                               hbDSPRpcCtrlParam *ctrl) {
  int64_t handle = vdsp_py_rpc_packed(task, input, output, cmd, ctrl);
  if (handle < 0) return (int32_t)handle;
  *task = (hbDSPTask_t)(uintptr_t)handle;
  return 0;
}

int32_t vdsp_embedded_hbDSPRpcV2(hbDSPTask_t *task, hbSysMem *input, hbSysMem *output, int32_t rpcCmd, hbDSPRpcCtrlParam *ctrl) {
  return VDSP_CALL(vdsp_rpc_packed(task, input, output, rpcCmd, ctrl));
}
int32_t vdsp_embedded_hbDSPRpcV2Param(hbDSPTask_t *task, hbSysMem *inputs, int32_t inputCount, hbSysMem *outputs,
                        int32_t outputCount, int32_t rpcCmd, void const *param, uint32_t paramSize,
                        hbDSPRpcCtrlParam *ctrl) {
  return VDSP_CALL(vdsp_rpc(task, inputs, inputCount, outputs, outputCount, rpcCmd, param, paramSize, NULL, ctrl));
}
int32_t vdsp_embedded_hbDSPRpcV2Json(hbDSPTask_t *task, hbSysMem *inputs, int32_t inputCount, hbSysMem *outputs,
                       int32_t outputCount, int32_t rpcCmd, char const *paramJson, hbDSPRpcCtrlParam *ctrl) {
  return VDSP_CALL(vdsp_rpc(task, inputs, inputCount, outputs, outputCount, rpcCmd, NULL, 0, paramJson, ctrl));
}
#define VDSP_TASK(task) ((uintptr_t)(task))
int32_t vdsp_embedded_hbDSPWaitTaskDone(hbDSPTask_t task, int32_t timeout_ms) {
  return VDSP_CALL(vdsp_py_dsp_wait(VDSP_TASK(task), timeout_ms));
}
int32_t vdsp_embedded_hbDSPReleaseTask(hbDSPTask_t task) { return VDSP_CALL(vdsp_py_dsp_release(VDSP_TASK(task))); }
int32_t vdsp_embedded_hbDSPGetTaskValueInt(hbDSPTask_t task, char const *name, int64_t *value) {
  return VDSP_CALL(vdsp_py_dsp_value(VDSP_TASK(task), name, value, NULL));
}
int32_t vdsp_embedded_hbDSPGetTaskValueDouble(hbDSPTask_t task, char const *name, double *value) {
  return VDSP_CALL(vdsp_py_dsp_value(VDSP_TASK(task), name, NULL, value));
}
int32_t vdsp_embedded_hbDSPGetTaskValuesJson(hbDSPTask_t task, char *buf, uint32_t bufSize) {
  return VDSP_CALL(vdsp_py_dsp_values_json(VDSP_TASK(task), buf, bufSize));
}
int32_t vdsp_embedded_hbDSPGetTaskCore(hbDSPTask_t task, int32_t *dspCoreId) {
  return VDSP_CALL(vdsp_py_dsp_core(VDSP_TASK(task), dspCoreId));
}
int32_t vdsp_embedded_hbDSPGetTaskBoardTime(hbDSPTask_t task, double *boardUs, int32_t *counted) {
  return VDSP_CALL(vdsp_py_dsp_board(VDSP_TASK(task), boardUs, counted));
}

/* --- hb_dnn.h ------------------------------------------------------------------------------- */
char const *vdsp_embedded_hbDNNGetVersion(void) {
  char const *text = vdsp_ready() ? vdsp_py_version() : NULL;
  return text != NULL ? text : "unknown (libvdsp_hb could not start)";
}
char const *vdsp_embedded_hbDNNGetErrorDesc(int32_t errorCode) {
  char const *text = vdsp_ready() ? vdsp_py_error_desc(errorCode) : NULL;
  return text != NULL ? text : vdsp_unavailable;
}
int32_t vdsp_embedded_hbDNNInitializeFromFiles(hbPackedDNNHandle_t *packedDNNHandle, char const **modelFileNames,
                                 int32_t modelFileCount) {
  return VDSP_CALL(vdsp_py_dnn_from_files(packedDNNHandle, modelFileNames, modelFileCount));
}
int32_t vdsp_embedded_hbDNNInitializeFromDDR(hbPackedDNNHandle_t *packedDNNHandle, const void **modelData,
                               int32_t *modelDataLengths, int32_t modelDataCount) {
  return VDSP_CALL(vdsp_py_dnn_from_ddr(packedDNNHandle, modelData, modelDataLengths, modelDataCount));
}
int32_t vdsp_embedded_hbDNNRelease(hbPackedDNNHandle_t packedDNNHandle) { return VDSP_CALL(vdsp_py_dnn_release(packedDNNHandle)); }
int32_t vdsp_embedded_hbDNNGetModelNameList(char const ***modelNameList, int32_t *modelNameCount,
                              hbPackedDNNHandle_t packedDNNHandle) {
  return VDSP_CALL(vdsp_py_dnn_model_names(modelNameList, modelNameCount, packedDNNHandle));
}
int32_t vdsp_embedded_hbDNNGetModelHandle(hbDNNHandle_t *dnnHandle, hbPackedDNNHandle_t packedDNNHandle, char const *modelName) {
  return VDSP_CALL(vdsp_py_dnn_model_handle(dnnHandle, packedDNNHandle, modelName));
}
int32_t vdsp_embedded_hbDNNGetInputCount(int32_t *inputCount, hbDNNHandle_t dnnHandle) {
  return VDSP_CALL(vdsp_py_dnn_count(inputCount, dnnHandle, 0));
}
int32_t vdsp_embedded_hbDNNGetOutputCount(int32_t *outputCount, hbDNNHandle_t dnnHandle) {
  return VDSP_CALL(vdsp_py_dnn_count(outputCount, dnnHandle, 1));
}
int32_t vdsp_embedded_hbDNNGetInputName(char const **name, hbDNNHandle_t dnnHandle, int32_t inputIndex) {
  return VDSP_CALL(vdsp_py_dnn_name(name, dnnHandle, inputIndex, 0));
}
int32_t vdsp_embedded_hbDNNGetOutputName(char const **name, hbDNNHandle_t dnnHandle, int32_t outputIndex) {
  return VDSP_CALL(vdsp_py_dnn_name(name, dnnHandle, outputIndex, 1));
}
int32_t vdsp_embedded_hbDNNGetInputTensorProperties(hbDNNTensorProperties *properties, hbDNNHandle_t dnnHandle,
                                      int32_t inputIndex) {
  return VDSP_CALL(vdsp_py_dnn_properties(properties, dnnHandle, inputIndex, 0));
}
int32_t vdsp_embedded_hbDNNGetOutputTensorProperties(hbDNNTensorProperties *properties, hbDNNHandle_t dnnHandle,
                                       int32_t outputIndex) {
  return VDSP_CALL(vdsp_py_dnn_properties(properties, dnnHandle, outputIndex, 1));
}
int32_t vdsp_embedded_hbDNNInfer(hbDNNTaskHandle_t *taskHandle, hbDNNTensor **output, hbDNNTensor const *input,
                   hbDNNHandle_t dnnHandle, hbDNNInferCtrlParam *inferCtrlParam) {
  return VDSP_CALL(vdsp_py_dnn_infer(taskHandle, output, input, dnnHandle, inferCtrlParam));
}
int32_t vdsp_embedded_hbDNNRoiInfer(hbDNNTaskHandle_t *taskHandle, hbDNNTensor **output, hbDNNTensor const *input, hbDNNRoi *rois,
                      int32_t roiCount, hbDNNHandle_t dnnHandle, hbDNNInferCtrlParam *inferCtrlParam) {
  (void)taskHandle, (void)output, (void)input, (void)rois, (void)roiCount, (void)dnnHandle, (void)inferCtrlParam;
  return HB_DNN_API_USE_ERROR;
}
int32_t vdsp_embedded_hbDNNWaitTaskDone(hbDNNTaskHandle_t taskHandle, int32_t timeout) {
  return VDSP_CALL(vdsp_py_dnn_wait(taskHandle, timeout));
}
int32_t vdsp_embedded_hbDNNReleaseTask(hbDNNTaskHandle_t taskHandle) { return VDSP_CALL(vdsp_py_dnn_release_task(taskHandle)); }
int32_t vdsp_embedded_hbDNNSetTaskDoneCb(hbDNNTaskHandle_t taskHandle, hbDNNTaskDoneCb cb, void *userdata) {
  return VDSP_CALL(vdsp_py_dnn_set_done_cb(taskHandle, cb, userdata));
}
int32_t vdsp_embedded_hbDNNRegisterLayerCreator(char const *layerType, hbDNNLayerCreator layerCreator) {
  return VDSP_CALL(vdsp_py_dnn_register_layer(layerType, layerCreator));
}
int32_t vdsp_embedded_hbDNNUnregisterLayerCreator(char const *layerType) {
  return VDSP_CALL(vdsp_py_dnn_unregister_layer(layerType));
}
