/*
 * Several C threads submitting DSP tasks at once, each with its own buffers: write a pattern
 * through virAddr after memcpy's parameters (hbDSPRpcV2 reads them packed in the input, as on the
 * J5), clean, memcpy on vdsp0 or vdsp1, wait, check the copy.
 *
 *   ./threads [threads] [tasks]     # default 4 threads x 25 tasks
 *   ./threads hold                  # allocate, queue 30 sleeps of 200 ms on vdsp0, print "ready", wait to be killed
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hb_dsp.h"

#define SIZE (64 * 1024)

static int tasks_per_thread = 25;

struct worker {
  int id;
  int ok, failed, on_core[3];
};

static void *work(void *arg) {
  struct worker *w = arg;
  hbSysMem src, dst; /* src: memcpy's parameters, then its data (packed, as the J5 sample packs them) */
  uint32_t data = HB_DSP_PACKED_DATA(sizeof(hbDSPMemcpyParam));
  if (hbSysAllocCachedMem(&src, data + SIZE) != 0 || hbSysAllocMem(&dst, SIZE) != 0) {
    w->failed++;
    return NULL;
  }
  for (int i = 0; i < tasks_per_thread; i++) {
    uint8_t value = (uint8_t)(w->id * 31 + i);
    hbDSPMemcpyParam copy;
    HB_DSP_INITIALIZE_MEMCPY_PARAM(&copy);
    memcpy(src.virAddr, &copy, sizeof copy);
    memset((uint8_t *)src.virAddr + data, value, SIZE);
    hbDSPRpcCtrlParam ctrl;
    HB_DSP_INITIALIZE_RPC_CTRL_PARAM(&ctrl);
    ctrl.dspCoreId = i % 2 ? HB_DSP_CORE_1 : HB_DSP_CORE_0;
    hbDSPTask_t task = NULL;
    int32_t core = 0, ret = hbSysFlushMem(&src, HB_SYS_MEM_CACHE_CLEAN);
    if (ret == 0) ret = hbDSPRpcV2(&task, &src, &dst, HB_DSP_OP_MEMCPY, &ctrl);
    if (ret == 0) ret = hbDSPWaitTaskDone(task, 10000);
    if (ret == 0) ret = hbDSPGetTaskCore(task, &core);
    if (task != NULL && hbDSPReleaseTask(task) != 0) ret = -1;
    uint8_t const *out = dst.virAddr;
    if (ret == 0 && out[0] == value && out[SIZE - 1] == value && core == ctrl.dspCoreId) {
      w->ok++;
      w->on_core[core]++;
    } else {
      fprintf(stderr, "thread %d task %d: ret %d (%s), byte %d, want %d\n", w->id, i, ret, hbDNNGetErrorDesc(ret),
              out[0], value);
      w->failed++;
    }
  }
  if (hbSysFreeMem(&src) != 0 || hbSysFreeMem(&dst) != 0) w->failed++;
  return NULL;
}

static int hold(void) {
  hbSysMem mems[4];
  for (int i = 0; i < 4; i++) {
    int32_t ret = i % 2 ? hbSysAllocMem(&mems[i], 1 << 20) : hbSysAllocCachedMem(&mems[i], 1 << 20);
    if (ret != 0) return 1;
  }
  hbDSPSleepParam sleep_ms;
  HB_DSP_INITIALIZE_SLEEP_PARAM(&sleep_ms);
  sleep_ms.ms = 200;
  hbDSPRpcCtrlParam ctrl;
  HB_DSP_INITIALIZE_RPC_CTRL_PARAM(&ctrl);
  ctrl.dspCoreId = HB_DSP_CORE_0;
  for (int i = 0; i < 30; i++) {
    hbDSPTask_t task = NULL;
    if (hbDSPRpcV2Param(&task, NULL, 0, NULL, 0, HB_DSP_OP_SLEEP, &sleep_ms, sizeof sleep_ms, &ctrl) != 0) return 1;
  }
  printf("ready\n");
  fflush(stdout);
  for (;;) pause();
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "hold") == 0) return hold();
  int n = argc > 1 ? atoi(argv[1]) : 4;
  if (argc > 2) tasks_per_thread = atoi(argv[2]);
  if (n < 1 || n > 64 || tasks_per_thread < 1) return 2;
  struct worker *workers = calloc((size_t)n, sizeof *workers);
  pthread_t *tids = calloc((size_t)n, sizeof *tids);
  if (workers == NULL || tids == NULL) return 1;
  for (int i = 0; i < n; i++) {
    workers[i].id = i;
    if (pthread_create(&tids[i], NULL, work, &workers[i]) != 0) return 1;
  }
  int failed = 0;
  for (int i = 0; i < n; i++) {
    pthread_join(tids[i], NULL);
    printf("thread %d: %d tasks ok (vdsp0 %d, vdsp1 %d), %d failed\n", i, workers[i].ok, workers[i].on_core[1],
           workers[i].on_core[2], workers[i].failed);
    failed += workers[i].failed;
  }
  free(workers), free(tids);
  return failed ? 1 : 0;
}
