/*
 * front.c: libvdsp_hb's public functions (hb_sys.h, hb_dsp.h, hb_dnn.h). vdsp_sim.capi_build
 * compiles it with the native client core and vdsp_hb.c (VDSP_HB_PREFIXED: their hbSys/hbDSP
 * functions are vdsp_native_<name>) into libvdsp_hb.so, which links libzmq and no libpython.
 *
 * Who serves a process is decided once, at its first call of any function here:
 * - the native side (vdsp_hb.c) serves the hbSys and hbDSP functions and hbDNNGetErrorDesc when
 *   the process is not a Python program (no Py_IsInitialized in it, or it returns 0): relay mode
 *   over ipc or tcp (CURVE keys, PROTOCOL.md §16) and direct mode (VDSP_RPC_MODE=direct: HELLO to
 *   each core, TASKs to its firmware), its first call connecting; its failures are its own
 *   (KEY_REFUSED for a refused key, CORE_OFFLINE when no core answers ...);
 * - else the embedded Python SDK (libvdsp_hb_python.so beside this library: glue.c, bridge.py)
 *   serves every function, as it did alone before: a C library inside a Python program sharing
 *   its Soc, and relay autostart: in relay mode over ipc, when nothing serves the relay's endpoint
 *   (the native open's HB_DSP_RELAY_UNAVAILABLE, but for a relay that is there and did not answer
 *   HELLO within the connect timeout), the embedded SDK starts one where cores run without it, or
 *   says why not.
 * The hbDNN functions (but hbDNNGetErrorDesc and hbDNNRoiInfer) are always the embedded SDK's:
 * libvdsp_hb_python.so is loaded (dlopen, RTLD_GLOBAL: extension modules need libpython's
 * symbols) and the interpreter started at the first call that needs it, not before; where the
 * native side serves the process, the SDK is first handed the native side (vdsp_embedded_attach):
 * its DDR owner, which the SDK adopts, and its buffers, which the SDK's hbDNN functions read and
 * write in place.
 *
 * hbDNNGetErrorDesc describes a code with this thread's last failure's message, from the side
 * that failed last.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hb_dnn.h"
#include "hb_dsp.h"
#include "hb_sys.h"
#ifndef VDSP_HB_PREFIXED
#define VDSP_HB_PREFIXED
#endif
#include "vdsp_hb.h"

#define EMBEDDED_LIB "libvdsp_hb_python.so"

enum { NATIVE = 1, EMBEDDED = 2 };
static pthread_once_t decide_once = PTHREAD_ONCE_INIT, load_once = PTHREAD_ONCE_INIT;
static int mode;          /* NATIVE or EMBEDDED, set once */
static void *embedded;    /* libvdsp_hb_python.so, once loaded */
static __thread int last_embedded;   /* this thread's last failure was the embedded SDK's */

static int python_program(void) {
  int (*initialized)(void);
  void *sym = dlsym(RTLD_DEFAULT, "Py_IsInitialized");
  if (sym == NULL) return 0;
  memcpy(&initialized, &sym, sizeof initialized);
  return initialized();
}

static void decide_mode(void) {
  const char *rpc_mode = getenv("VDSP_RPC_MODE");
  const char *endpoint = getenv("VDSP_RELAY_ENDPOINT");
  if (python_program()) {
    mode = EMBEDDED;
    return;
  }
  int relay_ipc = (rpc_mode == NULL || !*rpc_mode || strcmp(rpc_mode, "relay") == 0) &&
                  (endpoint == NULL || strncmp(endpoint, "tcp://", 6) != 0);
  /* no local relay serves its endpoint: the embedded SDK starts one where cores run without it, or
   * says why not (over tcp and in direct mode the Python SDK starts nothing either, nor for a relay
   * that is there but did not answer in time: the native side's failure is the answer) */
  int late = 0;
  mode = vdsp_hb_native_open(&late) == HB_DSP_RELAY_UNAVAILABLE && relay_ipc && !late ? EMBEDDED : NATIVE;
}

static int decide(void) {
  pthread_once(&decide_once, decide_mode);
  return mode;
}

static void load(void) {
  Dl_info info;
  char path[4096];
  if (dladdr((void *)&decide_once, &info) == 0 || info.dli_fname == NULL) {
    fprintf(stderr, "libvdsp_hb: cannot tell where the library is, to load %s beside it\n", EMBEDDED_LIB);
    return;
  }
  const char *slash = strrchr(info.dli_fname, '/');
  int dir_len = slash != NULL ? (int)(slash - info.dli_fname) : 1;
  snprintf(path, sizeof path, "%.*s/%s", dir_len, slash != NULL ? info.dli_fname : ".", EMBEDDED_LIB);
  void *lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);   /* GLOBAL: extension modules find libpython's symbols */
  if (lib == NULL) {
    fprintf(stderr, "libvdsp_hb: cannot load the embedded SDK of the hbDNN functions (%s); "
            "'vdsp capi --build' builds it\n", dlerror());
    return;
  }
  if (mode == NATIVE) {
    void (*attach)(vdsp_hb_native_api const *);
    void *sym = dlsym(lib, "vdsp_embedded_attach");
    static const vdsp_hb_native_api api = {vdsp_hb_native_owner, vdsp_hb_native_find, vdsp_hb_native_last};
    if (sym == NULL) {
      fprintf(stderr, "libvdsp_hb: %s is not of this library (no vdsp_embedded_attach)\n", path);
      return;
    }
    memcpy(&attach, &sym, sizeof attach);
    attach(&api);
  }
  embedded = lib;
}

