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
 * is computed, and drains by one 2-D transfer. The output tile is built 64 elements (4-byte
 * words: a slot's x, y, z, r, or, cmp with M a multiple of 4, four slots' 5th values) a step:
 * four 32-bit gathers of 16 words (lane i of gather k: word 4i + k, words `pitch` bytes apart;
 * gather k's base is word k and all four take one offset vector, 4i words, computed once per
 * call), the four bytes of each lane transposed across the four vectors by eight selections (as
 * stage 1 packs them, the other way), and the four vectors of 64 bytes, byte j of the 64 words
 * each, stored by aligned stores into rows j; cpm's words are consecutive in the tile: four
 * aligned loads of 16 words and two rounds of byte deinterleaving (four IVP_DSELN_2X32I) give
 * the four vectors instead. Otherwise (the 5th values of a cmp layout whose M is not a multiple
 * of 4) a row is built 64 bytes a step by two 8-bit gathers of 32 elements joined into one
 * vector and an aligning store. Invariants: a tile's input is at most 64 kB and its element
 * count a multiple of 64, so every gather is inside the window and inside the tile's
 * allocation; the output rows start on 64-byte boundaries (TCM allocations do, and a tile's
 * element count is a multiple of 64); a step may read elements past the tile's last one (stale
 * TCM bytes), whose output bytes are never drained. The zeros for unused pillars go out by 2-D
 * transfers from one zeroed TCM row of ZERO_ROW bytes (source pitch 0): cpm, each plane's
 * contiguous run in rows of ZERO_ROW bytes; cmp, a column of ZERO_ROW bytes of all dim * M rows
 * a transfer.
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
 * lane_offsets(pitch)), e < count rounded up to 64, count > 0: the gathers' base is the
 * element's byte (a loop without a zero-trip test, as transpose_packed's) */
static void gather_row(int8_t const *in, uint32_t pitch, xb_vecNx16U offset, uint32_t first, int8_t *row,
                       uint32_t count) {
  xb_vec2Nx8 *p_out = (xb_vec2Nx8 *)row;
  valign a_store = IVP_ZALIGN();
  in += first;
  uint32_t const steps = (count + STEP - 1) / STEP;
  uint32_t j = 0;
  do {
    xb_gsr lo = IVP_GATHERANX8S(in, offset);
    xb_gsr hi = IVP_GATHERANX8S(in + VDSP_IVP_N * pitch, offset);
    xb_vec2Nx8 feature = IVP_GATHERD2NX8_L(lo);
    IVP_GATHERD2NX8_H(feature, hi);
    IVP_SA2NX8_IP(feature, a_store, p_out);
    in += STEP * pitch;
  } while (++j < steps);
  IVP_SAPOS2NX8U_FP(a_store, p_out);
}

/* lane i of a step's gathers: byte offset pitch * 4i (gather k's base is word k of the step:
 * lane i of gather k is word 4i + k) */
static void word_offsets(uint32_t pitch, xb_vecN_2x32Uv *offset) {
  for (uint32_t i = 0; i < VDSP_IVP_N_2; i++) offset->s[i] = pitch * 4 * i;
}

/* row j (at row0 + j * row_pitch) byte e = byte j of word e of `in` (words `pitch` bytes apart;
 * `offset`: word_offsets(pitch)), j < 4, e < count rounded up to 64, count > 0; the rows 64-byte
 * aligned (a loop without a zero-trip test, as transpose_packed's) */
