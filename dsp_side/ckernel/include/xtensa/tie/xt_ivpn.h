/*
 * <xtensa/tie/xt_ivpn.h>: vdsp-sim's open subset of the Vision P6 IVP vector intrinsics, at the
 * include path of the Xtensa tools, for C kernels compiled for the host (docs/dsp_kernels.md,
 * "The IVP subset"). Written for vdsp-sim from the names and the behaviour the J5 DSP sample's
 * kernels rely on; not Cadence's header.
 *
 * Invariants:
 * - a vector is a plain struct of lanes, lane 0 first; its bytes are the lanes' bytes in memory
 *   order (little-endian, as the board's Xtensa core), sizeof is 64 bytes (512 bits) for every
 *   vector type, so `*(xb_vecN_2xf32 const *)p` loads 16 floats at p as on the board;
 * - every intrinsic is a VDSP_IVP_INLINE function or a macro over one; it reads and writes only
 *   its operands and the memory its semantics (the comment above it) names;
 * - gather/scatter take BYTE offsets from a base; every lane's element must lie inside the
 *   VDSP_IVP_WINDOW_BYTES (64 kB) window that starts at the base and be aligned to the
 *   element's size: otherwise vdsp_ivp_fault (the kernel runtime, src/vdsp_rt.c) ends the task
 *   with HB_DSP_OPERATOR_FAILED and a message naming the intrinsic, lane and offset (outside a
 *   task: a message on stderr and abort()). A program that uses an intrinsic links vdsp_rt.c
 *   (the fault, and the board-time counters below).
 * - a scalar where an intrinsic takes a vector is broadcast to every lane (C++: the vector types'
 *   converting constructors, so `(xb_vecN_2xf32)x` works as with the Xtensa compiler; C11:
 *   _Generic in the intrinsic's macro; C99: vectors only);
 * - an IVP_ name of the ISA that is not in the subset is a compile error naming it (the end of
 *   this file); one the header does not know is an undeclared identifier, which `vdsp firmware
 *   build` reports with how to add it.
 */
#ifndef VDSP_XT_IVPN_H_
#define VDSP_XT_IVPN_H_

#include <stdint.h>
#include <string.h>

/* --- the core's configuration (Vision P6, as J5's DSP) ------------------------------------ */
#define XCHAL_HAVE_VISION 1
#define XCHAL_VISION_TYPE 6             /* Vision P6 */
#define XCHAL_IVPN_SIMD_WIDTH 32        /* N: 16-bit lanes in a 512-bit vector */
#define XCHAL_VISION_SIMD16 XCHAL_IVPN_SIMD_WIDTH
#define XCHAL_HAVE_VISION_SP_VFPU 1     /* single-precision vector floating point */
#define VDSP_IVP_N XCHAL_IVPN_SIMD_WIDTH          /* 32 lanes of 16 bits */
#define VDSP_IVP_N_2 (XCHAL_IVPN_SIMD_WIDTH / 2)  /* 16 lanes of 32 bits */
#define VDSP_IVP_2N (XCHAL_IVPN_SIMD_WIDTH * 2)   /* 64 lanes of 8 bits */
#define VDSP_IVP_WINDOW_BYTES 65536u              /* gather/scatter reach from their base */

typedef float float32_t;

#ifdef __cplusplus
extern "C" {
#endif
/* Reports an intrinsic used against its rules (the runtime: a trap of the running task, or
 * stderr and abort() outside a task). Never returns. */
void vdsp_ivp_fault(char const *intrinsic, char const *fmt, ...)
#if defined(__GNUC__)
    __attribute__((noreturn, format(printf, 2, 3)))
#endif
    ;
#ifdef __cplusplus
}
#define VDSP_IVP_VEC_CTORS(T, E, L)                               \
  T() = default;                                                  \
  VDSP_IVP_NO_COV T(E x) { for (int i = 0; i < (L); i++) s[i] = x; }
#else
#define VDSP_IVP_VEC_CTORS(T, E, L)
#endif

/* --- board-time counters (docs/dsp_kernels.md, "Board time") ------------------------------
 * Every intrinsic of the subset has an id in VDSP_IVP_INTRINSICS; its IVP_ macro counts each use
 * with VDSP_IVP_COUNT(NAME) first thing (an intrinsic whose NAME is not in the list is a compile
 * error), and the ones that touch memory add, in their function, whether it was outside TCM
 * (VDSP_IVP_WHERE). The kernel runtime (src/vdsp_board.c) owns the counters, zeroes them before a
 * task and reads them after it; dsp_side/ckernel/board_model.py prices each id (a test fails for
 * an id without a price). The functions are VDSP_IVP_INLINE: not instrumented when the kernel is
 * compiled with -fsanitize-coverage=trace-pc (the runtime counts the kernel's own basic blocks,
 * not the emulation's). Adding an intrinsic: X(NAME) here, VDSP_IVP_COUNT(NAME) in its macro,
 * VDSP_IVP_INLINE on its functions, its price in board_model.py. */
