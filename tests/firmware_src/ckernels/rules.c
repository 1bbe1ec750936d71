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

/* the rectangle roi = {x, y, w, h} of an image `width` bytes wide: DDR -> TCM packed -> DDR */
VDSP_KERNEL(crop_kernel) {
  hbDSPCropParam const *p = VDSP_PARAM(task, hbDSPCropParam);
  uint32_t x = (uint32_t)p->roi[0], y = (uint32_t)p->roi[1], w = (uint32_t)p->roi[2], h = (uint32_t)p->roi[3];
  uint32_t width = (uint32_t)p->width;
  uint8_t const *src = (uint8_t const *)task->inputs[0].tile_buffer;
  TileBuffer tile = vdsp_tcm_tile(1, w * h, "crop_tile");
  vdsp_idma_wait(vdsp_idma_copy_2d(tile.tile_buffer, src + (uint64_t)y * width + x, w, h, w, width));
  vdsp_idma_wait(vdsp_idma_copy_2d(task->outputs[0].tile_buffer, tile.tile_buffer, w, h, w, w));
  return 0;
}

/* output = `rows` copies of the input's bytes, `pitch` bytes apart, by one 2-D transfer from one
 * TCM row whose source pitch is `src_pitch` (0: the one row, repeated) */
VDSP_KERNEL(repeat_row_kernel) {
  hbDSPRepeatRowParam const *p = VDSP_PARAM(task, hbDSPRepeatRowParam);
  uint32_t const w = task->inputs[0].data_size;
  TileBuffer row = vdsp_tcm_tile(0, w, "row");
  vdsp_idma_wait(vdsp_idma_copy(row.tile_buffer, task->inputs[0].tile_buffer, w));
  vdsp_idma_wait(vdsp_idma_copy_2d(task->outputs[0].tile_buffer, row.tile_buffer, w, (uint32_t)p->rows,
                                   (uint32_t)p->pitch, (uint32_t)p->src_pitch));
  return 0;
}

VDSP_KERNEL(misuse_kernel) {
  hbDSPMisuseParam const *p = VDSP_PARAM(task, hbDSPMisuseParam);
  TileBuffer tile = vdsp_tcm_tile(0, 64, "small");
  if (!strcmp(p->how, "into_input")) /* an input is not a destination */
    vdsp_idma_copy(task->inputs[0].tile_buffer, tile.tile_buffer, 16);
  else if (!strcmp(p->how, "outside_tile")) /* 65 bytes into a 64-byte allocation */
    vdsp_idma_copy(tile.tile_buffer, task->inputs[0].tile_buffer, 65);
  else if (!strcmp(p->how, "bank_2"))
    vdsp_tcm_alloc(2, 16, "nowhere");
  else
    vdsp_idma_wait(7);
  return 0;
}

VDSP_KERNEL(spin_kernel) {
  (void)task;
  for (uint64_t volatile i = 0;; i++) {
  }
}

VDSP_KERNEL(overflow_kernel) {
  int32_t x = INT32_MAX - 1;
  x += (int32_t)VDSP_PARAM(task, hbDSPOverflowParam)->add;
  VDSP_LOGI("overflow: %d", (int)x);
  return 0;
}

/* out = in through TCM: tile t in ping (bank 0) or pong (bank pong_bank) as t is even or odd;
 * while tile t is copied out of its buffer, tile t + 1 is fetched into the other one */
VDSP_KERNEL(pingpong_kernel) {
  enum { TILE = 1024 };
  int pong_bank = (int)VDSP_PARAM(task, hbDSPPingpongCopyParam)->pong_bank;
  uint8_t const *src = (uint8_t const *)task->inputs[0].tile_buffer;
  uint8_t *dst = (uint8_t *)task->outputs[0].tile_buffer;
  uint32_t n = task->inputs[0].data_size < task->outputs[0].data_size ? task->inputs[0].data_size
                                                                      : task->outputs[0].data_size;
  uint32_t tiles = (n + TILE - 1) / TILE;
  TileBuffer buf[2] = {vdsp_tcm_tile(0, TILE, "ping"), vdsp_tcm_tile(pong_bank, TILE, "pong")};
  vdsp_dma_t fill[2] = {0, 0}, drain[2] = {0, 0};
  if (tiles) fill[0] = vdsp_idma_copy(buf[0].tile_buffer, src, n < TILE ? n : TILE);
  for (uint32_t t = 0; t < tiles; t++) {
    uint32_t k = t & 1, at = t * TILE, len = n - at < TILE ? n - at : TILE;
    if (t + 1 < tiles) {
      uint32_t next = at + TILE;
      if (drain[1 - k]) vdsp_idma_wait(drain[1 - k]);
      fill[1 - k] = vdsp_idma_copy(buf[1 - k].tile_buffer, src + next, n - next < TILE ? n - next : TILE);
    }
    vdsp_idma_wait(fill[k]);
    drain[k] = vdsp_idma_copy(dst + at, buf[k].tile_buffer, len);
  }
  vdsp_idma_wait_all();
  return 0;
}

/* one byte written where it should not be */
VDSP_KERNEL(scribble_kernel) {
  hbDSPScribbleParam const *p = VDSP_PARAM(task, hbDSPScribbleParam);
  uint8_t volatile *base;
  if (!strcmp(p->where, "output"))
    base = (uint8_t volatile *)task->outputs[0].tile_buffer;
  else if (!strcmp(p->where, "input"))
    base = (uint8_t volatile *)task->inputs[0].tile_buffer;
  else
    base = (uint8_t volatile *)vdsp_tcm_alloc(1, 64, "scratch");
  base[p->offset] = 0x5a;
  return 0;
}

/* through a pointer to volatile bytes: the store is never optimized away (a plain one would be,
 * the block being freed unread; and GCC's ASan does not check stores through a volatile pointer
 * variable, char *volatile) */
VDSP_KERNEL(heap_kernel) {
  int64_t index = VDSP_PARAM(task, hbDSPHeapOverflowParam)->index;
  char volatile *block = (char volatile *)malloc(16);
  if (!block) return 1;
  block[index] = 1;
  VDSP_LOGI("heap_overflow: wrote byte %d of a 16-byte block", (int)index);
  free((void *)block);
  return 0;
}

/* the task's result: "ok" sets three names (one twice: the last value counts) */
VDSP_KERNEL(results_kernel) {
  char const *how = VDSP_PARAM(task, hbDSPResultsParam)->how;
  if (!strcmp(how, "ok")) {
    vdsp_result("count", 1);
    vdsp_result("big_negative", -(INT64_C(1) << 40));
    vdsp_result("count", 5);
    vdsp_result("_0123456789abcdefghijklmnopqrst", INT64_MAX); /* 31 characters */
  } else if (!strcmp(how, "bad_name")) {
    vdsp_result("1st", 1);
  } else if (!strcmp(how, "long_name")) {
    vdsp_result("_0123456789abcdefghijklmnopqrstu", 1); /* 32 characters */
  } else if (!strcmp(how, "too_many")) {
    static char const *const names[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i"};
    for (int i = 0; i < 9; i++) vdsp_result(names[i], i);
  } else if (!strcmp(how, "then_fail")) {
    vdsp_result("count", 1);
    return 3;
  }
  return 0;
}
