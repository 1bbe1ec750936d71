/*
 * The C side of 'vdsp bench capi' (vdsp_sim/benchmarks/bench_capi.py compiles it against
 * libvdsp_hb). It prints "ready", then for each line "N" read from stdin runs N tasks one after
 * the other (hbDSPRpcV2 / hbDSPRpcV2Param, hbDSPWaitTaskDone, hbDSPReleaseTask) and prints one
 * JSON line: the process's CPU over them (all its threads) and each task's latency in µs.
 *
 *   capi_bench ping
 *   capi_bench blur        # gaussianBlur 5x5 of a 1920x1080 Y image on vdsp0
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hb_dsp.h"

#define MAX_CHUNK 10000

static double seconds(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static hbSysMem src, dst;
static hbDSPGaussianBlurParam blur;
static hbDSPRpcCtrlParam ctrl;

static int task(int is_blur) {
  hbDSPTask_t t = NULL;
  int32_t ret = is_blur ? hbDSPRpcV2Param(&t, &src, 1, &dst, 1, HB_DSP_OP_GAUSSIAN_BLUR, &blur, sizeof blur, &ctrl)
                        : hbDSPRpcV2(&t, NULL, NULL, HB_DSP_OP_PING, &ctrl);
  if (ret == 0) ret = hbDSPWaitTaskDone(t, 30000);
  if (ret == 0) ret = hbDSPReleaseTask(t);
  if (ret != 0) fprintf(stderr, "task failed: %d %s\n", ret, hbDNNGetErrorDesc(ret));
  return ret;
}

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  int is_blur = strcmp(argv[1], "blur") == 0;
  HB_DSP_INITIALIZE_RPC_CTRL_PARAM(&ctrl);
  ctrl.dspCoreId = HB_DSP_CORE_0;
  if (is_blur) {
    if (hbSysAllocMem(&src, 1920 * 1080) != 0 || hbSysAllocMem(&dst, 1920 * 1080) != 0) return 1;
    memset(src.virAddr, 77, 1920 * 1080);
    HB_DSP_INITIALIZE_GAUSSIAN_BLUR_PARAM(&blur);
    blur.src.format = HB_DSP_IMAGE_Y, blur.src.width = 1920, blur.src.height = 1080, blur.src.stride = 1920;
    blur.dst = blur.src;
    blur.sigma_x = 1.5;
  }
  printf("ready\n");
  fflush(stdout);
  char line[64];
  static double lat[MAX_CHUNK];
  while (fgets(line, sizeof line, stdin) != NULL) { /* "N": run N tasks; report the chunk */
    int n = atoi(line);
    if (n < 1 || n > MAX_CHUNK) break;
    double cpu0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
    for (int i = 0; i < n; i++) {
      double t0 = seconds(CLOCK_MONOTONIC);
      if (task(is_blur) != 0) return 1;
      lat[i] = seconds(CLOCK_MONOTONIC) - t0;
    }
    printf("{\"cpu_s\": %.9f, \"lat_us\": [", seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0);
    for (int i = 0; i < n; i++) printf(i ? ", %.3f" : "%.3f", lat[i] * 1e6);
    printf("]}\n");
    fflush(stdout);
  }
  if (is_blur && (hbSysFreeMem(&src) != 0 || hbSysFreeMem(&dst) != 0)) return 1;
  return 0;
}