#define VDSP_IVP_INTRINSICS(X) \
  X(GATHERAN_2XF32) \
  X(GATHERDN_2XF32) \
  X(GATHERANX8S) \
  X(GATHERD2NX8_L) \
  X(GATHERD2NX8_H) \
  X(SCATTERN_2X32) \
  X(SCATTERW) \
  X(SUBN_2XF32) \
  X(DIVN_2XF32) \
  X(TRUNCN_2XF32) \
  X(SLLN_2X32) \
  X(ADDN_2X32) \
  X(ULEN_2XF32) \
  X(ORBN_2) \
  X(MOVN_2X32T) \
  X(SELN_2X32I) \
  X(ZALIGN) \
  X(SA2NX8_IP) \
  X(SAPOS2NX8U_FP) \
  X(FIRINTN_2XF32) \
  X(MAXN_2X32) \
  X(MINN_2X32)

enum {
#define VDSP_IVP_ID(name) VDSP_IVP_ID_##name,
  VDSP_IVP_INTRINSICS(VDSP_IVP_ID)
#undef VDSP_IVP_ID
  VDSP_IVP_IDS
};
#ifdef __cplusplus
extern "C" {
#endif
extern uint64_t vdsp_ivp_count[VDSP_IVP_IDS];     /* uses of each intrinsic in the running task */
extern uint64_t vdsp_ivp_outside[VDSP_IVP_IDS];   /* of them, gathers/scatters/stores outside TCM */
int vdsp_board_outside_tcm(void const *p);        /* 1 when p is in no TCM bank (the runtime) */
#ifdef __cplusplus
}
#endif
/* a call, not a bare ++: two intrinsics of one expression (IVP_ORBN_2(IVP_ULEN_2XF32(..),
 * IVP_ULEN_2XF32(..))) would otherwise modify one counter unsequenced */
#define VDSP_IVP_COUNT(name) vdsp_ivp_tally(VDSP_IVP_ID_##name)
#define VDSP_IVP_WHERE(name, p) (vdsp_ivp_outside[VDSP_IVP_ID_##name] += (uint64_t)vdsp_board_outside_tcm(p))
#if defined(VDSP_IVP_NO_COV)
/* given on the command line (e.g. empty, to measure what the counting costs) */
#elif defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#define VDSP_IVP_NO_COV __attribute__((no_sanitize_coverage))
#elif defined(__clang__)
#define VDSP_IVP_NO_COV __attribute__((no_sanitize("coverage")))
#else
#define VDSP_IVP_NO_COV
#endif
#if defined(__GNUC__)
#define VDSP_IVP_ALWAYS_INLINE __attribute__((always_inline))
#else
#define VDSP_IVP_ALWAYS_INLINE
#endif
/* the emulation's functions: not instrumented, and not inlined into a kernel (GCC inlines no
 * function whose sanitizer attributes differ): an intrinsic is a call, and the kernel's counted
 * basic blocks are its own, not its intrinsics' lane loops. With GCC on x86-64 each is compiled
 * for AVX-512, AVX2 and the baseline (target_clones: the loader picks what the host runs), as a
 * kernel's hot loop is (VDSP_IVP_HOST_CLONES): CenterPoint stage 1 took 23.9 ms of CPU instead of
 * 50.9 (vdsp bench ckernel); the same bytes in any width (exact IEEE or integer lanes). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_UNDEFINED__) && \
    !defined(__SANITIZE_ADDRESS__)
#define VDSP_IVP_INLINE \
  static VDSP_IVP_NO_COV __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), noinline, unused))
#else
#define VDSP_IVP_INLINE static inline VDSP_IVP_NO_COV
#endif
#define VDSP_IVP_COUNTER static inline VDSP_IVP_NO_COV /* the counter: a call, inlined */
VDSP_IVP_COUNTER int vdsp_ivp_tally(int id) { ++vdsp_ivp_count[id]; return 0; }

