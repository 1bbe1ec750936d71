/*
 * Stage 2 of the pillar preprocessing (pointcloud_transpose, dsp_side/operators/pointcloud.py)
 * as an IVP kernel of vdsp-sim's own. Input 0 is the pillar-major voxel buffer: per point slot
 * (pillar p, slot s of M: slot p * M + s) the packed int8 features x, y, z, r; input 1 (dim 5)
 * the 5th value, one byte per slot. Output 0 is `dim` planes of int8 features:
 *   cpm: plane c is [stride][M]: byte p * M + s = feature c of slot (p, s);
 *   cmp: plane c is [M][stride]: byte s * stride + p = feature c of slot (p, s);
 * and 0 for every slot of a pillar past num_pillars.
 *
 * Both stream through TCM: tile t of the input comes into bank t % 2 by IDMA while tile t - 1
 * is computed, and drains by one 2-D transfer. A row of the output tile is built 64 bytes a
 * step: two 8-bit gathers of 32 elements `pitch` bytes apart (based at the step's first byte
 * wanted, byte offsets pitch * i: inside the 64 kB window; the offsets computed once per call)
 * joined into one vector and stored by an aligning store. Invariants:
 * a tile's input is at most 64 kB and its element count a multiple of 64, so every gather is
 * inside the window and inside the tile's allocation; a step may read elements past the
 * tile's last one (stale TCM bytes), whose output bytes are never drained.
 */
#include <string.h>
#include <xtensa/tie/xt_ivpn.h>

#include "vdsp_kernel.h"
#include "vdsp_kernel_params.h"

#define STEP (2u * VDSP_IVP_N)  /* elements per vector step: 64 */

/* lanes i of a step's gathers: the byte offsets pitch * i (computed once per kernel call) */
static xb_vecNx16U lane_offsets(uint32_t pitch) {
  xb_vecNx16U offset;
  for (uint32_t i = 0; i < VDSP_IVP_N; i++) offset.s[i] = (uint16_t)(pitch * i);
  return offset;
}

/* row[e] = byte `first` of element e of `in` (elements `pitch` bytes apart; `offset`:
 * lane_offsets(pitch)), e < count rounded up to 64: the gathers' base is the element's byte */
static void gather_row(int8_t const *in, uint32_t pitch, xb_vecNx16U offset, uint32_t first, int8_t *row,
                       uint32_t count) {
  xb_vec2Nx8 *p_out = (xb_vec2Nx8 *)row;
  valign a_store = IVP_ZALIGN();
  in += first;
  for (uint32_t j = 0; j < (count + STEP - 1) / STEP; j++, in += STEP * pitch) {
    xb_gsr lo = IVP_GATHERANX8S(in, offset);
    xb_gsr hi = IVP_GATHERANX8S(in + VDSP_IVP_N * pitch, offset);
    xb_vec2Nx8 feature = IVP_GATHERD2NX8_L(lo);
    IVP_GATHERD2NX8_H(feature, hi);
    IVP_SA2NX8_IP(feature, a_store, p_out);
  }
  IVP_SAPOS2NX8U_FP(a_store, p_out);
}

static uint32_t min_u64(uint64_t a, uint64_t b) { return (uint32_t)(a < b ? a : b); }

/* The elements of a tile: a multiple of 64 whose `bytes` per element fit the operator's TCM
 * budget of a bank and whose input (`in_bytes` each) fits the gather window; 0 if none. */
static uint32_t tile_elements(uint32_t bytes, uint32_t in_bytes) {
  uint32_t n = bytes ? VDSP_TCM_OPERATOR_BYTES / bytes : 0;
  if (in_bytes && n > VDSP_IVP_WINDOW_BYTES / in_bytes) n = VDSP_IVP_WINDOW_BYTES / in_bytes;
  return n - n % STEP;
}

/* cpm: tiles of `per` slots; plane c of a tile is row c of the output tile */
static void cpm(int8_t const *xyzr, int8_t const *t5, int8_t *dst, uint32_t dim, uint64_t slots, uint32_t plane,
                uint32_t per) {
  int8_t *in[2], *out[2];
  for (int k = 0; k < 2; k++) {
    in[k] = (int8_t *)vdsp_tcm_alloc(k, per * 4, k ? "xyzr_pong" : "xyzr_ping");
    out[k] = (int8_t *)vdsp_tcm_alloc(k, per * dim, k ? "planes_pong" : "planes_ping");
  }
  uint32_t const tiles = (uint32_t)((slots + per - 1) / per);
  xb_vecNx16U const by4 = lane_offsets(4);
  vdsp_dma_t fill[2] = {0, 0}, drain[2] = {0, 0};
  if (tiles) fill[0] = vdsp_idma_copy(in[0], xyzr, min_u64(slots, per) * 4);
  for (uint32_t t = 0; t < tiles; t++) {
    uint32_t const k = t & 1, at = t * per, len = min_u64(slots - at, per);
    if (t + 1 < tiles) /* the next tile into the other bank */
      fill[1 - k] = vdsp_idma_copy(in[1 - k], xyzr + (uint64_t)(at + per) * 4, min_u64(slots - at - per, per) * 4);
    vdsp_idma_wait(fill[k]);
    if (drain[k]) vdsp_idma_wait(drain[k]); /* out[k] still drains tile t - 2 */
    if (t5) vdsp_idma_wait(vdsp_idma_copy(out[k] + 4 * per, t5 + at, len)); /* plane 4 is a copy */
    for (uint32_t c = 0; c < 4; c++) gather_row(in[k], 4, by4, c, out[k] + c * per, len);
    drain[k] = vdsp_idma_copy_2d(dst + at, out[k], len, dim, plane, per);
  }
  vdsp_idma_wait_all();
  memset(out[0], 0, per * dim);
  for (uint64_t o = slots; o < plane; o += per) /* the slots of unused pillars, every plane */
    vdsp_idma_copy_2d(dst + o, out[0], min_u64(plane - o, per), dim, plane, per);
  vdsp_idma_wait_all();
}