VDSP_IVP_HOST_CLONES static void transpose_words(int8_t const *in, uint32_t pitch, xb_vecN_2x32Uv const *lanes,
                                                 int8_t *row0, uint32_t row_pitch, uint32_t count) {
  xb_vecN_2x32Uv const offset = *lanes;
  int8_t const *in1 = in + pitch, *in2 = in + 2 * pitch, *in3 = in + 3 * pitch; /* words 1..3 of a step */
  xb_vecN_2x32v *r0 = (xb_vecN_2x32v *)row0, *r1 = (xb_vecN_2x32v *)(row0 + row_pitch);
  xb_vecN_2x32v *r2 = (xb_vecN_2x32v *)(row0 + 2 * row_pitch), *r3 = (xb_vecN_2x32v *)(row0 + 3 * row_pitch);
  uint32_t const steps = (count + STEP - 1) / STEP;
  uint32_t j = 0;
  do {
    xb_vecN_2x32v const g0 = IVP_GATHERDN_2X32(IVP_GATHERAN_2X32(in, offset));
    xb_vecN_2x32v const g1 = IVP_GATHERDN_2X32(IVP_GATHERAN_2X32(in1, offset));
    xb_vecN_2x32v const g2 = IVP_GATHERDN_2X32(IVP_GATHERAN_2X32(in2, offset));
    xb_vecN_2x32v const g3 = IVP_GATHERDN_2X32(IVP_GATHERAN_2X32(in3, offset));
    /* lane i of a: bytes 0 of g0, g1, bytes 2 of g0, g1; b: bytes 1 and 3; c, d: the same of g2, g3 */
    xb_vecN_2x32v const a = IVP_SELN_2X32I(g1, g0, IVP_SELI_8B_INTERLEAVE_1_EVEN);
    xb_vecN_2x32v const b = IVP_SELN_2X32I(g1, g0, IVP_SELI_8B_INTERLEAVE_1_ODD);
    xb_vecN_2x32v const c = IVP_SELN_2X32I(g3, g2, IVP_SELI_8B_INTERLEAVE_1_EVEN);
    xb_vecN_2x32v const d = IVP_SELN_2X32I(g3, g2, IVP_SELI_8B_INTERLEAVE_1_ODD);
    /* lane i of byte j's vector: byte j of words 4i .. 4i + 3 */
    IVP_SVN_2X32_IP(IVP_SELN_2X32I(c, a, IVP_SELI_INTERLEAVE_1_EVEN), r0, 64);
    IVP_SVN_2X32_IP(IVP_SELN_2X32I(d, b, IVP_SELI_INTERLEAVE_1_EVEN), r1, 64);
    IVP_SVN_2X32_IP(IVP_SELN_2X32I(c, a, IVP_SELI_INTERLEAVE_1_ODD), r2, 64);
    IVP_SVN_2X32_IP(IVP_SELN_2X32I(d, b, IVP_SELI_INTERLEAVE_1_ODD), r3, 64);
    in += STEP * pitch, in1 += STEP * pitch, in2 += STEP * pitch, in3 += STEP * pitch;
  } while (++j < steps);
}

/* the same for consecutive words (`in` 64-byte aligned: a TCM tile), count > 0: four aligned
 * loads of 16 words and two rounds of byte deinterleaving (bytes j and j + 2 of 32 words, then
 * byte j of 64). (A loop without a zero-trip test: the loads' loop-invariant work stays in the
 * entry block, which counts the same blocks as the intrinsics as calls do.) */
VDSP_IVP_HOST_CLONES static void transpose_packed(int8_t const *in, int8_t *row0, uint32_t row_pitch, uint32_t count) {
  xb_vecN_2x32v const *restrict p = (xb_vecN_2x32v const *)in;
  xb_vecN_2x32v *restrict r0 = (xb_vecN_2x32v *)row0, *restrict r1 = (xb_vecN_2x32v *)(row0 + row_pitch);
  xb_vecN_2x32v *restrict r2 = (xb_vecN_2x32v *)(row0 + 2 * row_pitch);
  xb_vecN_2x32v *restrict r3 = (xb_vecN_2x32v *)(row0 + 3 * row_pitch);
  uint32_t const steps = (count + STEP - 1) / STEP;
  uint32_t j = 0;
  do {
    xb_vecN_2x32v v0, v1, v2, v3, e01, o01, e23, o23, b0, b1, b2, b3;
    IVP_LVN_2X32_IP(v0, p, 64), IVP_LVN_2X32_IP(v1, p, 64), IVP_LVN_2X32_IP(v2, p, 64), IVP_LVN_2X32_IP(v3, p, 64);
    /* e01: bytes 0 and 2 of words 0..31 in turn; o01: bytes 1 and 3; e23, o23: of words 32..63 */
    IVP_DSELN_2X32I(o01, e01, v1, v0, IVP_DSELI_8B_DEINTERLEAVE_1);
    IVP_DSELN_2X32I(o23, e23, v3, v2, IVP_DSELI_8B_DEINTERLEAVE_1);
    /* bj: byte j of words 0..63 */
    IVP_DSELN_2X32I(b2, b0, e23, e01, IVP_DSELI_8B_DEINTERLEAVE_1);
    IVP_DSELN_2X32I(b3, b1, o23, o01, IVP_DSELI_8B_DEINTERLEAVE_1);
    IVP_SVN_2X32_IP(b0, r0, 64), IVP_SVN_2X32_IP(b1, r1, 64), IVP_SVN_2X32_IP(b2, r2, 64), IVP_SVN_2X32_IP(b3, r3, 64);
  } while (++j < steps);
}

/* bytes of the zeroed TCM row the zeros for unused pillars are drained from (a page: the
 * output tile's first bytes, zeroed once the tiles are out) */