/* --- vector types --------------------------------------------------------------------------- */
typedef struct xb_vecN_2xf32 { float s[VDSP_IVP_N_2]; VDSP_IVP_VEC_CTORS(xb_vecN_2xf32, float, VDSP_IVP_N_2) } xb_vecN_2xf32;
typedef struct xb_vecN_2x32v { int32_t s[VDSP_IVP_N_2]; VDSP_IVP_VEC_CTORS(xb_vecN_2x32v, int32_t, VDSP_IVP_N_2) } xb_vecN_2x32v;
typedef struct xb_vecN_2x32Uv {
  uint32_t s[VDSP_IVP_N_2];
  VDSP_IVP_VEC_CTORS(xb_vecN_2x32Uv, uint32_t, VDSP_IVP_N_2)
#ifdef __cplusplus
  /* signed and unsigned 32-bit vectors convert into each other, bits unchanged */
  VDSP_IVP_NO_COV xb_vecN_2x32Uv(xb_vecN_2x32v const &v) { memcpy(s, v.s, sizeof s); }
  VDSP_IVP_NO_COV operator xb_vecN_2x32v() const { xb_vecN_2x32v v; memcpy(v.s, s, sizeof s); return v; }
#endif
} xb_vecN_2x32Uv;
typedef struct xb_vec2Nx8 { int8_t s[VDSP_IVP_2N]; VDSP_IVP_VEC_CTORS(xb_vec2Nx8, int8_t, VDSP_IVP_2N) } xb_vec2Nx8;
typedef struct xb_vecNx16U { uint16_t s[VDSP_IVP_N]; VDSP_IVP_VEC_CTORS(xb_vecNx16U, uint16_t, VDSP_IVP_N) } xb_vecNx16U;
/* 16 lane predicates: 1 true, 0 false */
typedef struct vboolN_2 { uint8_t b[VDSP_IVP_N_2]; } vboolN_2;
/* A gather register: a gather's elements between its address phase (IVP_GATHERA*) and its data
 * phase (IVP_GATHERD*): 16 words (32-bit gathers) or 32 sign-extended bytes (IVP_GATHERANX8S). */
typedef struct xb_gsr { union { uint32_t w[VDSP_IVP_N_2]; int16_t h[VDSP_IVP_N]; } u; } xb_gsr;
/* An alignment register of the aligning stores: bytes stored but not yet written, and where.
 * A kernel may set one up and not use it (the J5 sample's gen_feature_kernel does): no warning. */
#if defined(__GNUC__)
#define VDSP_IVP_MAY_BE_UNUSED __attribute__((unused))
#else
#define VDSP_IVP_MAY_BE_UNUSED
#endif
typedef struct VDSP_IVP_MAY_BE_UNUSED valign { uint8_t bytes[VDSP_IVP_2N]; uint8_t *at; uint32_t count; } valign;

#ifdef __cplusplus
static_assert(sizeof(xb_vecN_2xf32) == 64 && sizeof(xb_vecN_2x32v) == 64 && sizeof(xb_vecN_2x32Uv) == 64 &&
              sizeof(xb_vec2Nx8) == 64 && sizeof(xb_vecNx16U) == 64, "a vector is 512 bits");
#else
_Static_assert(sizeof(xb_vecN_2xf32) == 64 && sizeof(xb_vecN_2x32v) == 64 && sizeof(xb_vecN_2x32Uv) == 64 &&
               sizeof(xb_vec2Nx8) == 64 && sizeof(xb_vecNx16U) == 64, "a vector is 512 bits");
#endif

/* --- scalar broadcast (see the invariants) -------------------------------------------------- */
VDSP_IVP_INLINE xb_vecN_2xf32 vdsp_ivp_f32_bcast(float x) { xb_vecN_2xf32 v; for (int i = 0; i < VDSP_IVP_N_2; i++) v.s[i] = x; return v; }
VDSP_IVP_INLINE xb_vecN_2x32v vdsp_ivp_i32_bcast(int32_t x) { xb_vecN_2x32v v; for (int i = 0; i < VDSP_IVP_N_2; i++) v.s[i] = x; return v; }
VDSP_IVP_INLINE xb_vecN_2xf32 vdsp_ivp_f32_id(xb_vecN_2xf32 v) { return v; }
VDSP_IVP_INLINE xb_vecN_2x32v vdsp_ivp_i32_id(xb_vecN_2x32v v) { return v; }
VDSP_IVP_INLINE xb_vecN_2x32v vdsp_ivp_i32_of_u(xb_vecN_2x32Uv u) { xb_vecN_2x32v v; memcpy(v.s, u.s, sizeof v.s); return v; }
VDSP_IVP_INLINE xb_vecN_2x32Uv vdsp_ivp_u32_of_i(xb_vecN_2x32v i) { xb_vecN_2x32Uv v; memcpy(v.s, i.s, sizeof v.s); return v; }
VDSP_IVP_INLINE xb_vecN_2x32Uv vdsp_ivp_u32_id(xb_vecN_2x32Uv v) { return v; }
#if defined(__cplusplus)
#define VDSP_IVP_F32(x) xb_vecN_2xf32(x)
#define VDSP_IVP_I32(x) xb_vecN_2x32v(x)
#define VDSP_IVP_U32(x) xb_vecN_2x32Uv(x)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define VDSP_IVP_F32(x) _Generic((x), xb_vecN_2xf32: vdsp_ivp_f32_id, default: vdsp_ivp_f32_bcast)(x)
#define VDSP_IVP_I32(x) \
  _Generic((x), xb_vecN_2x32v: vdsp_ivp_i32_id, xb_vecN_2x32Uv: vdsp_ivp_i32_of_u, default: vdsp_ivp_i32_bcast)(x)
