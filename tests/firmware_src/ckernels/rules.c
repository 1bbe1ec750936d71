/* Kernels that break the board's rules on purpose (tests). */
#include <stdlib.h>
#include <string.h>

#include "vdsp_kernel.h"
#include "vdsp_kernel_params.h"

/* output[0]: its first half what the tile held before the wait, its second half after it */
VDSP_KERNEL(peek_kernel) {
  uint32_t n = task->inputs[0].data_size;
  uint8_t *out = (uint8_t *)task->outputs[0].tile_buffer;
  if (task->outputs[0].data_size < 2 * n) return 2;
  TileBuffer tile = vdsp_tcm_tile(0, n, "peek_tile");
  vdsp_dma_t id = vdsp_idma_copy(tile.tile_buffer, task->inputs[0].tile_buffer, n);
  memcpy(out, tile.tile_buffer, n); /* too early */
  vdsp_idma_wait(id);
  memcpy(out + n, tile.tile_buffer, n);
  return 0;
}

VDSP_KERNEL(tcm_kernel) {
  hbDSPTcmTakeParam const *p = VDSP_PARAM(task, hbDSPTcmTakeParam);
  for (int32_t i = 0; i < p->sizes_count; i++) vdsp_tcm_alloc((int)p->bank, (uint32_t)p->sizes[i], p->name);
  VDSP_LOGI("tcm_take: %d allocations in bank %d, %u bytes left", p->sizes_count, (int)p->bank,
            vdsp_tcm_free((int)p->bank));
  return 0;
}

VDSP_KERNEL(segv_kernel) {
  (void)task;
  *(int volatile *)0 = 1;
  return 0;
}

VDSP_KERNEL(abort_kernel) {
  (void)task;
  abort();
}

VDSP_KERNEL(no_wait_kernel) {
  TileBuffer tile = vdsp_tcm_tile(1, task->inputs[0].data_size, "dropped");
  vdsp_idma_copy(tile.tile_buffer, task->inputs[0].tile_buffer, tile.data_size);
  return 0;
}