/* cmp: tiles of `per` pillars (a multiple of 64); row c * M + s of the output tile holds
 * feature c of slot s of the tile's pillars, gathered 4 * M bytes (M for the 5th value) apart */
static void cmp(int8_t const *xyzr, int8_t const *t5, int8_t *dst, uint32_t dim, uint32_t m, uint32_t used,
                uint32_t stride, uint32_t per) {
  int8_t *in[2], *tin[2] = {NULL, NULL}, *out[2];
  for (int k = 0; k < 2; k++) {
    in[k] = (int8_t *)vdsp_tcm_alloc(k, per * 4 * m, k ? "xyzr_pong" : "xyzr_ping");
    if (t5) tin[k] = (int8_t *)vdsp_tcm_alloc(k, per * m, k ? "t_pong" : "t_ping");
    out[k] = (int8_t *)vdsp_tcm_alloc(k, per * m * dim, k ? "rows_pong" : "rows_ping");
  }
  uint32_t const tiles = (used + per - 1) / per;
  xb_vecNx16U const by_slot = lane_offsets(4 * m), by_t = lane_offsets(m);
  vdsp_dma_t fill[2] = {0, 0}, drain[2] = {0, 0};
  for (uint32_t t = 0; t <= tiles; t++) {
    uint32_t const k = t & 1;
    if (t < tiles) { /* tile t into bank t % 2 (its 5th values first: the fill waited for is the last) */
      uint32_t const at_t = t * per, len_t = min_u64(used - at_t, per);
      if (t5) vdsp_idma_copy(tin[k], t5 + (uint64_t)at_t * m, len_t * m);
      fill[k] = vdsp_idma_copy(in[k], xyzr + (uint64_t)at_t * 4 * m, len_t * 4 * m);
    }
    if (t == 0) continue;
    uint32_t const b = 1 - k, at = (t - 1) * per, len = min_u64(used - at, per); /* tile t - 1, in bank b */
    vdsp_idma_wait(fill[b]);
    if (drain[b]) vdsp_idma_wait(drain[b]); /* out[b] still drains tile t - 3 */
    for (uint32_t c = 0; c < dim; c++)
      for (uint32_t s = 0; s < m; s++)
        gather_row(c < 4 ? in[b] : tin[b], c < 4 ? 4 * m : m, c < 4 ? by_slot : by_t, c < 4 ? 4 * s + c : s,
                   out[b] + (c * m + s) * per, len);
    drain[b] = vdsp_idma_copy_2d(dst + at, out[b], len, dim * m, stride, per);
  }
  vdsp_idma_wait_all();
  /* the columns of unused pillars: in each of the dim * M rows, stride - used contiguous bytes,
   * written row by row (long runs, as a DMA streams best) in pieces of at most the zeroed
   * tile's bytes, as many rows a transfer as the tile holds; at most 128 transfers in flight */
  uint32_t const zeros = per * m * dim, rows = dim * m;
  memset(out[0], 0, zeros);
  uint32_t issued = 0;
  for (uint32_t o = used; o < stride; o += zeros) {
    uint32_t const len = min_u64(stride - o, zeros), k = zeros / len; /* k >= 1 rows of len bytes */
    for (uint32_t r = 0; r < rows; r += k) {
      vdsp_idma_copy_2d(dst + (uint64_t)r * stride + o, out[0], len, min_u64(rows - r, k), stride, len);
      if (++issued % 128 == 0) vdsp_idma_wait_all();
    }
  }
  vdsp_idma_wait_all();
}

VDSP_KERNEL(pointcloud_transpose_kernel) {
  hbDSPPointcloudTransposeParam const *p = VDSP_PARAM(task, hbDSPPointcloudTransposeParam);
  uint32_t const dim = (uint32_t)p->dim, m = (uint32_t)p->max_points;
  uint64_t const slots = (uint64_t)p->num_pillars * m, plane = (uint64_t)p->pillar_stride * m;
  int const is_cpm = p->layout && !strcmp(p->layout, "cpm");
  /* cpm tiles: slots of 4 + dim bytes; cmp tiles: pillars of (4 + [dim 5] + dim) * M bytes */
  uint32_t const per = is_cpm ? tile_elements(4 + dim, 4) : tile_elements((4 + (dim == 5) + dim) * m, 4 * m);
  if (p->num_pillars > p->max_pillars || p->pillar_stride < p->max_pillars || task->num_inputs != (dim == 5 ? 2 : 1) ||
      task->inputs[0].data_size < slots * 4 || (dim == 5 && task->inputs[1].data_size < slots) ||
      task->outputs[0].data_size < plane * dim || plane > UINT32_MAX || per == 0) {
    VDSP_LOGE("layout %s, dim %u, max_points %u: parameters or buffers this kernel does not take",
              p->layout ? p->layout : "(none)", dim, m);
    return -1;
  }
  int8_t const *xyzr = (int8_t const *)task->inputs[0].tile_buffer;
  int8_t const *t5 = dim == 5 ? (int8_t const *)task->inputs[1].tile_buffer : NULL;
  int8_t *dst = (int8_t *)task->outputs[0].tile_buffer;
  if (is_cpm)
    cpm(xyzr, t5, dst, dim, slots, (uint32_t)plane, per);
  else
    cmp(xyzr, t5, dst, dim, m, (uint32_t)p->num_pillars, (uint32_t)p->pillar_stride, per);
  return 0;
}