#define VDSP_IVP_U32(x) _Generic((x), xb_vecN_2x32Uv: vdsp_ivp_u32_id, xb_vecN_2x32v: vdsp_ivp_u32_of_i)(x)
#else
#define VDSP_IVP_F32(x) (x)
#define VDSP_IVP_I32(x) (x)
#define VDSP_IVP_U32(x) (x)
#endif

/* --- gather / scatter --------------------------------------------------------------------- */
VDSP_IVP_INLINE void vdsp_ivp_check_offset(char const *name, int lane, uint32_t offset, uint32_t size) {
  if (offset > VDSP_IVP_WINDOW_BYTES - size)
    vdsp_ivp_fault(name, "lane %d: byte offset %u (%u bytes) is beyond the %u-byte gather/scatter window of its base",
                   lane, offset, size, VDSP_IVP_WINDOW_BYTES);
  if (offset % size)
    vdsp_ivp_fault(name, "lane %d: byte offset %u is not a multiple of the element's %u bytes", lane, offset, size);
}

/* Every lane's offset checked in one pass (vectorised); the rare fault names the first bad lane. */
VDSP_IVP_INLINE void vdsp_ivp_check_offsets(char const *name, uint32_t const *off, uint32_t size) {
  uint32_t bad = 0;
  for (int i = 0; i < VDSP_IVP_N_2; i++) bad |= (uint32_t)(off[i] > VDSP_IVP_WINDOW_BYTES - size) | (off[i] & (size - 1));
  if (bad)
    for (int i = 0; i < VDSP_IVP_N_2; i++) vdsp_ivp_check_offset(name, i, off[i], size);
}

/* IVP_GATHERAN_2XF32(base, offsets): lane i of the gather register gets the 32-bit float at
 * (char *)base + offsets[i] (a byte offset, 4-byte aligned, inside the 64 kB window). */
VDSP_IVP_INLINE xb_gsr vdsp_ivp_gathera_32(char const *name, void const *base, xb_vecN_2x32Uv off) {
  xb_gsr g;
  VDSP_IVP_WHERE(GATHERAN_2XF32, base);
  vdsp_ivp_check_offsets(name, off.s, 4); /* (size 4: a power of two, as the check's mask needs) */
  for (int i = 0; i < VDSP_IVP_N_2; i++) memcpy(&g.u.w[i], (char const *)base + off.s[i], 4);
  return g;
}
#define IVP_GATHERAN_2XF32(base, offsets) (VDSP_IVP_COUNT(GATHERAN_2XF32), vdsp_ivp_gathera_32("IVP_GATHERAN_2XF32", (void const *)(base), VDSP_IVP_U32(offsets)))

/* IVP_GATHERDN_2XF32(gsr): the 16 floats a 32-bit gather fetched, lane i from lane i. */
VDSP_IVP_INLINE xb_vecN_2xf32 vdsp_ivp_gatherd_f32(xb_gsr g) { xb_vecN_2xf32 v; memcpy(v.s, g.u.w, sizeof v.s); return v; }
#define IVP_GATHERDN_2XF32(gsr) (VDSP_IVP_COUNT(GATHERDN_2XF32), vdsp_ivp_gatherd_f32(gsr))

/* IVP_GATHERANX8S(base, offsets): lane i (of 32) of the gather register gets the signed byte at
 * (char *)base + offsets[i], sign-extended to 16 bits (16-bit offsets: always inside the window). */
VDSP_IVP_INLINE xb_gsr vdsp_ivp_gathera_8s(void const *base, xb_vecNx16U off) {
  xb_gsr g;
  VDSP_IVP_WHERE(GATHERANX8S, base);
  for (int i = 0; i < VDSP_IVP_N; i++) g.u.h[i] = ((int8_t const *)base)[off.s[i]];
  return g;
}
#define IVP_GATHERANX8S(base, offsets) (VDSP_IVP_COUNT(GATHERANX8S), vdsp_ivp_gathera_8s((void const *)(base), offsets))

/* IVP_GATHERD2NX8_L(gsr): a 64-byte vector whose lanes 0..31 are the 32 bytes an 8-bit gather
 * fetched (lane i from lane i) and whose lanes 32..63 are 0 (this emulation's choice). */