/* The embedded SDK's function `name`, loading it first; NULL if it cannot be loaded. */
static void *embedded_fn(const char *name) {
  pthread_once(&load_once, load);
  return embedded != NULL ? dlsym(embedded, name) : NULL;
}

/* emb_<name>: the embedded SDK's <name>, its failure remembered as this thread's last. */
#define EMBEDDED_CALL(name, params, args)                                       \
  static int32_t emb_##name params {                                           \
    typedef int32_t(*fn_t) params;                                              \
    static fn_t cached;                                                         \
    fn_t fn = __atomic_load_n(&cached, __ATOMIC_ACQUIRE);                       \
    if (fn == NULL) {                                                           \
      void *sym = embedded_fn("vdsp_embedded_" #name);                          \
      if (sym == NULL) return last_embedded = 0, HB_DNN_API_USE_ERROR;          \
      memcpy(&fn, &sym, sizeof fn);                                             \
      __atomic_store_n(&cached, fn, __ATOMIC_RELEASE);                          \
    }                                                                           \
    int32_t rc = fn args;                                                       \
    if (rc < 0) last_embedded = 1;                                              \
    return rc;                                                                  \
  }

/* A function of hb_sys.h or hb_dsp.h: the native side's where it serves the process. */
#define DUAL(name, params, args)                      \
  int32_t vdsp_native_##name params;                  \
  EMBEDDED_CALL(name, params, args)                   \
  int32_t name params {                               \
    if (decide() == NATIVE) {                         \
      int32_t rc = vdsp_native_##name args;           \
      if (rc < 0) last_embedded = 0;                  \
      return rc;                                      \
    }                                                 \
    return emb_##name args;                           \
  }

/* An hbDNN function: the embedded SDK's. */
#define DNN(name, params, args)  \
  EMBEDDED_CALL(name, params, args) \
  int32_t name params {          \
    decide();                    \
    return emb_##name args;      \
  }

/* --- hb_sys.h ------------------------------------------------------------------------------- */
DUAL(hbSysAllocMem, (hbSysMem * mem, uint32_t size), (mem, size))
DUAL(hbSysAllocCachedMem, (hbSysMem * mem, uint32_t size), (mem, size))
DUAL(hbSysFlushMem, (hbSysMem * mem, int32_t flag), (mem, flag))
DUAL(hbSysFreeMem, (hbSysMem * mem), (mem))
DUAL(hbSysWriteMem, (hbSysMem * dest, char *src, uint32_t size), (dest, src, size))
DUAL(hbSysReadMem, (char *dest, hbSysMem *src, uint32_t size), (dest, src, size))
DUAL(hbSysRegisterMem, (hbSysMem * mem), (mem))
DUAL(hbSysUnregisterMem, (hbSysMem * mem), (mem))

/* --- hb_dsp.h ------------------------------------------------------------------------------- */
DUAL(hbDSPRpcV2, (hbDSPTask_t * task, hbSysMem *input, hbSysMem *output, int32_t rpcCmd, hbDSPRpcCtrlParam *ctrl),
     (task, input, output, rpcCmd, ctrl))
DUAL(hbDSPRpcV2Param,
     (hbDSPTask_t * task, hbSysMem *inputs, int32_t inputCount, hbSysMem *outputs, int32_t outputCount,
      int32_t rpcCmd, void const *param, uint32_t paramSize, hbDSPRpcCtrlParam *ctrl),
     (task, inputs, inputCount, outputs, outputCount, rpcCmd, param, paramSize, ctrl))
DUAL(hbDSPRpcV2Json,
     (hbDSPTask_t * task, hbSysMem *inputs, int32_t inputCount, hbSysMem *outputs, int32_t outputCount,
      int32_t rpcCmd, char const *paramJson, hbDSPRpcCtrlParam *ctrl),
     (task, inputs, inputCount, outputs, outputCount, rpcCmd, paramJson, ctrl))
DUAL(hbDSPWaitTaskDone, (hbDSPTask_t task, int32_t timeout_ms), (task, timeout_ms))
DUAL(hbDSPReleaseTask, (hbDSPTask_t task), (task))
DUAL(hbDSPGetTaskValueInt, (hbDSPTask_t task, char const *name, int64_t *value), (task, name, value))
DUAL(hbDSPGetTaskValueDouble, (hbDSPTask_t task, char const *name, double *value), (task, name, value))
DUAL(hbDSPGetTaskValuesJson, (hbDSPTask_t task, char *buf, uint32_t bufSize), (task, buf, bufSize))
DUAL(hbDSPGetTaskCore, (hbDSPTask_t task, int32_t *dspCoreId), (task, dspCoreId))
DUAL(hbDSPGetTaskBoardTime, (hbDSPTask_t task, double *boardUs, int32_t *counted), (task, boardUs, counted))

