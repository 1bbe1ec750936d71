/*
 * Stage 1 of the pillar preprocessing (pointcloud_encode, dsp_side/operators/pointcloud.py) as the
 * stock image's IVP kernel, in the J5 sample's style. Input 0: N points of `dim` float32 values.
 * Output 0: int32 per point, idy << 16 | idx, or -1 outside the open x, y, z ranges (NaN and
 * infinities included); output 1: the quantised x, y, z, r as four int8 of one int32; output 2
 * (dim 5): the quantised 5th value, one int8 per point. A feature is ((v - lo) / (hi - lo)) / scale
 * in float32 (the 5th value: v / scale), rounded to nearest even, clamped to [-128, 127], NaN 0.
 *
 * The points stream through TCM: tile t comes into bank t % 2 by IDMA while tile t - 1 is computed;
 * a tile's outputs are built in the same bank and drain by IDMA. A step takes 16 points: one gather
 * per value (byte offsets 4 * (dim * i + c)), the cell and the features computed on 16 lanes, the
 * results stored into the output tiles by aligned stores (64 bytes, 16 points, a store). The 5th
 * values are stored as int32 and packed to bytes 64 at a time by 8-bit gathers. Invariants: a tile
 * holds a multiple of 64 points, so a step's gathers and stores stay inside the tile's allocations
 * (a last step may read stale TCM bytes past the tile's points; their results are never drained);
 * the output tiles start on 64-byte boundaries (TCM allocations do), so every store is aligned;
 * every gather offset is below 64 kB from its base, which moves with the step.
 */
#include <string.h>
#include <xtensa/tie/xt_ivpn.h>

#include "vdsp_kernel.h"
#include "vdsp_kernel_params.h"

