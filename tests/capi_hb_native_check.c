/*
 * A C program of the hbSys/hbDSP functions only, linked with the native library
 * (libvdsp_client.so: arm_side/capi/native/vdsp_hb.c), run by tests/integration/test_capi_hb_native.py
 * against a live SoC. It prints "key value" lines:
 *
 *   check flow     what the process looks like before and after its first call (libpython
 *                  mapped, threads, the SIGINT/SIGTERM dispositions), a checksum and a memcpy
 *                  through cached memory, the task's values, core and board time, the codes of
 *                  a double free and a released handle with their descriptions, first_call_us
 *   check fork     the first call in a child made by fork() after the parent's: its code and ms
 *   check sigint   raise(SIGINT) after a first call (the program's default disposition ends it)
 *   check softmax  an NN operator whose parameter struct holds tensor descriptors
 *   check register PHYS SIZE GRANTED   another process's memory, granted for its first GRANTED bytes
 *   check stopped  a sleep of 20 s on CORE_0 (prints "submitted" once sent), its wait's code and
 *                  description, then a PING on CORE_1 and its code: the test stops CORE_0 meanwhile
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "hb_dnn.h"
#include "hb_dsp.h"
#include "hb_sys.h"

#define CHECK(call)                                                                            \
  do {                                                                                         \
    int32_t rc_ = (call);                                                                      \
    if (rc_ != 0) {                                                                            \
      fprintf(stderr, "%s failed: %d %s\n", #call, (int)rc_, hbDNNGetErrorDesc(rc_));          \
      exit(1);                                                                                 \
    }                                                                                          \
  } while (0)

static int python_mapped(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[4096];
  int found = 0;
  while (f != NULL && fgets(line, sizeof line, f) != NULL) found |= strstr(line, "libpython") != NULL;
  if (f != NULL) fclose(f);
  return found;
}

static int threads(void) {
  DIR *d = opendir("/proc/self/task");
  int n = 0;
  struct dirent *e;
  while (d != NULL && (e = readdir(d)) != NULL) n += e->d_name[0] != '.';
  if (d != NULL) closedir(d);
  return n;
}

static void dispositions(struct sigaction out[2]) {
  sigaction(SIGINT, NULL, &out[0]);
  sigaction(SIGTERM, NULL, &out[1]);
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* The control parameters of a task for `core`. */
static hbDSPRpcCtrlParam on_core(int32_t core) {
  hbDSPRpcCtrlParam ctrl;
  HB_DSP_INITIALIZE_RPC_CTRL_PARAM(&ctrl);
  ctrl.dspCoreId = core;
  return ctrl;
}