/* --- hb_dnn.h ------------------------------------------------------------------------------- */
char const *vdsp_native_hbDNNGetErrorDesc(int32_t errorCode);

char const *hbDNNGetErrorDesc(int32_t errorCode) {
  if (last_embedded && embedded != NULL) {
    char const *(*fn)(int32_t);
    void *sym = dlsym(embedded, "vdsp_embedded_hbDNNGetErrorDesc");
    if (sym != NULL) {
      memcpy(&fn, &sym, sizeof fn);
      return fn(errorCode);
    }
  }
  return vdsp_native_hbDNNGetErrorDesc(errorCode);
}

char const *hbDNNGetVersion(void) {
  decide();
  char const *(*fn)(void);
  void *sym = embedded_fn("vdsp_embedded_hbDNNGetVersion");
  if (sym == NULL) return "unknown (libvdsp_hb could not start its embedded SDK)";
  memcpy(&fn, &sym, sizeof fn);
  return fn();
}

DNN(hbDNNInitializeFromFiles,
    (hbPackedDNNHandle_t * packedDNNHandle, char const **modelFileNames, int32_t modelFileCount),
    (packedDNNHandle, modelFileNames, modelFileCount))
DNN(hbDNNInitializeFromDDR,
    (hbPackedDNNHandle_t * packedDNNHandle, const void **modelData, int32_t *modelDataLengths,
     int32_t modelDataCount),
    (packedDNNHandle, modelData, modelDataLengths, modelDataCount))
DNN(hbDNNRelease, (hbPackedDNNHandle_t packedDNNHandle), (packedDNNHandle))
DNN(hbDNNGetModelNameList, (char const ***modelNameList, int32_t *modelNameCount, hbPackedDNNHandle_t packedDNNHandle),
    (modelNameList, modelNameCount, packedDNNHandle))
DNN(hbDNNGetModelHandle, (hbDNNHandle_t * dnnHandle, hbPackedDNNHandle_t packedDNNHandle, char const *modelName),
    (dnnHandle, packedDNNHandle, modelName))
DNN(hbDNNGetInputCount, (int32_t * inputCount, hbDNNHandle_t dnnHandle), (inputCount, dnnHandle))
DNN(hbDNNGetOutputCount, (int32_t * outputCount, hbDNNHandle_t dnnHandle), (outputCount, dnnHandle))
DNN(hbDNNGetInputName, (char const **name, hbDNNHandle_t dnnHandle, int32_t inputIndex), (name, dnnHandle, inputIndex))
DNN(hbDNNGetOutputName, (char const **name, hbDNNHandle_t dnnHandle, int32_t outputIndex),
    (name, dnnHandle, outputIndex))
DNN(hbDNNGetInputTensorProperties, (hbDNNTensorProperties * properties, hbDNNHandle_t dnnHandle, int32_t inputIndex),
    (properties, dnnHandle, inputIndex))
DNN(hbDNNGetOutputTensorProperties,
    (hbDNNTensorProperties * properties, hbDNNHandle_t dnnHandle, int32_t outputIndex),
    (properties, dnnHandle, outputIndex))
DNN(hbDNNInfer,
    (hbDNNTaskHandle_t * taskHandle, hbDNNTensor **output, hbDNNTensor const *input, hbDNNHandle_t dnnHandle,
     hbDNNInferCtrlParam *inferCtrlParam),
    (taskHandle, output, input, dnnHandle, inferCtrlParam))
DNN(hbDNNWaitTaskDone, (hbDNNTaskHandle_t taskHandle, int32_t timeout), (taskHandle, timeout))
DNN(hbDNNReleaseTask, (hbDNNTaskHandle_t taskHandle), (taskHandle))
DNN(hbDNNSetTaskDoneCb, (hbDNNTaskHandle_t taskHandle, hbDNNTaskDoneCb cb, void *userdata), (taskHandle, cb, userdata))
DNN(hbDNNRegisterLayerCreator, (char const *layerType, hbDNNLayerCreator layerCreator), (layerType, layerCreator))
DNN(hbDNNUnregisterLayerCreator, (char const *layerType), (layerType))

int32_t hbDNNRoiInfer(hbDNNTaskHandle_t *taskHandle, hbDNNTensor **output, hbDNNTensor const *input, hbDNNRoi *rois,
                      int32_t roiCount, hbDNNHandle_t dnnHandle, hbDNNInferCtrlParam *inferCtrlParam) {
  (void)taskHandle, (void)output, (void)input, (void)rois, (void)roiCount, (void)dnnHandle, (void)inferCtrlParam;
  last_embedded = 0;
  return vdsp_hb_native_say(HB_DNN_API_USE_ERROR, "hbDNNRoiInfer is not offered: the runtime has no resizer inputs");
}