VDSP_IVP_INLINE xb_vec2Nx8 vdsp_ivp_gatherd_2nx8_l(xb_gsr g) {
  xb_vec2Nx8 v;
  for (int i = 0; i < VDSP_IVP_N; i++) { v.s[i] = (int8_t)g.u.h[i]; v.s[VDSP_IVP_N + i] = 0; }
  return v;
}
#define IVP_GATHERD2NX8_L(gsr) (VDSP_IVP_COUNT(GATHERD2NX8_L), vdsp_ivp_gatherd_2nx8_l(gsr))

/* IVP_GATHERD2NX8_H(v, gsr): sets lanes 32..63 of the vector variable v to the 32 bytes an 8-bit
 * gather fetched (lane 32 + i from lane i); lanes 0..31 of v are kept. */
VDSP_IVP_INLINE void vdsp_ivp_gatherd_2nx8_h(xb_vec2Nx8 *v, xb_gsr g) {
  for (int i = 0; i < VDSP_IVP_N; i++) v->s[VDSP_IVP_N + i] = (int8_t)g.u.h[i];
}
#define IVP_GATHERD2NX8_H(v, gsr) (VDSP_IVP_COUNT(GATHERD2NX8_H), vdsp_ivp_gatherd_2nx8_h(&(v), gsr))

/* IVP_SCATTERN_2X32(v, base, offsets): stores lane i of v (32 bits) at (char *)base + offsets[i]
 * (a byte offset, 4-byte aligned, inside the 64 kB window), lanes in order 0..15: of lanes with
 * one offset the highest wins. Here the stores land at once; on the board they land by the next
 * IVP_SCATTERW, which a kernel must issue before it (or a DMA) reads them. */
VDSP_IVP_INLINE void vdsp_ivp_scatter_32(xb_vecN_2x32v v, void *base, xb_vecN_2x32Uv off) {
  uint32_t apart = 0;
  VDSP_IVP_WHERE(SCATTERN_2X32, base);
  vdsp_ivp_check_offsets("IVP_SCATTERN_2X32", off.s, 4);
  for (int i = 0; i < VDSP_IVP_N_2; i++) apart |= off.s[i] ^ (off.s[0] + 4u * (uint32_t)i);
  if (!apart) { /* consecutive words (a contiguous store, as often): one copy, the same bytes */
    memcpy((char *)base + off.s[0], v.s, sizeof v.s);
    return;
  }
  for (int i = 0; i < VDSP_IVP_N_2; i++) memcpy((char *)base + off.s[i], &v.s[i], 4);
}
#define IVP_SCATTERN_2X32(v, base, offsets) (VDSP_IVP_COUNT(SCATTERN_2X32), vdsp_ivp_scatter_32(VDSP_IVP_I32(v), (void *)(base), VDSP_IVP_U32(offsets)))

/* IVP_SCATTERW(): waits until every scatter issued has written memory (here: they have). */
#define IVP_SCATTERW() (VDSP_IVP_COUNT(SCATTERW), ((void)0))

/* --- arithmetic ------------------------------------------------------------------------------ */
/* IVP_SUBN_2XF32(a, b): lane i = a[i] - b[i], IEEE single, round to nearest even. */
VDSP_IVP_INLINE xb_vecN_2xf32 vdsp_ivp_subf(xb_vecN_2xf32 a, xb_vecN_2xf32 b) {
  for (int i = 0; i < VDSP_IVP_N_2; i++) a.s[i] = a.s[i] - b.s[i];
  return a;
}
#define IVP_SUBN_2XF32(a, b) (VDSP_IVP_COUNT(SUBN_2XF32), vdsp_ivp_subf(VDSP_IVP_F32(a), VDSP_IVP_F32(b)))

/* IVP_DIVN_2XF32(a, b): lane i = a[i] / b[i], IEEE single, correctly rounded (nearest even). */
VDSP_IVP_INLINE xb_vecN_2xf32 vdsp_ivp_divf(xb_vecN_2xf32 a, xb_vecN_2xf32 b) {
  for (int i = 0; i < VDSP_IVP_N_2; i++) a.s[i] = a.s[i] / b.s[i];
  return a;
}
#define IVP_DIVN_2XF32(a, b) (VDSP_IVP_COUNT(DIVN_2XF32), vdsp_ivp_divf(VDSP_IVP_F32(a), VDSP_IVP_F32(b)))

/* IVP_TRUNCN_2XF32(a, q): lane i = a[i] * 2^q rounded toward zero to int32 (q fractional bits,
 * 0 <= q <= 31), saturated to [INT32_MIN, INT32_MAX]; NaN gives 0 (assumed). */
