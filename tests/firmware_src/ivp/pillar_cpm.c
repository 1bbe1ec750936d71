/*
 * Stage 2 of the pillar preprocessing (pointcloud_transpose, dsp_side/operators/pointcloud.py),
 * layout "cpm", as an IVP kernel of vdsp-sim's own: the pillar-major voxel buffer (4 packed int8
 * features x, y, z, r per point slot, and for dim 5 a second buffer of the 5th value) becomes
 * `dim` planes of stride x M bytes: plane c, byte s = feature c of slot s (AoS -> SoA).
 *
 * Slots stream through TCM in tiles of TILE_SLOTS: the packed bytes of tile t come into bank
 * t % 2 by IDMA while tile t - 1 is transposed; each plane's 64 bytes of a step are two 8-bit
 * gathers of 32 slots (byte offsets 4i + c from the step's first slot, inside the 64 kB window)
 * joined into one vector and stored with an aligning store; the tile's planes drain by one 2-D
 * transfer. The slots of unused pillars are zeroed from a zero tile. Invariants: a tile's input
 * is at most 64 kB (TILE_SLOTS * 4), so every gather offset is inside the window; a step may
 * read slots past the tile's last one (stale TCM bytes), whose plane bytes are never drained.
 * Layout "cmp" is not done here (returns -1).
 */
#include <string.h>
#include <xtensa/tie/xt_ivpn.h>

#include "vdsp_kernel.h"
#include "vdsp_kernel_params.h"

#define TILE_SLOTS 8192u /* 32 kB of packed input, dim x 8 kB of planes: 72 kB of a bank at most */
#define ZERO_BYTES 6144u /* a row of the zero tile: dim x 6 kB in bank 1 */
#define STEP (2u * VDSP_IVP_N) /* slots per vector step: 64 */

/* plane c of `slots` slots of packed input `in` into `plane` (64-byte steps) */
static void transpose_plane(int8_t const *in, int8_t *plane, uint32_t slots, xb_vecNx16U offset) {
  xb_vec2Nx8 *p_out = (xb_vec2Nx8 *)plane;
  valign a_store = IVP_ZALIGN();
  for (uint32_t i = 0; i < (slots + STEP - 1) / STEP; i++, in += 4 * STEP) {
    xb_gsr lo = IVP_GATHERANX8S(in, offset);
    xb_gsr hi = IVP_GATHERANX8S(in + 4 * VDSP_IVP_N, offset);
    xb_vec2Nx8 feature = IVP_GATHERD2NX8_L(lo);
    IVP_GATHERD2NX8_H(feature, hi);
    IVP_SA2NX8_IP(feature, a_store, p_out);
  }
  IVP_SAPOS2NX8U_FP(a_store, p_out);
}

VDSP_KERNEL(pillar_cpm_kernel) {
  hbDSPPointcloudTransposeParam const *p = VDSP_PARAM(task, hbDSPPointcloudTransposeParam);
  if (!p->layout || strcmp(p->layout, "cpm") != 0) {
    VDSP_LOGE("layout %s: this kernel does cpm only", p->layout ? p->layout : "(none)");
    return -1;
  }
  uint32_t const dim = (uint32_t)p->dim, m = (uint32_t)p->max_points;
  uint64_t const slots = (uint64_t)p->num_pillars * m, plane = (uint64_t)p->pillar_stride * m;
  if (p->num_pillars > p->max_pillars || p->pillar_stride < p->max_pillars || task->num_inputs != (dim == 5 ? 2 : 1) ||
      task->inputs[0].data_size < slots * 4 || (dim == 5 && task->inputs[1].data_size < slots) ||
      task->outputs[0].data_size < plane * dim || plane > UINT32_MAX) {
    VDSP_LOGE("parameters or buffers do not fit: dim %u, %llu of %llu slots", dim, (unsigned long long)slots,
              (unsigned long long)plane);
    return -1;
  }
  int8_t const *xyzr = (int8_t const *)task->inputs[0].tile_buffer;
  int8_t const *t5 = dim == 5 ? (int8_t const *)task->inputs[1].tile_buffer : NULL;
  int8_t *dst = (int8_t *)task->outputs[0].tile_buffer;
  int8_t *in[2], *out[2];
  xb_vecNx16U offset[4];
  for (int k = 0; k < 2; k++) {
    in[k] = (int8_t *)vdsp_tcm_alloc(k, TILE_SLOTS * 4, k ? "xyzr_pong" : "xyzr_ping");
    out[k] = (int8_t *)vdsp_tcm_alloc(k, TILE_SLOTS * dim, k ? "planes_pong" : "planes_ping");
  }
  for (uint32_t c = 0; c < 4; c++)
    for (uint32_t i = 0; i < VDSP_IVP_N; i++) offset[c].s[i] = (uint16_t)(4 * i + c);

  uint32_t const tiles = (uint32_t)((slots + TILE_SLOTS - 1) / TILE_SLOTS);
  vdsp_dma_t fill[2] = {0, 0}, drain[2] = {0, 0};
  if (tiles) fill[0] = vdsp_idma_copy(in[0], xyzr, (uint32_t)(slots < TILE_SLOTS ? slots : TILE_SLOTS) * 4);
  for (uint32_t t = 0; t < tiles; t++) {
    uint32_t const k = t & 1, at = t * TILE_SLOTS, len = (uint32_t)(slots - at < TILE_SLOTS ? slots - at : TILE_SLOTS);
    if (t + 1 < tiles) { /* the next tile into the other bank */
      uint32_t const next = at + TILE_SLOTS;
      uint32_t const next_len = (uint32_t)(slots - next < TILE_SLOTS ? slots - next : TILE_SLOTS);
      fill[1 - k] = vdsp_idma_copy(in[1 - k], xyzr + (uint64_t)next * 4, next_len * 4);
    }
    vdsp_idma_wait(fill[k]);
    if (drain[k]) vdsp_idma_wait(drain[k]); /* out[k] still drains tile t - 2 */
    if (t5) vdsp_idma_wait(vdsp_idma_copy(out[k] + 4 * TILE_SLOTS, t5 + at, len)); /* plane 4 is a copy */
    for (uint32_t c = 0; c < 4; c++) transpose_plane(in[k], out[k] + c * TILE_SLOTS, len, offset[c]);
    drain[k] = vdsp_idma_copy_2d(dst + at, out[k], len, dim, (uint32_t)plane, TILE_SLOTS);
  }
  vdsp_idma_wait_all();

  int8_t *zero = (int8_t *)vdsp_tcm_alloc(1, ZERO_BYTES * dim, "zero");
  memset(zero, 0, ZERO_BYTES * dim);
  for (uint64_t o = slots; o < plane; o += ZERO_BYTES) /* the slots of unused pillars, every plane */
    vdsp_idma_copy_2d(dst + o, zero, (uint32_t)(plane - o < ZERO_BYTES ? plane - o : ZERO_BYTES), dim, (uint32_t)plane,
                      ZERO_BYTES);
  vdsp_idma_wait_all();
  return 0;
}
