/*
 * A J5-style program: hbDSPRpcV2 with the operator's parameters packed into its input buffer
 * (docs/capi.md, "Parameters packed into the input"), as the J5 sample's ARM side does: the
 * struct of hb_dsp_ops.h at byte 0, the data from HB_DSP_PACKED_DATA(header).
 *
 *   capi_packed_check blur IN W H STRIDE OUT        a 5x3 gaussianBlur (sigma 1.5, 0.75, "replicate")
 *                                                   of the Y image in file IN; its W x H output into OUT
 *   capi_packed_check encode POINTS N CELLS XYZR    pointcloud_encode of N points (4 floats each) in
 *                                                   POINTS; its two outputs (hbDSPPackedBuffers) into
 *                                                   CELLS and XYZR; prints "valid V"
 *   capi_packed_check small                         prints the code and text of a packed input one
 *                                                   byte too small for gaussianBlur
 *
 * Buffers are cached, cleaned before the task and invalidated after, as on the board.
 * Run by tests/integration/test_capi_packed.py, which compares the outputs with the Python SDK's.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hb_dnn.h"
#include "hb_dsp.h"
#include "hb_sys.h"

#define CHECK(call)                                                               \
  do {                                                                            \
    int32_t rc_ = (call);                                                         \
    if (rc_ != 0) {                                                               \
      fprintf(stderr, "%s failed: %d %s\n", #call, rc_, hbDNNGetErrorDesc(rc_)); \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

static long read_file(const char *path, void *into, long cap) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) exit(2);
  long n = (long)fread(into, 1, (size_t)cap, f);
  fclose(f);
  return n;
}

static void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(data, 1, n, f) != n) exit(2);
  fclose(f);
}

static hbDSPTask_t run(hbSysMem *input, hbSysMem *output, int32_t op) {
  hbDSPTask_t task = NULL;
  hbDSPRpcCtrlParam ctrl;
  HB_DSP_INITIALIZE_RPC_CTRL_PARAM(&ctrl);
  CHECK(hbSysFlushMem(input, HB_SYS_MEM_CACHE_CLEAN));
  CHECK(hbDSPRpcV2(&task, input, output, op, &ctrl));
  CHECK(hbDSPWaitTaskDone(task, 0));
  CHECK(hbSysFlushMem(output, HB_SYS_MEM_CACHE_INVALIDATE));
  return task;
}

static void blur_param(hbDSPGaussianBlurParam *p, int32_t w, int32_t h, int32_t stride) {
  HB_DSP_INITIALIZE_GAUSSIAN_BLUR_PARAM(p);
  p->src.format = HB_DSP_IMAGE_Y, p->src.width = w, p->src.height = h, p->src.stride = stride;
  p->dst.format = HB_DSP_IMAGE_Y, p->dst.width = w, p->dst.height = h;
  p->ksize[0] = 5, p->ksize[1] = 3;
  p->sigma_x = 1.5, p->sigma_y = 0.75;
  p->border = "replicate";
}

static int blur(char **argv) {
  int32_t w = atoi(argv[3]), h = atoi(argv[4]), stride = atoi(argv[5]);
  uint32_t data = HB_DSP_PACKED_DATA(sizeof(hbDSPGaussianBlurParam));
  hbSysMem in, out;
  CHECK(hbSysAllocCachedMem(&in, data + (uint32_t)(stride * h)));
  CHECK(hbSysAllocCachedMem(&out, (uint32_t)(w * h)));
  blur_param((hbDSPGaussianBlurParam *)in.virAddr, w, h, stride);
  if (read_file(argv[2], (char *)in.virAddr + data, stride * h) != stride * h) return 2;
  CHECK(hbDSPReleaseTask(run(&in, &out, HB_DSP_OP_GAUSSIAN_BLUR)));
  write_file(argv[6], out.virAddr, (size_t)(w * h));
  CHECK(hbSysFreeMem(&in));
  CHECK(hbSysFreeMem(&out));
  return 0;
}

static int encode(char **argv) {
  int32_t n = atoi(argv[3]);
  uint32_t header = sizeof(hbDSPPointcloudEncodeParam) + sizeof(hbDSPPackedBuffers);
  uint32_t data = HB_DSP_PACKED_DATA(header), cells = (uint32_t)n * 4;
  uint32_t xyzr_at = HB_DSP_PACKED_DATA(cells);
  hbSysMem in, out;
  CHECK(hbSysAllocCachedMem(&in, data + (uint32_t)n * 16));
  CHECK(hbSysAllocCachedMem(&out, xyzr_at + (uint32_t)n * 4));
  hbDSPPointcloudEncodeParam *p = (hbDSPPointcloudEncodeParam *)in.virAddr;
  HB_DSP_INITIALIZE_POINTCLOUD_ENCODE_PARAM(p);
  p->dim = 4, p->num_points = n;
  p->back = 0.0, p->front = 69.12, p->right = -39.68, p->left = 39.68;
  p->bottom = -3.0, p->top = 1.0, p->lower = 0.0, p->upper = 1.0;
  p->x_scale = 0.16, p->y_scale = 0.16, p->scale = 1.0 / 128;
  hbDSPPackedBuffers split;
  memset(&split, 0, sizeof split);
  split.outputCount = 2; /* cells, then the quantised points from the next 64-byte boundary */
  split.outputSize[0] = cells, split.outputSize[1] = (uint32_t)n * 4;
  memcpy((char *)in.virAddr + sizeof *p, &split, sizeof split);
  if (read_file(argv[2], (char *)in.virAddr + data, n * 16) != n * 16) return 2;
  hbDSPTask_t task = run(&in, &out, HB_DSP_OP_POINTCLOUD_ENCODE);
  int64_t valid = -1;
  CHECK(hbDSPGetTaskValueInt(task, "valid", &valid));
  CHECK(hbDSPReleaseTask(task));
  printf("valid %lld\n", (long long)valid);
  write_file(argv[4], out.virAddr, cells);
  write_file(argv[5], (char *)out.virAddr + xyzr_at, (size_t)n * 4);
  CHECK(hbSysFreeMem(&in));
  CHECK(hbSysFreeMem(&out));
  return 0;
}

static int small(void) {
  uint32_t data = HB_DSP_PACKED_DATA(sizeof(hbDSPGaussianBlurParam));
  hbSysMem in, out;
  CHECK(hbSysAllocMem(&in, data)); /* the struct, but not one byte of image */
  CHECK(hbSysAllocMem(&out, 64));
  blur_param((hbDSPGaussianBlurParam *)in.virAddr, 8, 8, 8);
  hbDSPTask_t task = NULL;
  int32_t rc = hbDSPRpcV2(&task, &in, &out, HB_DSP_OP_GAUSSIAN_BLUR, NULL);
  printf("%d\t%s\n", (int)rc, hbDNNGetErrorDesc(rc));
  CHECK(hbSysFreeMem(&in));
  CHECK(hbSysFreeMem(&out));
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 7 && strcmp(argv[1], "blur") == 0) return blur(argv);
  if (argc == 6 && strcmp(argv[1], "encode") == 0) return encode(argv);
  if (argc == 2 && strcmp(argv[1], "small") == 0) return small();
  fprintf(stderr, "usage: see the comment at the top of tests/capi_packed_check.c\n");
  return 2;
}
