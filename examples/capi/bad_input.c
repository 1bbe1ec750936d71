/*
 * Bad input gets a code, never a crash: each line is "<case> <code>" (0 or a negative HB_* code).
 *
 *   ./bad_input [FOREIGN_PHYS]   # FOREIGN_PHYS: the physical address of another process's buffer (hex)
 *   ./bad_input nosoc            # the first call when no SoC runs, and what hbDNNGetErrorDesc says
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hb_dsp.h"

static void report(char const *what, int32_t code) { printf("%s %d\n", what, code); }

int main(int argc, char **argv) {
  hbSysMem mem, freed, made_up;
  if (argc > 1 && strcmp(argv[1], "nosoc") == 0) {
    int32_t code = hbSysAllocMem(&mem, 64);
    printf("alloc %d\n%s\n", code, hbDNNGetErrorDesc(code));
    return 0;
  }
  char buf[64];
  /* memory */
  report("alloc_null", hbSysAllocMem(NULL, 64));
  report("alloc_zero", hbSysAllocMem(&mem, 0));
  report("alloc_over_ddr", hbSysAllocMem(&mem, 0xFFFFFFFFu));
  report("alloc", hbSysAllocCachedMem(&mem, 4096));
  report("flush_bad_flag", hbSysFlushMem(&mem, 3));
  report("flush_null", hbSysFlushMem(NULL, HB_SYS_MEM_CACHE_CLEAN));
  report("write_null_src", hbSysWriteMem(&mem, NULL, 4));
  report("write_past_end", hbSysWriteMem(&mem, buf, 0) == 0 ? hbSysWriteMem(&mem, (char *)argv[0], 8192) : -1);
  report("read_null_dest", hbSysReadMem(NULL, &mem, 4));
  report("read_past_end", hbSysReadMem(buf, &mem, 8192));
  report("alloc_second", hbSysAllocMem(&freed, 4096));
  report("free", hbSysFreeMem(&freed));
  report("free_twice", hbSysFreeMem(&freed));
  freed.virAddr = NULL;
  report("flush_freed", hbSysFlushMem(&freed, HB_SYS_MEM_CACHE_CLEAN));
  made_up = mem;
  made_up.phyAddr += 1u << 24; /* this process's owner, no buffer there */
  made_up.virAddr = NULL;
  report("flush_made_up", hbSysFlushMem(&made_up, HB_SYS_MEM_CACHE_CLEAN));
  report("unregister_allocated", hbSysUnregisterMem(&mem));
  hbSysMem part = mem; /* a range of it: flushed alone */
  part.phyAddr += 1024, part.virAddr = (char *)mem.virAddr + 1024, part.memSize = 512;
  report("flush_part", hbSysFlushMem(&part, HB_SYS_MEM_CACHE_CLEAN));
  part.memSize = 8192;
  report("flush_part_past_end", hbSysFlushMem(&part, HB_SYS_MEM_CACHE_CLEAN));
  hbSysMem again = {mem.phyAddr, NULL, 16}; /* this process's own memory, mapped a second time */
  report("register_own", hbSysRegisterMem(&again));
  report("unregister_own", hbSysUnregisterMem(&again));
  report("unregister_twice", hbSysUnregisterMem(&again));
  char const hello[] = "hello";
  char back[6] = {0};
  int32_t code = hbSysWriteMem(&mem, (char *)hello, sizeof hello);
  if (code == 0) code = hbSysReadMem(back, &mem, sizeof back);
  report("write_read", code != 0 ? code : memcmp(hello, back, sizeof hello) == 0 ? 0 : -1);

  /* DSP tasks */
  hbDSPTask_t task = NULL;
  hbDSPRpcCtrlParam ctrl;
  HB_DSP_INITIALIZE_RPC_CTRL_PARAM(&ctrl);
  report("rpc_null_task", hbDSPRpcV2(NULL, NULL, NULL, HB_DSP_OP_PING, NULL));
  report("rpc_freed_input", hbDSPRpcV2(&task, &freed, NULL, HB_DSP_OP_CHECKSUM, NULL));
  report("rpc_made_up_input", hbDSPRpcV2(&task, &made_up, NULL, HB_DSP_OP_CHECKSUM, NULL));
  hbSysMem short_input = mem; /* checksum's struct (8 bytes), then no data */
  short_input.memSize = HB_DSP_PACKED_DATA(sizeof(hbDSPChecksumParam));
  report("rpc_packed_too_small", hbDSPRpcV2(&task, &short_input, NULL, HB_DSP_OP_CHECKSUM, NULL));
  ctrl.dspCoreId = 7;
  report("rpc_bad_core", hbDSPRpcV2(&task, NULL, NULL, HB_DSP_OP_PING, &ctrl));
  HB_DSP_INITIALIZE_RPC_CTRL_PARAM(&ctrl);
  ctrl.priority = 300;
  report("rpc_bad_priority", hbDSPRpcV2(&task, NULL, NULL, HB_DSP_OP_PING, &ctrl));
  report("rpc_buffers_null", hbDSPRpcV2Param(&task, NULL, 2, NULL, 0, HB_DSP_OP_PING, NULL, 0, NULL));
  report("rpc_buffers_negative", hbDSPRpcV2Param(&task, &mem, -1, NULL, 0, HB_DSP_OP_PING, NULL, 0, NULL));
  hbDSPFillParam fill;
  HB_DSP_INITIALIZE_FILL_PARAM(&fill);
  report("rpc_param_size", hbDSPRpcV2Param(&task, NULL, 0, &mem, 1, HB_DSP_OP_FILL, &fill, 4, NULL));
  report("rpc_param_no_struct", hbDSPRpcV2Param(&task, NULL, 0, NULL, 0, 0x1400, &fill, sizeof fill, NULL));
  report("rpc_bad_json", hbDSPRpcV2Json(&task, NULL, 0, &mem, 1, HB_DSP_OP_FILL, "{value: 1", NULL));
  report("rpc_json_not_object", hbDSPRpcV2Json(&task, NULL, 0, &mem, 1, HB_DSP_OP_FILL, "[1]", NULL));
  fill.value = 300; /* outside 0..255: the firmware refuses it */
  task = NULL;
  report("rpc_fill_out_of_range", hbDSPRpcV2Param(&task, NULL, 0, &mem, 1, HB_DSP_OP_FILL, &fill, sizeof fill, NULL));
  report("wait_fill_out_of_range", hbDSPWaitTaskDone(task, 5000));
  report("value_of_failed_task", hbDSPGetTaskValueInt(task, "bytes", (int64_t *)(void *)buf));
  report("release", hbDSPReleaseTask(task));
  report("release_twice", hbDSPReleaseTask(task));
  report("wait_released", hbDSPWaitTaskDone(task, 10));
  report("wait_null", hbDSPWaitTaskDone(NULL, 10));
  report("wait_made_up", hbDSPWaitTaskDone((hbDSPTask_t)(uintptr_t)0x1234, 10));
  task = NULL;
  report("rpc_unknown_operator", hbDSPRpcV2(&task, NULL, NULL, 0x13FF, NULL));
  report("wait_unknown_operator", hbDSPWaitTaskDone(task, 5000));
  report("release_unknown_operator", hbDSPReleaseTask(task));
  hbDSPSleepParam sleep_ms;
  HB_DSP_INITIALIZE_SLEEP_PARAM(&sleep_ms);
  sleep_ms.ms = 300;
  task = NULL;
  report("rpc_sleep", hbDSPRpcV2Param(&task, NULL, 0, NULL, 0, HB_DSP_OP_SLEEP, &sleep_ms, sizeof sleep_ms, NULL));
  report("wait_timeout", hbDSPWaitTaskDone(task, 20));
  report("wait_again", hbDSPWaitTaskDone(task, 5000));
  double slept = 0;
  report("value_slept_ms", hbDSPGetTaskValueDouble(task, "slept_ms", &slept));
  report("value_missing", hbDSPGetTaskValueDouble(task, "nosuch", &slept));
  report("value_null_name", hbDSPGetTaskValueDouble(task, NULL, &slept));
  report("values_json_small", hbDSPGetTaskValuesJson(task, buf, 4));
  report("release_sleep", hbDSPReleaseTask(task));
  if (argc > 1) { /* another process's buffer, not granted to this one */
    hbSysMem foreign = {strtoull(argv[1], NULL, 16), NULL, 4096};
    task = NULL;
    code = hbDSPRpcV2Json(&task, &foreign, 1, NULL, 0, HB_DSP_OP_CHECKSUM, NULL, NULL);
    report("rpc_foreign", code == 0 ? hbDSPWaitTaskDone(task, 5000) : code);
    if (code == 0) hbDSPReleaseTask(task);
    /* hbDSPRpcV2 reads checksum's parameters packed in the input: not this process's memory */
    report("rpc_packed_foreign", hbDSPRpcV2(&task, &foreign, NULL, HB_DSP_OP_CHECKSUM, NULL));
    report("register_foreign", hbSysRegisterMem(&foreign));
  }

  /* the model runtime */
  hbPackedDNNHandle_t pack = NULL;
  hbDNNHandle_t model = NULL;
  char const *missing[] = {"/nonexistent/model.vdnn"};
  char const *nulls[] = {NULL};
  int32_t count = 0;
  report("dnn_missing_file", hbDNNInitializeFromFiles(&pack, missing, 1));
  report("dnn_null_name", hbDNNInitializeFromFiles(&pack, nulls, 1));
  report("dnn_null_handle", hbDNNInitializeFromFiles(NULL, missing, 1));
  report("dnn_not_a_model", hbDNNInitializeFromDDR(&pack, (const void **)(void *)nulls, &count, 1));
  void const *garbage[] = {hello};
  int32_t garbage_length = sizeof hello;
  report("dnn_garbage_model", hbDNNInitializeFromDDR(&pack, garbage, &garbage_length, 1));
  report("dnn_release_made_up", hbDNNRelease((hbPackedDNNHandle_t)(uintptr_t)0x1234));
  report("dnn_count_made_up", hbDNNGetInputCount(&count, (hbDNNHandle_t)(uintptr_t)0x1234));
  report("dnn_handle_made_up", hbDNNGetModelHandle(&model, (hbPackedDNNHandle_t)(uintptr_t)0x1234, "x"));
  report("dnn_wait_made_up", hbDNNWaitTaskDone((hbDNNTaskHandle_t)(uintptr_t)0x1234, 10));
  report("dnn_release_task_null", hbDNNReleaseTask(NULL));
  report("dnn_roi_infer", hbDNNRoiInfer(NULL, NULL, NULL, NULL, 0, NULL, NULL));
  printf("roi_desc %s\n", hbDNNGetErrorDesc(HB_DNN_API_USE_ERROR));
  report("dnn_unregister_unknown", hbDNNUnregisterLayerCreator("NoSuchLayer"));
  report("dnn_register_null", hbDNNRegisterLayerCreator("Softmax", NULL));

  report("free_last", hbSysFreeMem(&mem));
  printf("desc %s\n", hbDNNGetErrorDesc(-1234));
  return 0;
}