static int flow(void) {
  struct sigaction before[2], after[2];
  dispositions(before);
  printf("python_before %d\nthreads_before %d\n", python_mapped(), threads());
  hbSysMem src, dst;
  double t0 = now_us();
  CHECK(hbSysAllocCachedMem(&src, 65536));
  printf("first_call_us %.0f\n", now_us() - t0);
  CHECK(hbSysAllocCachedMem(&dst, 65536));
  for (int i = 0; i < 65536; i++) ((unsigned char *)src.virAddr)[i] = (unsigned char)(i * 7 + 3);
  CHECK(hbSysFlushMem(&src, HB_SYS_MEM_CACHE_CLEAN));
  hbDSPTask_t task = NULL;
  hbDSPRpcCtrlParam ctrl = on_core(HB_DSP_CORE_1);
  hbDSPMemcpyParam param;
  HB_DSP_INITIALIZE_MEMCPY_PARAM(&param);
  CHECK(hbDSPRpcV2Param(&task, &src, 1, &dst, 1, HB_DSP_OP_MEMCPY, &param, sizeof param, &ctrl));
  CHECK(hbDSPWaitTaskDone(task, 0));
  int32_t core = -1;
  CHECK(hbDSPGetTaskCore(task, &core));
  CHECK(hbDSPReleaseTask(task));
  CHECK(hbSysFlushMem(&dst, HB_SYS_MEM_CACHE_INVALIDATE));
  printf("copied %d\nmemcpy_core %d\n", memcmp(src.virAddr, dst.virAddr, 65536) == 0, (int)core);

  hbDSPChecksumParam sum;
  HB_DSP_INITIALIZE_CHECKSUM_PARAM(&sum);
  task = NULL;
  CHECK(hbDSPRpcV2Param(&task, &dst, 1, NULL, 0, HB_DSP_OP_CHECKSUM, &sum, sizeof sum, NULL));
  CHECK(hbDSPWaitTaskDone(task, 10000));
  int64_t crc = 0;
  char json[512];
  CHECK(hbDSPGetTaskValueInt(task, "crc32", &crc));
  CHECK(hbDSPGetTaskValuesJson(task, json, sizeof json));
  printf("crc32 %lld\nvalues %s\n", (long long)crc, json);
  int32_t missing = hbDSPGetTaskValueInt(task, "no_such_value", &crc);
  printf("missing_value %d\n", (int)missing);
  CHECK(hbDSPReleaseTask(task));
  int32_t again = hbDSPReleaseTask(task);
  printf("release_twice %d\nrelease_twice_desc %s\n", (int)again, hbDNNGetErrorDesc(again));

  task = NULL;   /* a task released before it ran never runs: the next one still gets its reply */
  hbDSPSleepParam nap;
  HB_DSP_INITIALIZE_SLEEP_PARAM(&nap);
  nap.ms = 200;
  CHECK(hbDSPRpcV2Param(&task, NULL, 0, NULL, 0, HB_DSP_OP_SLEEP, &nap, sizeof nap, NULL));
  printf("short_wait %d\n", (int)hbDSPWaitTaskDone(task, 1));
  CHECK(hbDSPReleaseTask(task));
  task = NULL;
  CHECK(hbDSPRpcV2(&task, NULL, NULL, HB_DSP_OP_PING, NULL));
  CHECK(hbDSPWaitTaskDone(task, 0));
  CHECK(hbDSPReleaseTask(task));

  hbSysMem copy = src;
  CHECK(hbSysFreeMem(&src));
  int32_t twice = hbSysFreeMem(&copy);
  printf("free_twice %d\nfree_twice_desc %s\n", (int)twice, hbDNNGetErrorDesc(twice));
  CHECK(hbSysFreeMem(&dst));
  dispositions(after);
  int same = 1;
  for (int i = 0; i < 2; i++)
    same &= before[i].sa_handler == after[i].sa_handler && before[i].sa_flags == after[i].sa_flags;
  printf("signals_unchanged %d\npython_after %d\n", same, python_mapped());
  return 0;
}