namespace {

constexpr uint32_t kLanes = VDSP_IVP_N_2; /* points per step: 16 */
constexpr uint32_t kPack = VDSP_IVP_2N;   /* 5th values packed per 8-bit step: 64 */

/* The float32 parameters, as the Python operator and the CPU reference compute them. */
struct Params {
  float back, front, right, left, bottom, top, x_scale, y_scale, scale;
  xb_vecN_2xf32 sub[4], div[4];
};

Params params_of(hbDSPPointcloudEncodeParam const *p) {
  Params f;
  f.back = (float)p->back, f.front = (float)p->front, f.right = (float)p->right, f.left = (float)p->left;
  f.bottom = (float)p->bottom, f.top = (float)p->top, f.x_scale = (float)p->x_scale, f.y_scale = (float)p->y_scale;
  f.scale = (float)p->scale;
  float const lower = (float)p->lower, upper = (float)p->upper;
  float const sub[4] = {f.back, f.right, f.bottom, lower};
  float const div[4] = {f.front - f.back, f.left - f.right, f.top - f.bottom, upper - lower}; /* float32 spans */
  for (int c = 0; c < 4; c++) f.sub[c] = xb_vecN_2xf32(sub[c]), f.div[c] = xb_vecN_2xf32(div[c]);
  return f;
}

/* round to nearest even, clamp to [-128, 127]; NaN gives 0 (IVP_TRUNCN_2XF32 of NaN) */
VDSP_KERNEL_INLINE xb_vecN_2x32v quantize(xb_vecN_2xf32 v) {
  xb_vecN_2x32v const q = IVP_TRUNCN_2XF32(IVP_FIRINTN_2XF32(v), 0);
  return IVP_MINN_2X32(IVP_MAXN_2X32(q, -128), 127);
}

VDSP_KERNEL_INLINE xb_vecN_2x32v encode(xb_vecN_2xf32 v, xb_vecN_2xf32 sub, xb_vecN_2xf32 div, float scale) {
  return quantize(IVP_DIVN_2XF32(IVP_DIVN_2XF32(IVP_SUBN_2XF32(v, sub), div), scale));
}

/* One tile of `len` points at `in` (TCM): cells and xyzr (int32 each) and, dim 5, the 5th values
 * as int32 in t32 then as bytes in t8. */
VDSP_IVP_HOST_CLONES void encode_tile(float const *in, uint32_t len, uint32_t dim, Params const &f, int32_t *cells, int32_t *xyzr,
                 int32_t *t32, int8_t *t8) {
  xb_vecN_2x32Uv offset[5] = {}; /* (offset[4] unused but copied for dim 4) */
  for (uint32_t i = 0; i < kLanes; i++)
    for (uint32_t c = 0; c < dim; c++) offset[c].s[i] = 4 * (dim * i + c);
  /* the loop's offsets as values of their own (the host compiler keeps them in registers) */
  xb_vecN_2x32Uv const o0 = offset[0], o1 = offset[1], o2 = offset[2], o3 = offset[3], o4 = offset[4];
  xb_vecN_2x32v *p_cells = (xb_vecN_2x32v *)cells, *p_xyzr = (xb_vecN_2x32v *)xyzr;
  xb_vecN_2x32v *p_t32 = (xb_vecN_2x32v *)t32;
  uint32_t const steps = (len + kLanes - 1) / kLanes;
  for (uint32_t j = 0; j < steps; j++, in += kLanes * dim) {
    xb_vecN_2xf32 const x = IVP_GATHERDN_2XF32(IVP_GATHERAN_2XF32(in, o0));
    xb_vecN_2xf32 const y = IVP_GATHERDN_2XF32(IVP_GATHERAN_2XF32(in, o1));
    xb_vecN_2xf32 const z = IVP_GATHERDN_2XF32(IVP_GATHERAN_2XF32(in, o2));
    xb_vecN_2xf32 const r = IVP_GATHERDN_2XF32(IVP_GATHERAN_2XF32(in, o3));

    /* the cell: truncation of the float32 quotients; -1 unless strictly inside every range */
    xb_vecN_2x32v const idx = IVP_TRUNCN_2XF32(IVP_DIVN_2XF32(IVP_SUBN_2XF32(x, f.back), f.x_scale), 0);
    xb_vecN_2x32v const idy = IVP_TRUNCN_2XF32(IVP_DIVN_2XF32(IVP_SUBN_2XF32(y, f.right), f.y_scale), 0);
    xb_vecN_2x32v cell = IVP_ADDN_2X32(IVP_SLLN_2X32(idy, 16), idx);
    vboolN_2 skip = IVP_ORBN_2(IVP_ULEN_2XF32(x, f.back), IVP_ULEN_2XF32(f.front, x)); /* NaN: skipped */
    skip = IVP_ORBN_2(skip, IVP_ULEN_2XF32(y, f.right));
    skip = IVP_ORBN_2(skip, IVP_ULEN_2XF32(f.left, y));
    skip = IVP_ORBN_2(skip, IVP_ULEN_2XF32(z, f.bottom));
    skip = IVP_ORBN_2(skip, IVP_ULEN_2XF32(f.top, z));
    cell = IVP_MOVN_2X32T(-1, cell, skip);
    IVP_SVN_2X32_IP(cell, p_cells, 64);

    /* the features, four int8 packed into one int32 (byte 0 = x) */
    xb_vecN_2x32v const qx = encode(x, f.sub[0], f.div[0], f.scale), qy = encode(y, f.sub[1], f.div[1], f.scale);
    xb_vecN_2x32v const qz = encode(z, f.sub[2], f.div[2], f.scale), qr = encode(r, f.sub[3], f.div[3], f.scale);
    xb_vecN_2x32v const xy = IVP_SELN_2X32I(qy, qx, IVP_SELI_8B_INTERLEAVE_1_EVEN);
    xb_vecN_2x32v const zr = IVP_SELN_2X32I(qr, qz, IVP_SELI_8B_INTERLEAVE_1_EVEN);
    IVP_SVN_2X32_IP(IVP_SELN_2X32I(zr, xy, IVP_SELI_INTERLEAVE_1_EVEN), p_xyzr, 64);
    if (dim == 5) {
      xb_vecN_2xf32 const t = IVP_GATHERDN_2XF32(IVP_GATHERAN_2XF32(in, o4));
      IVP_SVN_2X32_IP(quantize(IVP_DIVN_2XF32(t, f.scale)), p_t32, 64);
    }
  }
  if (dim != 5) return;
  /* the low byte of each int32: 64 per step, two 8-bit gathers 4 bytes apart */
  xb_vecNx16U byte_offset;
  for (uint32_t i = 0; i < VDSP_IVP_N; i++) byte_offset.s[i] = (uint16_t)(4 * i);
  int8_t const *src = (int8_t const *)t32;
  xb_vec2Nx8 *p_out = (xb_vec2Nx8 *)t8;
  valign a_store = IVP_ZALIGN();
  /* len >= 1 (a tile has points): a loop without a guard, whose basic blocks are the same
   * whether the compiler hoists the intrinsics' loop-invariant work (the byte offsets) out of it
   * or not (docs/dsp_kernels.md, "Board time") */
  uint32_t const packs = (len + kPack - 1) / kPack;
  uint32_t j = 0;
  do {
    xb_vec2Nx8 packed = IVP_GATHERD2NX8_L(IVP_GATHERANX8S(src, byte_offset));
    IVP_GATHERD2NX8_H(packed, IVP_GATHERANX8S(src + 4 * VDSP_IVP_N, byte_offset));
    IVP_SA2NX8_IP(packed, a_store, p_out);
    src += 4 * kPack;
  } while (++j < packs);
  IVP_SAPOS2NX8U_FP(a_store, p_out);
}

/* Points per tile: a multiple of 64 whose input and outputs fit a bank's operator budget. */
uint32_t tile_points(uint32_t dim) {
  uint32_t const per_point = 4 * dim + 4 + 4 + (dim == 5 ? 4 + 1 : 0);
  uint32_t const n = (VDSP_TCM_OPERATOR_BYTES - 4 * VDSP_TCM_ALIGN) / per_point;
  return n - n % kPack;
}

struct Bank {
  float *in;
  int32_t *cells, *xyzr, *t32;
  int8_t *t8;
  vdsp_dma_t fill, drain;
};

}  // namespace