VDSP_IVP_INLINE xb_vecN_2x32v vdsp_ivp_truncf(xb_vecN_2xf32 a, int q) {
  xb_vecN_2x32v r;
  if (q < 0 || q > 31) vdsp_ivp_fault("IVP_TRUNCN_2XF32", "fraction bits %d outside 0..31", q);
  float const scale = (float)(1u << q); /* a power of two: the product is exact, or infinite (saturated) */
  for (int i = 0; i < VDSP_IVP_N_2; i++) { /* branch-free, so that it vectorises */
    float const x = a.s[i] * scale;
    int32_t const t = (int32_t)(x >= -2147483648.0f && x < 2147483648.0f ? x : 0.0f); /* NaN: 0 */
    r.s[i] = x >= 2147483648.0f ? INT32_MAX : x < -2147483648.0f ? INT32_MIN : t;
  }
  return r;
}
#define IVP_TRUNCN_2XF32(a, q) (VDSP_IVP_COUNT(TRUNCN_2XF32), vdsp_ivp_truncf(VDSP_IVP_F32(a), q))

/* IVP_SLLN_2X32(a, s): lane i = a[i] shifted left by s[i] bits, logically, modulo 2^32; s[i] of
 * 32 or more gives 0; a negative s[i] shifts right logically by -s[i] (assumed). */
VDSP_IVP_INLINE xb_vecN_2x32v vdsp_ivp_sll(xb_vecN_2x32v a, xb_vecN_2x32v s) {
  int same = 1;
  for (int i = 1; i < VDSP_IVP_N_2; i++) same &= s.s[i] == s.s[0];
  if (same && s.s[0] >= 0 && s.s[0] < 32) { /* one amount in every lane (a broadcast scalar): vectorised */
    for (int i = 0; i < VDSP_IVP_N_2; i++) a.s[i] = (int32_t)((uint32_t)a.s[i] << s.s[0]);
    return a;
  }
  for (int i = 0; i < VDSP_IVP_N_2; i++) {
    uint32_t u = (uint32_t)a.s[i];
    int32_t k = s.s[i];
    u = k >= 32 || k <= -32 ? 0u : k >= 0 ? u << k : u >> -k;
    memcpy(&a.s[i], &u, 4);
  }
  return a;
}
#define IVP_SLLN_2X32(a, s) (VDSP_IVP_COUNT(SLLN_2X32), vdsp_ivp_sll(VDSP_IVP_I32(a), VDSP_IVP_I32(s)))

/* IVP_ADDN_2X32(a, b): lane i = a[i] + b[i] modulo 2^32 (wraps, no saturation). */
VDSP_IVP_INLINE xb_vecN_2x32v vdsp_ivp_add32(xb_vecN_2x32v a, xb_vecN_2x32v b) {
  for (int i = 0; i < VDSP_IVP_N_2; i++) {
    uint32_t u = (uint32_t)a.s[i] + (uint32_t)b.s[i];
    memcpy(&a.s[i], &u, 4);
  }
  return a;
}
#define IVP_ADDN_2X32(a, b) (VDSP_IVP_COUNT(ADDN_2X32), vdsp_ivp_add32(VDSP_IVP_I32(a), VDSP_IVP_I32(b)))

/* --- predicates and selection ------------------------------------------------------------- */
/* IVP_ULEN_2XF32(a, b): lane i true when a[i] <= b[i] or either is NaN (unordered or less-equal). */
VDSP_IVP_INLINE vboolN_2 vdsp_ivp_ule(xb_vecN_2xf32 a, xb_vecN_2xf32 b) {
  vboolN_2 r;
  for (int i = 0; i < VDSP_IVP_N_2; i++) r.b[i] = !(a.s[i] > b.s[i]);
  return r;
}
#define IVP_ULEN_2XF32(a, b) (VDSP_IVP_COUNT(ULEN_2XF32), vdsp_ivp_ule(VDSP_IVP_F32(a), VDSP_IVP_F32(b)))

/* IVP_ORBN_2(a, b): lane i true when a[i] or b[i] is. */
VDSP_IVP_INLINE vboolN_2 vdsp_ivp_orb(vboolN_2 a, vboolN_2 b) {
  for (int i = 0; i < VDSP_IVP_N_2; i++) a.b[i] = (uint8_t)(a.b[i] | b.b[i]);
  return a;
}
#define IVP_ORBN_2(a, b) (VDSP_IVP_COUNT(ORBN_2), vdsp_ivp_orb(a, b))

/* IVP_MOVN_2X32T(a, b, t): lane i = a[i] where t[i] is true, else b[i]. */
VDSP_IVP_INLINE xb_vecN_2x32v vdsp_ivp_movt(xb_vecN_2x32v a, xb_vecN_2x32v b, vboolN_2 t) {
  for (int i = 0; i < VDSP_IVP_N_2; i++) b.s[i] = t.b[i] ? a.s[i] : b.s[i];
  return b;
}
#define IVP_MOVN_2X32T(a, b, t) (VDSP_IVP_COUNT(MOVN_2X32T), vdsp_ivp_movt(VDSP_IVP_I32(a), VDSP_IVP_I32(b), t))

