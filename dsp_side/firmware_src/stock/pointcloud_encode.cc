/*
 * Stage 1 of the pillar preprocessing (pointcloud_encode, dsp_side/operators/pointcloud.py) as the
 * stock image's IVP kernel, in the J5 sample's style. Input 0: N points of `dim` float32 values.
 * Output 0: int32 per point, idy << 16 | idx, or -1 outside the open x, y, z ranges (NaN and
 * infinities included); output 1: the quantised x, y, z, r as four int8 of one int32; output 2
 * (dim 5): the quantised 5th value, one int8 per point. A feature is ((v - lo) / (hi - lo)) / scale
 * in float32 (the 5th value: v / scale), rounded to nearest even, clamped to [-128, 127], NaN 0.
 *
 * The points stream through TCM: tile t comes into bank t % 2 by IDMA while tile t - 1 is computed;
 * a tile's outputs are built in the same bank and drain by IDMA. A step takes 16 points: their
 * 16 * dim words by dim aligned loads, each value (word dim * i + c of the step) taken out of
 * them by dim - 1 word selections (IVP_SELN_2X32, index vectors from a constant table), the
 * cell and the features computed on 16 lanes, the results stored into the output tiles by aligned
 * stores (64 bytes, 16 points, a store). The 5th values are stored as int32 and packed to bytes
 * 64 at a time by loads and byte deinterleaving. Invariants: a tile holds a multiple of 64
 * points and its buffers start on 64-byte boundaries (TCM allocations do), a step's bytes are a
 * multiple of 64 too, so every load and store is aligned and stays inside the tile's allocations
 * (a last step may read stale TCM bytes past the tile's points; their results are never drained).
 */
#include <string.h>
#include <xtensa/tie/xt_ivpn.h>

#include "vdsp_kernel.h"
#include "vdsp_kernel_params.h"

