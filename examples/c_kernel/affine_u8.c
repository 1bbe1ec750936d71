/* affine_u8: out[i] = clip(((in[i] * gain + 128) >> 8) + bias, 0, 255), tile by tile through TCM.
 * Ping-pong: tile k of the input and of the output lives in bank k % 2, so the transfer that
 * fills the next tile and the one that drains the last never share a bank with the compute.
 * The task's result: "clipped", how many bytes the clip changed. */
#include "vdsp_kernel.h"
#include "vdsp_kernel_params.h"

/* the tile's bytes; how many were clipped */
static uint32_t affine(uint8_t const *in, uint8_t *out, uint32_t n, int32_t gain, int32_t bias) {
  uint32_t clipped = 0;
  for (uint32_t i = 0; i < n; i++) {
    int32_t v = ((in[i] * gain + 128) >> 8) + bias;
    clipped += v < 0 || v > 255;
    out[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
  }
  return clipped;
}

VDSP_KERNEL(affine_u8_kernel) {
  hbDSPAffineU8Param const *p = VDSP_PARAM(task, hbDSPAffineU8Param);
  uint8_t const *src = (uint8_t const *)task->inputs[0].tile_buffer;
  uint8_t *dst = (uint8_t *)task->outputs[0].tile_buffer;
  uint32_t n = task->inputs[0].data_size;
  uint32_t tile = (uint32_t)p->tile;
  if (task->outputs[0].data_size < n) {
    VDSP_LOGE("affine_u8: output of %u bytes is smaller than the input (%u)", task->outputs[0].data_size, n);
    return -1;
  }
  TileBuffer in[2] = {vdsp_tcm_tile(0, tile, "in_ping"), vdsp_tcm_tile(1, tile, "in_pong")};
  TileBuffer out[2] = {vdsp_tcm_tile(0, tile, "out_ping"), vdsp_tcm_tile(1, tile, "out_pong")};
  uint32_t tiles = (n + tile - 1) / tile;
  vdsp_dma_t fill[2] = {0, 0}, drain[2] = {0, 0};
  uint64_t clipped = 0;
  if (tiles > 0) fill[0] = vdsp_idma_copy(in[0].tile_buffer, src, n < tile ? n : tile);
  for (uint32_t t = 0; t < tiles; t++) {
    uint32_t k = t & 1, at = t * tile, len = n - at < tile ? n - at : tile;
    if (t + 1 < tiles) { /* fetch the next tile into the other bank while this one is computed */
      uint32_t next = at + tile, next_len = n - next < tile ? n - next : tile;
      fill[1 - k] = vdsp_idma_copy(in[1 - k].tile_buffer, src + next, next_len);
    }
    vdsp_idma_wait(fill[k]);
    if (drain[k]) vdsp_idma_wait(drain[k]); /* out[k] still drains tile t - 2 */
    clipped += affine((uint8_t const *)in[k].tile_buffer, (uint8_t *)out[k].tile_buffer, len, (int32_t)p->gain,
                      (int32_t)p->bias);
    drain[k] = vdsp_idma_copy(dst + at, out[k].tile_buffer, len);
  }
  vdsp_idma_wait_all();
  VDSP_LOGI("affine_u8: %u bytes in %u tiles of %u", n, tiles, tile);
  vdsp_result("clipped", (int64_t)clipped); /* the task's result: {"clipped": ...} */
  return 0;
}
