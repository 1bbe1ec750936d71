/*
 * The J5 NN sample's model flow in C: register a layer creator, hbDNNInitializeFromFiles,
 * hbDNNGetModelNameList, hbDNNGetModelHandle, the tensors from the model's properties,
 * hbDNNInfer from several threads at once (each with its own tensors), hbDNNSetTaskDoneCb,
 * hbDNNWaitTaskDone, and the TOP-5 class ids.
 *
 *   ./mobilenet mobilenetv1_224x224_nv12.vdnn image.nv12 [threads]
 *
 * image.nv12: 224 * 3/2 rows of 224 bytes (Y, then interleaved UV). The model's Softmax layer is
 * this file's C layer (hbDNNRegisterLayerCreator); its Quantize/Dequantize layers run on the DSP
 * cores when HB_DNN_ENABLE_DSP=1. The model of vdsp-sim has seeded weights: its class ids mean
 * nothing, they are compared with onnxruntime running the whole model (tests/integration/test_capi.py).
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dnn/hb_dnn.h"
#include "dnn/hb_sys.h"

#define MAX_THREADS 8
#define MAX_CLASSES 4096

#define CHECK(call)                                                                 \
  do {                                                                              \
    int32_t ret_ = (call);                                                          \
    if (ret_ != 0) {                                                                \
      fprintf(stderr, "%s failed: %d %s\n", #call, ret_, hbDNNGetErrorDesc(ret_)); \
      exit(1);                                                                      \
    }                                                                               \
  } while (0)

/* --- a Softmax layer in C (axis 1 of an NCHW float tensor) ------------------------------------ */
static int layers_made, layers_destroyed;

static int32_t softmax_forward(hbDNNLayer *self, hbDNNTensor const *inputs, int32_t inputCount,
                               hbDNNTensor *outputs, int32_t outputCount) {
  (void)self;
  if (inputCount != 1 || outputCount != 1) return HB_DNN_INVALID_ARGUMENT;
  hbDNNTensorProperties const *ip = &inputs[0].properties, *op = &outputs[0].properties;
  if (ip->tensorType != HB_DNN_TENSOR_TYPE_F32 || op->tensorType != HB_DNN_TENSOR_TYPE_F32 ||
      ip->validShape.numDimensions != 4) {
    return HB_DNN_INVALID_ARGUMENT;
  }
  int32_t const *d = ip->validShape.dimensionSize;
  char const *in = (char const *)inputs[0].sysMem[0].virAddr;
  char *out = (char *)outputs[0].sysMem[0].virAddr;
  for (int32_t n = 0; n < d[0]; n++) {
    for (int32_t h = 0; h < d[2]; h++) {
      for (int32_t w = 0; w < d[3]; w++) {
        long base_in = (long)n * ip->stride[0] + (long)h * ip->stride[2] + (long)w * ip->stride[3];
        long base_out = (long)n * op->stride[0] + (long)h * op->stride[2] + (long)w * op->stride[3];
        double top = -INFINITY, sum = 0;
        for (int32_t c = 0; c < d[1]; c++) {
          float v = *(float const *)(in + base_in + (long)c * ip->stride[1]);
          if (v > top) top = v;
        }
        for (int32_t c = 0; c < d[1]; c++) sum += exp(*(float const *)(in + base_in + (long)c * ip->stride[1]) - top);
        for (int32_t c = 0; c < d[1]; c++) {
          float v = *(float const *)(in + base_in + (long)c * ip->stride[1]);
          *(float *)(out + base_out + (long)c * op->stride[1]) = (float)(exp(v - top) / sum);
        }
      }
    }
  }
  return 0;
}

static void softmax_destroy(hbDNNLayer *self) {
  layers_destroyed++;
  free(self);
}

static hbDNNLayer *softmax_create(void) {
  hbDNNLayer *layer = calloc(1, sizeof *layer);
  if (layer == NULL) return NULL;
  layer->forward = softmax_forward;
  layer->destroy = softmax_destroy;
  layers_made++;
  return layer;
}

/* --- one inference per thread ------------------------------------------------------------------ */
struct job {
  hbDNNHandle_t model;
  uint8_t const *nv12;
  int32_t width, height;
  float prob[MAX_CLASSES];
  int32_t classes;
  int32_t status; /* the callback's */
  int called;
};

static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static int callbacks;

static void on_done(hbDNNTaskHandle_t task, int32_t status, void *userdata) {
  struct job *job = userdata;
  (void)task;
  pthread_mutex_lock(&done_lock);
  job->status = status;
  job->called++;
  callbacks++;
  pthread_mutex_unlock(&done_lock);
}