/* Selectors of IVP_SELN_2X32I (this header's values). The two 64-byte operands are read as
 * elements of E bytes (8B_: E = 1; no prefix: E = 2, the native 16-bit lane), M = 64 / E each:
 *   INTERLEAVE_1_EVEN: element 2k = lo[2k],     element 2k + 1 = hi[2k]      (k < M / 2)
 *   INTERLEAVE_1_ODD:  element 2k = lo[2k + 1], element 2k + 1 = hi[2k + 1]
 * where hi is the first operand and lo the second. */
#define IVP_SELI_8B_INTERLEAVE_1_EVEN 0x10
#define IVP_SELI_8B_INTERLEAVE_1_ODD 0x11
#define IVP_SELI_INTERLEAVE_1_EVEN 0x20
#define IVP_SELI_INTERLEAVE_1_ODD 0x21

/* IVP_SELN_2X32I(hi, lo, sel): the 16 32-bit lanes of the bytes that selector `sel` picks from
 * hi and lo (above); another selector value is a fault naming it. */
VDSP_IVP_INLINE xb_vecN_2x32v vdsp_ivp_sel32i(xb_vecN_2x32v hi, xb_vecN_2x32v lo, int sel) {
  uint8_t h[64], l[64], out[64];
  xb_vecN_2x32v r;
  uint32_t e = (uint32_t)sel >> 4, odd = (uint32_t)sel & 15;
  if ((e != 1 && e != 2) || odd > 1) vdsp_ivp_fault("IVP_SELN_2X32I", "selector 0x%x is not in the subset", (unsigned)sel);
  memcpy(h, hi.s, 64);
  memcpy(l, lo.s, 64);
  if (e == 1) {
    for (uint32_t k = 0; k < 32; k++) out[2 * k] = l[2 * k + odd], out[2 * k + 1] = h[2 * k + odd];
  } else {
    for (uint32_t k = 0; k < 16; k++) {
      memcpy(out + 4 * k, l + (2 * k + odd) * 2, 2);
      memcpy(out + 4 * k + 2, h + (2 * k + odd) * 2, 2);
    }
  }
  memcpy(r.s, out, 64);
  return r;
}
#define IVP_SELN_2X32I(hi, lo, sel) (VDSP_IVP_COUNT(SELN_2X32I), vdsp_ivp_sel32i(VDSP_IVP_I32(hi), VDSP_IVP_I32(lo), sel))

/* --- aligning stores ------------------------------------------------------------------------ */
/* IVP_ZALIGN(): an empty alignment register. */
VDSP_IVP_INLINE valign vdsp_ivp_zalign(void) { valign a; memset(&a, 0, sizeof a); return a; }
#define IVP_ZALIGN() (VDSP_IVP_COUNT(ZALIGN), vdsp_ivp_zalign())

VDSP_IVP_INLINE void vdsp_ivp_align_drain(valign *a) {
  if (a->count) memcpy(a->at, a->bytes, a->count);
  a->count = 0;
}

/* IVP_SA2NX8_IP(v, a, p): stores the 64 bytes of v at p (any alignment) and advances p by 64
 * bytes. The bytes past the last 64-byte boundary of p + 64 stay in the alignment register a
 * until its next store or IVP_SAPOS2NX8U_FP: a kernel that omits the flush loses them. */
VDSP_IVP_INLINE void *vdsp_ivp_sa2nx8_ip(xb_vec2Nx8 v, valign *a, void *p) {
  uint8_t *d = (uint8_t *)p;
  uint32_t keep = (uint32_t)(((uintptr_t)d + 64u) % 64u);
  VDSP_IVP_WHERE(SA2NX8_IP, p);
  vdsp_ivp_align_drain(a);
  memcpy(d, v.s, 64u - keep);
  memcpy(a->bytes, (uint8_t const *)v.s + (64u - keep), keep);
  a->at = d + (64u - keep);
  a->count = keep;
  return d + 64;
}
#ifdef __cplusplus
#define VDSP_IVP_TYPEOF(x) decltype(x)
#else
#define VDSP_IVP_TYPEOF(x) __typeof__(x)
#endif
#define IVP_SA2NX8_IP(v, a, p) (VDSP_IVP_COUNT(SA2NX8_IP), ((p) = (VDSP_IVP_TYPEOF(p))vdsp_ivp_sa2nx8_ip(v, &(a), (void *)(p))))