static int forked(void) {
  hbSysMem m;
  CHECK(hbSysAllocMem(&m, 4096));
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    hbSysMem c;
    double t0 = now_us();
    int32_t rc = hbSysAllocMem(&c, 64);
    double ms = (now_us() - t0) / 1e3;
    hbDSPTask_t task = NULL;
    int32_t rpc = hbDSPRpcV2(&task, NULL, NULL, HB_DSP_OP_PING, NULL);
    printf("child_rc %d\nchild_ms %.1f\nchild_rpc %d\nchild_desc %s\n", (int)rc, ms, (int)rpc,
           hbDNNGetErrorDesc(rpc));
    fflush(stdout);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  hbDSPTask_t task = NULL;
  CHECK(hbDSPRpcV2(&task, NULL, NULL, HB_DSP_OP_PING, NULL));   /* the parent goes on */
  CHECK(hbDSPWaitTaskDone(task, 0));
  CHECK(hbDSPReleaseTask(task));
  CHECK(hbSysFreeMem(&m));
  printf("child_exit %d\nparent_ok 1\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return 0;
}

/* softmax of 0, 1 ... 9 (an NN operator: tensor descriptors in its parameter struct) */
static int softmax(void) {
  hbSysMem in, out;
  CHECK(hbSysAllocMem(&in, 40));
  CHECK(hbSysAllocMem(&out, 40));
  for (int i = 0; i < 10; i++) ((float *)in.virAddr)[i] = (float)i;
  hbDSPSoftmaxParam p;
  HB_DSP_INITIALIZE_SOFTMAX_PARAM(&p);
  hbDNNTensorProperties t;
  memset(&t, 0, sizeof t);
  t.validShape.numDimensions = t.alignedShape.numDimensions = 2;
  t.validShape.dimensionSize[0] = t.alignedShape.dimensionSize[0] = 1;
  t.validShape.dimensionSize[1] = t.alignedShape.dimensionSize[1] = 10;
  t.stride[0] = 40;
  t.stride[1] = 4;
  t.tensorLayout = HB_DNN_LAYOUT_NONE;
  t.tensorType = HB_DNN_TENSOR_TYPE_F32;
  p.input = p.output = t;
  hbDSPTask_t task = NULL;
  CHECK(hbDSPRpcV2Param(&task, &in, 1, &out, 1, HB_DSP_OP_SOFTMAX, &p, sizeof p, NULL));
  CHECK(hbDSPWaitTaskDone(task, 0));
  CHECK(hbDSPReleaseTask(task));
  printf("softmax");
  for (int i = 0; i < 10; i++) printf(" %.9g", ((float *)out.virAddr)[i]);
  printf("\n");
  p.input.validShape.numDimensions = 9;
  task = NULL;
  int32_t rc = hbDSPRpcV2Param(&task, &in, 1, &out, 1, HB_DSP_OP_SOFTMAX, &p, sizeof p, NULL);
  printf("bad_dims %d\nbad_dims_desc %s\n", (int)rc, hbDNNGetErrorDesc(rc));
  CHECK(hbSysFreeMem(&in));
  CHECK(hbSysFreeMem(&out));
  return 0;
}

/* memory of another process (PHYS, SIZE bytes; granted to any owner beyond GRANTED bytes not) */
static int registered(const char *phys, const char *size, const char *granted) {
  hbSysMem m = {strtoull(phys, NULL, 16), NULL, (uint32_t)strtoul(granted, NULL, 10)};
  CHECK(hbSysRegisterMem(&m));
  unsigned sum = 0;
  for (uint32_t i = 0; i < m.memSize; i++) sum += ((unsigned char *)m.virAddr)[i];
  ((unsigned char *)m.virAddr)[0] = 0xab;
  CHECK(hbSysFlushMem(&m, HB_SYS_MEM_CACHE_CLEAN));
  printf("registered_sum %u\n", sum);
  CHECK(hbSysUnregisterMem(&m));
  hbSysMem all = {m.phyAddr, NULL, (uint32_t)strtoul(size, NULL, 10)};
  int32_t rc = hbSysRegisterMem(&all);
  printf("past_grant %d\npast_grant_desc %s\n", (int)rc, hbDNNGetErrorDesc(rc));
  return 0;
}

static int sigint(void) {
  hbSysMem m;
  CHECK(hbSysAllocMem(&m, 4096));
  printf("raising 1\n");
  fflush(stdout);
  raise(SIGINT);
  printf("survived 1\n");
  return 0;
}

static int stopped(void) {
  hbDSPTask_t task = NULL;
  hbDSPRpcCtrlParam ctrl = on_core(HB_DSP_CORE_0);
  hbDSPSleepParam nap;
  HB_DSP_INITIALIZE_SLEEP_PARAM(&nap);
  nap.ms = 20000;
  CHECK(hbDSPRpcV2Param(&task, NULL, 0, NULL, 0, HB_DSP_OP_SLEEP, &nap, sizeof nap, &ctrl));
  printf("submitted 1\n");
  fflush(stdout);
  int32_t rc = hbDSPWaitTaskDone(task, 60000);
  printf("code %d\ndesc %s\n", (int)rc, hbDNNGetErrorDesc(rc));
  CHECK(hbDSPReleaseTask(task));
  task = NULL;
  ctrl = on_core(HB_DSP_CORE_1);
  rc = hbDSPRpcV2(&task, NULL, NULL, HB_DSP_OP_PING, &ctrl);
  if (rc == 0) rc = hbDSPWaitTaskDone(task, 30000);
  printf("other_core %d\n", (int)rc);
  if (task != NULL) hbDSPReleaseTask(task);
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "flow";
  int rc = strcmp(mode, "fork") == 0     ? forked()
           : strcmp(mode, "sigint") == 0 ? sigint()
           : strcmp(mode, "softmax") == 0 ? softmax()
           : strcmp(mode, "stopped") == 0 ? stopped()
           : strcmp(mode, "register") == 0 && argc == 5 ? registered(argv[2], argv[3], argv[4])
                                          : flow();
  fflush(stdout);
  return rc;
}