VDSP_KERNEL(pointcloud_encode_kernel) {
  hbDSPPointcloudEncodeParam const *p = VDSP_PARAM(task, hbDSPPointcloudEncodeParam);
  uint32_t const dim = (uint32_t)p->dim;
  uint64_t const n = (uint64_t)p->num_points;
  if ((dim != 4 && dim != 5) || task->num_outputs != (dim == 5 ? 3 : 2) || n > UINT32_MAX / 20 ||
      task->inputs[0].data_size < n * dim * 4 || task->outputs[0].data_size < n * 4 ||
      task->outputs[1].data_size < n * 4 || (dim == 5 && task->outputs[2].data_size < n)) {
    VDSP_LOGE("dim %u, %llu points: parameters or buffers this kernel does not take", dim, (unsigned long long)n);
    return -1;
  }
  Params const f = params_of(p);
  uint32_t const per = tile_points(dim);
  Bank bank[2];
  for (int k = 0; k < 2; k++) {
    Bank &b = bank[k];
    b.in = (float *)vdsp_tcm_alloc(k, per * dim * 4, k ? "points_pong" : "points_ping");
    b.cells = (int32_t *)vdsp_tcm_alloc(k, per * 4, k ? "cells_pong" : "cells_ping");
    b.xyzr = (int32_t *)vdsp_tcm_alloc(k, per * 4, k ? "xyzr_pong" : "xyzr_ping");
    b.t32 = dim == 5 ? (int32_t *)vdsp_tcm_alloc(k, per * 4, k ? "t32_pong" : "t32_ping") : NULL;
    b.t8 = dim == 5 ? (int8_t *)vdsp_tcm_alloc(k, per, k ? "t_pong" : "t_ping") : NULL;
    b.fill = b.drain = 0;
  }
  float const *points = (float const *)task->inputs[0].tile_buffer;
  int8_t *cells = (int8_t *)task->outputs[0].tile_buffer, *xyzr = (int8_t *)task->outputs[1].tile_buffer;
  int8_t *t8 = dim == 5 ? (int8_t *)task->outputs[2].tile_buffer : NULL;
  uint32_t const tiles = (uint32_t)((n + per - 1) / per);
  if (tiles) bank[0].fill = vdsp_idma_copy(bank[0].in, points, (uint32_t)(n < per ? n : per) * dim * 4);
  for (uint32_t t = 0; t < tiles; t++) {
    Bank &b = bank[t & 1];
    uint64_t const at = (uint64_t)t * per;
    uint32_t const len = (uint32_t)(n - at < per ? n - at : per);
    if (t + 1 < tiles) { /* the next tile into the other bank */
      uint64_t const next = at + per, left = n - next;
      bank[~t & 1].fill = vdsp_idma_copy(bank[~t & 1].in, points + next * dim,
                                         (uint32_t)(left < per ? left : per) * dim * 4);
    }
    vdsp_idma_wait(b.fill);
    if (b.drain) vdsp_idma_wait(b.drain); /* this bank's outputs still drain tile t - 2 */
    encode_tile(b.in, len, dim, f, b.cells, b.xyzr, b.t32, b.t8);
    b.drain = vdsp_idma_copy(cells + at * 4, b.cells, len * 4);
    b.drain = vdsp_idma_copy(xyzr + at * 4, b.xyzr, len * 4);
    if (t8) b.drain = vdsp_idma_copy(t8 + at, b.t8, len);
  }
  vdsp_idma_wait_all();
  return 0;
}