static void *infer(void *arg) {
  struct job *job = arg;
  hbDNNTensor input, output;
  memset(&input, 0, sizeof input);
  memset(&output, 0, sizeof output);
  CHECK(hbDNNGetInputTensorProperties(&input.properties, job->model, 0));
  CHECK(hbDNNGetOutputTensorProperties(&output.properties, job->model, 0));
  CHECK(hbSysAllocCachedMem(&input.sysMem[0], (uint32_t)input.properties.alignedByteSize));
  CHECK(hbSysAllocCachedMem(&output.sysMem[0], (uint32_t)output.properties.alignedByteSize));
  int32_t row = input.properties.stride[2]; /* NV12: bytes per row of both planes */
  for (int32_t y = 0; y < job->height * 3 / 2; y++) {
    memcpy((uint8_t *)input.sysMem[0].virAddr + (long)y * row, job->nv12 + (long)y * job->width, (size_t)job->width);
  }
  CHECK(hbSysFlushMem(&input.sysMem[0], HB_SYS_MEM_CACHE_CLEAN));

  hbDNNTaskHandle_t task = NULL;
  hbDNNInferCtrlParam ctrl;
  HB_DNN_INITIALIZE_INFER_CTRL_PARAM(&ctrl);
  hbDNNTensor *out = &output;
  CHECK(hbDNNInfer(&task, &out, &input, job->model, &ctrl));
  CHECK(hbDNNSetTaskDoneCb(task, on_done, job));
  CHECK(hbDNNWaitTaskDone(task, 0));
  CHECK(hbSysFlushMem(&output.sysMem[0], HB_SYS_MEM_CACHE_INVALIDATE));
  hbDNNTensorProperties const *p = &output.properties;
  job->classes = p->validShape.dimensionSize[1];
  if (job->classes > MAX_CLASSES) job->classes = MAX_CLASSES;
  for (int32_t c = 0; c < job->classes; c++) {
    job->prob[c] = *(float const *)((char const *)output.sysMem[0].virAddr + (long)c * p->stride[1]);
  }
  CHECK(hbDNNReleaseTask(task));
  CHECK(hbSysFreeMem(&input.sysMem[0]));
  CHECK(hbSysFreeMem(&output.sysMem[0]));
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s model.vdnn image.nv12 [threads]\n", argv[0]);
    return 2;
  }
  int threads = argc > 3 ? atoi(argv[3]) : 3;
  if (threads < 1 || threads > MAX_THREADS) return 2;
  fprintf(stderr, "dnn runtime %s\n", hbDNNGetVersion());
  CHECK(hbDNNRegisterLayerCreator("Softmax", softmax_create));
  fprintf(stderr, "hbDNNRegisterLayerCreator success\n");

  hbPackedDNNHandle_t pack = NULL;
  char const *files[] = {argv[1]};
  CHECK(hbDNNInitializeFromFiles(&pack, files, 1));
  char const **names = NULL;
  int32_t count = 0;
  CHECK(hbDNNGetModelNameList(&names, &count, pack));
  fprintf(stderr, "hbDNNGetModelNameList success: %d model(s), %s\n", count, names[0]);
  hbDNNHandle_t model = NULL;
  CHECK(hbDNNGetModelHandle(&model, pack, names[0]));
  int32_t n_in = 0, n_out = 0;
  char const *in_name = NULL, *out_name = NULL;
  CHECK(hbDNNGetInputCount(&n_in, model));
  CHECK(hbDNNGetOutputCount(&n_out, model));
  CHECK(hbDNNGetInputName(&in_name, model, 0));
  CHECK(hbDNNGetOutputName(&out_name, model, 0));
  hbDNNTensorProperties in_props;
  CHECK(hbDNNGetInputTensorProperties(&in_props, model, 0));
  fprintf(stderr, "inputs %d (%s, type %d, %dx%d), outputs %d (%s)\n", n_in, in_name, in_props.tensorType,
          in_props.validShape.dimensionSize[3], in_props.validShape.dimensionSize[2], n_out, out_name);
  if (in_props.tensorType != HB_DNN_IMG_TYPE_NV12) return 1;

  int32_t w = in_props.validShape.dimensionSize[3], h = in_props.validShape.dimensionSize[2];
  size_t size = (size_t)w * h * 3 / 2;
  uint8_t *nv12 = malloc(size);
  FILE *f = fopen(argv[2], "rb");
  if (nv12 == NULL || f == NULL || fread(nv12, 1, size, f) != size) {
    fprintf(stderr, "cannot read %zu bytes of NV12 from %s\n", size, argv[2]);
    return 1;
  }
  fclose(f);
  fprintf(stderr, "read image to nv12 success\n");

  static struct job jobs[MAX_THREADS];
  pthread_t tids[MAX_THREADS];
  for (int i = 0; i < threads; i++) {
    jobs[i].model = model, jobs[i].nv12 = nv12, jobs[i].width = w, jobs[i].height = h;
    if (pthread_create(&tids[i], NULL, infer, &jobs[i]) != 0) return 1;
  }
  for (int i = 0; i < threads; i++) pthread_join(tids[i], NULL);
  for (int i = 0; i < 500; i++) { /* a callback runs when its task ends, maybe just after the wait */
    pthread_mutex_lock(&done_lock);
    int seen = callbacks;
    pthread_mutex_unlock(&done_lock);
    if (seen >= threads) break;
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  }
  int same = 1;
  for (int i = 0; i < threads; i++) {
    same &= jobs[i].called == 1 && jobs[i].status == 0 && jobs[i].classes == jobs[0].classes &&
            memcmp(jobs[i].prob, jobs[0].prob, sizeof(float) * (size_t)jobs[0].classes) == 0;
  }
  printf("threads %d, callbacks %d, same result in every thread: %s\n", threads, callbacks, same ? "yes" : "no");

  int32_t top[5] = {-1, -1, -1, -1, -1};
  for (int k = 0; k < 5; k++) {
    for (int32_t c = 0; c < jobs[0].classes; c++) {
      int taken = 0;
      for (int j = 0; j < k; j++) taken |= top[j] == c;
      if (!taken && (top[k] < 0 || jobs[0].prob[c] > jobs[0].prob[top[k]])) top[k] = c;
    }
    printf("TOP %d result id: %d prob %.9g\n", k, top[k], jobs[0].prob[top[k]]);
  }
  CHECK(hbDNNRelease(pack));
  CHECK(hbDNNUnregisterLayerCreator("Softmax"));
  printf("C layers made %d, destroyed %d\n", layers_made, layers_destroyed);
  free(nv12);
  return same ? 0 : 1;
}