#define ZERO_ROW 4096u

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
  vdsp_dma_t fill[2] = {0, 0}, drain[2] = {0, 0};
  if (tiles) fill[0] = vdsp_idma_copy(in[0], xyzr, min_u64(slots, per) * 4);
  for (uint32_t t = 0; t < tiles; t++) {
    uint32_t const k = t & 1, at = t * per, len = min_u64(slots - at, per);
    if (t + 1 < tiles) /* the next tile into the other bank */
      fill[1 - k] = vdsp_idma_copy(in[1 - k], xyzr + (uint64_t)(at + per) * 4, min_u64(slots - at - per, per) * 4);
    vdsp_idma_wait(fill[k]);
    if (drain[k]) vdsp_idma_wait(drain[k]); /* out[k] still drains tile t - 2 */
    if (t5) vdsp_idma_wait(vdsp_idma_copy(out[k] + 4 * per, t5 + at, len)); /* plane 4 is a copy */
    transpose_packed(in[k], out[k], per, len);
    drain[k] = vdsp_idma_copy_2d(dst + at, out[k], len, dim, plane, per);
  }
  vdsp_idma_wait_all();
  /* the slots of unused pillars: in each plane the contiguous bytes [slots, plane), ZERO_ROW
   * bytes a row, from one zeroed TCM row (source pitch 0), and the rest by one more transfer */
  uint32_t const zero = min_u64(ZERO_ROW, per * dim), run = (uint32_t)(plane - slots);
  memset(out[0], 0, zero);
  for (uint32_t c = 0; run && c < dim; c++) {
    int8_t *at = dst + (uint64_t)c * plane + slots;
    if (run >= zero) vdsp_idma_copy_2d(at, out[0], zero, run / zero, zero, 0);
    if (run % zero) vdsp_idma_copy(at + run - run % zero, out[0], run % zero);
  }
  vdsp_idma_wait_all();
}

/* cmp: tiles of `per` pillars (a multiple of 64); row c * M + s of the output tile holds
 * feature c of slot s of the tile's pillars, gathered 4 * M bytes (M for the 5th value) apart.
 * (Not inlined into the kernel: GCC's choice differed between the image's build and the one
 * with every intrinsic a call, and with it the basic blocks counted: test_board_time.py.) */
__attribute__((noinline)) static void cmp(int8_t const *xyzr, int8_t const *t5, int8_t *dst, uint32_t dim, uint32_t m, uint32_t used,
                uint32_t stride, uint32_t per) {
  int8_t *in[2], *tin[2] = {NULL, NULL}, *out[2];
  for (int k = 0; k < 2; k++) {
    in[k] = (int8_t *)vdsp_tcm_alloc(k, per * 4 * m, k ? "xyzr_pong" : "xyzr_ping");
    if (t5) tin[k] = (int8_t *)vdsp_tcm_alloc(k, per * m, k ? "t_pong" : "t_ping");
    out[k] = (int8_t *)vdsp_tcm_alloc(k, per * m * dim, k ? "rows_pong" : "rows_ping");
  }
  uint32_t const tiles = (used + per - 1) / per;
  xb_vecN_2x32Uv by_slot, by_t4;
  word_offsets(4 * m, &by_slot), word_offsets(m, &by_t4);
  xb_vecNx16U const by_t = lane_offsets(m);
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
    for (uint32_t s = 0; s < m; s++) /* features 0..3 of slot s: rows c * M + s */
      transpose_words(in[b] + 4 * s, 4 * m, &by_slot, out[b] + s * per, m * per, len);
    if (t5 && m % 4 == 0)
      for (uint32_t s = 0; s < m; s += 4) /* 5th values of slots s..s + 3: rows 4 * M + s .. */
        transpose_words(tin[b] + s, m, &by_t4, out[b] + (4 * m + s) * per, per, len);
    else if (t5)
      for (uint32_t s = 0; s < m; s++) gather_row(tin[b], m, by_t, s, out[b] + (4 * m + s) * per, len);
    drain[b] = vdsp_idma_copy_2d(dst + at, out[b], len, dim * m, stride, per);
  }
  vdsp_idma_wait_all();
  /* the columns of unused pillars: in each of the dim * M rows the stride - used bytes from
   * column `used` on, a column of ZERO_ROW bytes of every row a transfer, from one zeroed TCM
   * row (source pitch 0); at most 128 transfers in flight */
  uint32_t const zero = min_u64(ZERO_ROW, per * m * dim), rows = dim * m;
  memset(out[0], 0, zero);
  uint32_t issued = 0;
  for (uint32_t o = used; o < stride; o += zero) {
    vdsp_idma_copy_2d(dst + o, out[0], min_u64(stride - o, zero), rows, stride, 0);
    if (++issued % 128 == 0) vdsp_idma_wait_all();
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