namespace {

constexpr uint32_t kLanes = VDSP_IVP_N_2; /* points per step: 16 */
constexpr uint32_t kPack = VDSP_IVP_2N;   /* 5th values packed to bytes per step: 64 */

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

/* The 32-bit lanes of a float vector as an integer vector and back (the same bits: on the core
 * one register file holds both). */
VDSP_KERNEL_INLINE xb_vecN_2xf32 as_float(xb_vecN_2x32v v) {
  xb_vecN_2xf32 f;
  memcpy(f.s, v.s, sizeof f.s);
  return f;
}

/* The selections that take value c of a step's 16 points (word D * i + c of its D vectors of
 * 16 words: vector (D * i + c) / 16, lane (D * i + c) % 16) out of the D vectors: sel[c][0]
 * from v1:v0, sel[c][k] (k >= 1) from v(k + 1) and what the selections before it gathered.
 * A table the compiler makes, for D 4 or 5 (constants of the kernel, as on the board). */
template <uint32_t D>
struct Selectors {
  int32_t sel[D][D - 1][kLanes];
  constexpr Selectors() : sel() {
    for (uint32_t c = 0; c < D; c++)
      for (uint32_t k = 0; k + 1 < D; k++)
        for (uint32_t i = 0; i < kLanes; i++) {
          uint32_t const w = D * i + c, from = w / kLanes, lane = w % kLanes;
          sel[c][k][i] = (int32_t)(from == k + 1 ? kLanes + lane : k == 0 && from == 0 ? lane : i);
        }
  }
};
template <uint32_t D>
constexpr Selectors<D> kSelectors{};

/* selector k of value c as a vector */
template <uint32_t D>
VDSP_KERNEL_INLINE xb_vecN_2x32v selector(uint32_t c, uint32_t k) {
  xb_vecN_2x32v v;
  memcpy(v.s, kSelectors<D>.sel[c][k], sizeof v.s);
  return v;
}

/* Value c of the step's points: D - 1 selections over its D vectors. */
template <uint32_t D>
VDSP_KERNEL_INLINE xb_vecN_2xf32 value_of(xb_vecN_2x32v const v[D], uint32_t c) {
  xb_vecN_2x32v acc = IVP_SELN_2X32(v[1], v[0], selector<D>(c, 0));
#pragma GCC unroll 8
  for (uint32_t k = 2; k < D; k++) acc = IVP_SELN_2X32(v[k], acc, selector<D>(c, k - 1));
  return as_float(acc);
}

/* One step: the 16 points at `*in` (D values each: D aligned loads of 16 words, each value
 * taken out of them by D - 1 selections), their cells and packed features stored, and for D 5
 * the 5th values as int32. */
struct Cursor {
  xb_vecN_2x32v const *in;
  xb_vecN_2x32v *cells, *xyzr, *t32;
};

template <uint32_t D>
VDSP_KERNEL_INLINE vboolN_2 encode_step(Cursor &at, Params const &f) {
  xb_vecN_2x32v v[D];
#pragma GCC unroll 8
  for (uint32_t c = 0; c < D; c++) IVP_LVN_2X32_IP(v[c], at.in, 64);
  xb_vecN_2xf32 const x = value_of<D>(v, 0), y = value_of<D>(v, 1);
  xb_vecN_2xf32 const z = value_of<D>(v, 2), r = value_of<D>(v, 3);

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
  IVP_SVN_2X32_IP(cell, at.cells, 64);

  /* the features, four int8 packed into one int32 (byte 0 = x) */
  xb_vecN_2x32v const qx = encode(x, f.sub[0], f.div[0], f.scale), qy = encode(y, f.sub[1], f.div[1], f.scale);
  xb_vecN_2x32v const qz = encode(z, f.sub[2], f.div[2], f.scale), qr = encode(r, f.sub[3], f.div[3], f.scale);
  xb_vecN_2x32v const xy = IVP_SELN_2X32I(qy, qx, IVP_SELI_8B_INTERLEAVE_1_EVEN);
  xb_vecN_2x32v const zr = IVP_SELN_2X32I(qr, qz, IVP_SELI_8B_INTERLEAVE_1_EVEN);
  IVP_SVN_2X32_IP(IVP_SELN_2X32I(zr, xy, IVP_SELI_INTERLEAVE_1_EVEN), at.xyzr, 64);
  if (D == 5) IVP_SVN_2X32_IP(quantize(IVP_DIVN_2XF32(value_of<D>(v, D - 1), f.scale)), at.t32, 64);
  return skip;
}

/* The low byte of each of the `len` int32 at t32 into t8, 64 a step: four aligned loads of 16
 * words and two rounds of byte deinterleaving (bytes 0 and 2 of 32 words, then byte 0 of 64),
 * one aligned store (both TCM allocations: 64-byte aligned, room for every step). len >= 1 (a
 * tile has points): a loop without a zero-trip test, as the stage-2 kernel's transpose_packed
 * (docs/dsp_kernels.md, "Board time"). */
VDSP_IVP_HOST_CLONES void pack_low_bytes(int32_t const *t32, int8_t *t8, uint32_t len) {
  xb_vecN_2x32v const *src = (xb_vecN_2x32v const *)t32;
  xb_vecN_2x32v *p_out = (xb_vecN_2x32v *)t8;
  uint32_t const packs = (len + kPack - 1) / kPack;
  uint32_t j = 0;
  do {
    xb_vecN_2x32v v0, v1, v2, v3, e01, o01, e23, o23, b0, b2;
    IVP_LVN_2X32_IP(v0, src, 64), IVP_LVN_2X32_IP(v1, src, 64), IVP_LVN_2X32_IP(v2, src, 64), IVP_LVN_2X32_IP(v3, src, 64);
    IVP_DSELN_2X32I(o01, e01, v1, v0, IVP_DSELI_8B_DEINTERLEAVE_1);
    IVP_DSELN_2X32I(o23, e23, v3, v2, IVP_DSELI_8B_DEINTERLEAVE_1);
    IVP_DSELN_2X32I(b2, b0, e23, e01, IVP_DSELI_8B_DEINTERLEAVE_1);
    IVP_SVN_2X32_IP(b0, p_out, 64);
  } while (++j < packs);
}

/* One tile of `len` points of D values at `in` (TCM, 64-byte aligned): cells and xyzr (int32
 * each) and, D 5, the 5th values as int32 in t32 (pack_low_bytes makes them bytes). Returns
 * `valid` plus, per lane, the tile's points of that lane inside the ranges: each step adds 1
 * where its point is not skipped, then the last step's lanes past the tile's points (`beyond`,
 * stale TCM bytes) are taken off again. */
template <uint32_t D>
VDSP_IVP_HOST_CLONES xb_vecN_2x32v encode_tile(float const *in, uint32_t len, Params const &f,
                                               int32_t *cells, int32_t *xyzr, int32_t *t32, xb_vecN_2x32v valid) {
  Cursor at = {(xb_vecN_2x32v const *)in, (xb_vecN_2x32v *)cells, (xb_vecN_2x32v *)xyzr, (xb_vecN_2x32v *)t32};
  uint32_t const steps = (len + kLanes - 1) / kLanes, last = len - (steps - 1) * kLanes;
  xb_vecN_2x32v const one = 1;
  /* -1 on the last step's lanes past the tile's points (stale TCM bytes); straight-line code, no
   * loop: else, on the SSE2 and AVX2 levels, what the compiler hoists out of the step loop below
   * made a block of its own between the two loops, counted once a tile (test_board_time.py) */
  xb_vecN_2x32v beyond;
#pragma GCC unroll 16
  for (uint32_t i = 0; i < kLanes; i++) beyond.s[i] = -(int32_t)(i >= last);
  vboolN_2 skip;
  uint32_t j = 0;
  do { /* len >= 1: a loop without a zero-trip test, as pack_low_bytes */
    skip = encode_step<D>(at, f);
    valid = IVP_ADDN_2X32(valid, IVP_MOVN_2X32T(0, one, skip));
  } while (++j < steps);
  return IVP_ADDN_2X32(valid, IVP_MOVN_2X32T(0, beyond, skip));
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
  xb_vecN_2x32v valid = 0; /* per lane: points inside the ranges */
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
    if (dim == 5)
      valid = encode_tile<5>(b.in, len, f, b.cells, b.xyzr, b.t32, valid);
    else
      valid = encode_tile<4>(b.in, len, f, b.cells, b.xyzr, b.t32, valid);
    if (dim == 5) pack_low_bytes(b.t32, b.t8, len);
    b.drain = vdsp_idma_copy(cells + at * 4, b.cells, len * 4);
    b.drain = vdsp_idma_copy(xyzr + at * 4, b.xyzr, len * 4);
    if (t8) b.drain = vdsp_idma_copy(t8 + at, b.t8, len);
  }
  vdsp_idma_wait_all();
  int64_t count = 0;
  for (uint32_t i = 0; i < kLanes; i++) count += valid.s[i];
  vdsp_result("valid", count); /* the operator's result, as the CPU reference counts it */
  return 0;
}