/* IVP_SAPOS2NX8U_FP(a, p): writes the bytes alignment register a still holds (where its last
 * store put them) and empties it; p is not changed. */
#define IVP_SAPOS2NX8U_FP(a, p) (VDSP_IVP_COUNT(SAPOS2NX8U_FP), ((void)(p), vdsp_ivp_align_drain(&(a))))

/* --- emulation speed (added for the stock point-cloud kernels) ---------------------------- */
/* VDSP_IVP_HOST_CLONES before a kernel's hot function: on x86-64 (GCC, Clang) the function (not the
 * intrinsics it calls) is compiled for AVX-512, AVX2 and the baseline, the loader picking
 * the widest the host runs (ifunc). Only the emulation's speed changes: every intrinsic is exact
 * IEEE or integer arithmetic, the same bytes in any vector width (ISO C/C++ modes do not contract
 * a * b + c into an FMA). Elsewhere, and in sanitizer builds, it is empty.
 * VDSP_KERNEL_INLINE: a kernel's own helper inlined into it (and so into its clones; its basic
 * blocks are the kernel's, counted for the board-time estimate). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_UNDEFINED__) && !defined(__SANITIZE_ADDRESS__)
#define VDSP_IVP_HOST_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define VDSP_IVP_HOST_CLONES
#endif
#define VDSP_KERNEL_INLINE static inline VDSP_IVP_ALWAYS_INLINE

/* --- rounding and clamping (added for the stock point-cloud kernels, stage 1) -------------- */
/* IVP_FIRINTN_2XF32(a): lane i = a[i] rounded to an integral float in the core's rounding mode
 * (FCR), which is round to nearest, ties to even, the default and the only mode of this
 * emulation (rint/nearbyint); -0.5 gives -0, NaN stays NaN, infinities and zeros are kept. */
VDSP_IVP_INLINE xb_vecN_2xf32 vdsp_ivp_firint(xb_vecN_2xf32 a) {
  float const big = 8388608.0f; /* 2^23: every float from here on is an integer */
  for (int i = 0; i < VDSP_IVP_N_2; i++) {
    float const x = a.s[i], ax = __builtin_fabsf(x);
    float const r = __builtin_copysignf((ax + big) - big, x); /* the addition rounds, ties to even; -0.3 gives -0 */
    a.s[i] = ax < big ? r : x;                                  /* NaN, infinities, |x| >= 2^23 are kept */
  }
  return a;
}
#define IVP_FIRINTN_2XF32(a) (VDSP_IVP_COUNT(FIRINTN_2XF32), vdsp_ivp_firint(VDSP_IVP_F32(a)))

/* IVP_MAXN_2X32(a, b): lane i = the greater of a[i] and b[i], signed. */
VDSP_IVP_INLINE xb_vecN_2x32v vdsp_ivp_max32(xb_vecN_2x32v a, xb_vecN_2x32v b) {
  for (int i = 0; i < VDSP_IVP_N_2; i++) a.s[i] = a.s[i] > b.s[i] ? a.s[i] : b.s[i];
  return a;
}
#define IVP_MAXN_2X32(a, b) (VDSP_IVP_COUNT(MAXN_2X32), vdsp_ivp_max32(VDSP_IVP_I32(a), VDSP_IVP_I32(b)))

/* IVP_MINN_2X32(a, b): lane i = the smaller of a[i] and b[i], signed. */
VDSP_IVP_INLINE xb_vecN_2x32v vdsp_ivp_min32(xb_vecN_2x32v a, xb_vecN_2x32v b) {
  for (int i = 0; i < VDSP_IVP_N_2; i++) a.s[i] = a.s[i] < b.s[i] ? a.s[i] : b.s[i];
  return a;
}
#define IVP_MINN_2X32(a, b) (VDSP_IVP_COUNT(MINN_2X32), vdsp_ivp_min32(VDSP_IVP_I32(a), VDSP_IVP_I32(b)))

/* --- names of the ISA outside the subset: a compile error naming the intrinsic ------------- */
#define VDSP_IVP_HOW " is not in the vdsp-sim IVP subset: add it to dsp_side/ckernel/include/xtensa/tie/xt_ivpn.h " \
                     "with its semantics and a test in tests/test_ivp.py (docs/dsp_kernels.md, The IVP subset)"
#ifdef __cplusplus
#define VDSP_IVP_MISSING(name) ([]() { static_assert(sizeof(char) == 0, #name VDSP_IVP_HOW); }(), 0)
#else
#define VDSP_IVP_MISSING(name) sizeof(struct { _Static_assert(0, #name VDSP_IVP_HOW); int missing; })
#endif
#include "xt_ivpn_missing.h"

#endif /* VDSP_XT_IVPN_H_ */
