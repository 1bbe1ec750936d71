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
 * - every intrinsic is a VDSP_IVP_INLINE (or VDSP_IVP_OUTLINE) function or a macro over one; it
 *   reads and writes only its operands and the memory its semantics (the comment above it) names;
 *   its emulation adds none of the kernel's counted basic blocks ("how the intrinsics run on the
 *   host", below);
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

#if !defined(__GNUC__)
#error "<xtensa/tie/xt_ivpn.h> needs GCC or Clang (their vector extensions and attributes)"
#endif

#ifdef __cplusplus
extern "C" {
#endif
/* Reports an intrinsic used against its rules (the runtime: a trap of the running task, or
 * stderr and abort() outside a task). Never returns. */
void vdsp_ivp_fault(char const *intrinsic, char const *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
/* An operand an intrinsic refuses (VDSP_IVP_REQUIRE): `what` is VDSP_IVP_BAD_WINDOW (a: the 16
 * byte offsets, b: the element's bytes, c: the intrinsic's id; the message names the first bad
 * lane), VDSP_IVP_BAD_FRACTION (b: the fraction bits) or VDSP_IVP_BAD_SELECTOR (b: the
 * selector). Calls vdsp_ivp_fault; never returns. vdsp_ivp_refuse_if: the same when bad != 0. */
void vdsp_ivp_refused(int what, void const *a, uint32_t b, uint32_t c) __attribute__((noreturn));
void vdsp_ivp_refuse_if(uint32_t bad, int what, void const *a, uint32_t b, uint32_t c) __attribute__((nothrow));
#ifdef __cplusplus
}
#endif
enum { VDSP_IVP_BAD_WINDOW = 1, VDSP_IVP_BAD_FRACTION = 2, VDSP_IVP_BAD_SELECTOR = 3, VDSP_IVP_BAD_DSELECTOR = 4 };

/* --- how the intrinsics run on the host ---------------------------------------------------
 * Invariant: the basic blocks the runtime counts for the board-time estimate (the kernel's
 * sources are compiled with -fsanitize-coverage=trace-pc) are the kernel's own: the emulation
 * of an intrinsic adds none, so the same kernel on the same input gets the same counts in
 * either mode below (but where the compiler hoists an inlined intrinsic's loop-invariant work
 * out of a loop, or leaves the loop's result to a block after it: at most two blocks per entry
 * of a loop, never per iteration; docs/dsp_kernels.md, "Board time").
 * - inline (GCC): every intrinsic is inlined into the kernel (VDSP_IVP_INLINE: always_inline)
 *   and its body has no branch and no loop left when the coverage pass runs: whole-vector
 *   operations (GCC's vector extensions), lane loops that are copies only, fully unrolled
 *   (VDSP_IVP_LANES), selections by masks, and a refused operand (a gather offset beyond the
 *   window, ...) reported by VDSP_IVP_REQUIRE(_LANES), which hides its branch from the compiler (x86-64:
 *   a conditional jump in an asm statement, to code that jumps to the runtime's
 *   vdsp_ivp_refuse_jump; elsewhere a call of vdsp_ivp_refuse_if). The aligning stores, whose work is data-dependent, are calls
 *   (VDSP_IVP_OUTLINE: not inlined, not instrumented).
 * - calls (VDSP_IVP_CALLS defined, or Clang): every intrinsic is a call of a function that is not
 *   instrumented (VDSP_IVP_OUTLINE). tests/dsp/test_board_time.py builds kernels both ways and
 *   checks that their counts are equal. */
#if defined(VDSP_IVP_NO_COV)
/* given on the command line (e.g. empty, to measure what the counting costs) */
#elif (defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12)
#define VDSP_IVP_NO_COV __attribute__((no_sanitize_coverage))
#elif defined(__clang__)
#define VDSP_IVP_NO_COV __attribute__((no_sanitize("coverage")))
#else
#define VDSP_IVP_NO_COV
#endif
#define VDSP_IVP_ALWAYS_INLINE __attribute__((always_inline))
#define VDSP_IVP_OUTLINE static VDSP_IVP_NO_COV __attribute__((noinline, unused))
#if defined(__clang__) && !defined(VDSP_IVP_CALLS)
#define VDSP_IVP_CALLS 1
#endif
/* VDSP_IVP_REQUIRE(bad, what, b): refuse a scalar operand b when bad != 0 (vdsp_ivp_refused);
 * VDSP_IVP_REQUIRE_LANES(bad, what, lanes, b, c): the same for 16 32-bit lanes (a vdsp_ivp_u32,
 * read only when bad != 0); `what`, b and c of the latter are constants. */
#ifdef VDSP_IVP_CALLS
#define VDSP_IVP_INLINE VDSP_IVP_OUTLINE
#define VDSP_IVP_MEMBER VDSP_IVP_NO_COV /* a vector type's constructor or conversion */
#define VDSP_IVP_REQUIRE(bad, what, b) \
  do { if (bad) vdsp_ivp_refused(what, 0, b, 0); } while (0)
#define VDSP_IVP_REQUIRE_LANES(bad, what, lanes, b, c) \
  do { if (bad) vdsp_ivp_refused(what, &(lanes), b, c); } while (0)
#else
#define VDSP_IVP_INLINE static inline __attribute__((always_inline, unused))
#define VDSP_IVP_MEMBER VDSP_IVP_ALWAYS_INLINE
#if defined(__x86_64__)
/* The test and a conditional jump to code in a section of its own, which puts the operands where
 * vdsp_ivp_refused takes them (the lanes: in vdsp_ivp_refused_lanes) and jumps to the runtime's
 * vdsp_ivp_refuse_jump: no branch for the compiler, nothing but the test and the jump on the
 * path taken, and the operands' computation the compiler's to hoist out of a loop; nothing at
 * all where the operand is a constant the compiler knows good (a selector written as one). */
#define VDSP_IVP_REQUIRE(bad, what, b)                                                          \
  do {                                                                                          \
    if (!__builtin_constant_p(bad) || (bad)) /* (an operand known good when inlined: no test) */ \
      __asm__ volatile("testl %k0, %k0\n\tjnz 9f\n\t.pushsection .text.unlikely\n"            \
                       "9:\tmovl %k1, %%edx\n\tmovl %2, %%edi\n\tjmp vdsp_ivp_refuse_jump@PLT\n" \
                       "\t.popsection"                                                        \
                       : : "r"((uint32_t)(bad)), "r"((uint32_t)(b)), "i"(what));               \
  } while (0)
#define VDSP_IVP_REQUIRE_LANES(bad, what, lanes, b, c)                                                  \
  do {                                                                                                 \
    vdsp_ivp_u32q q_[4];                                                                               \
    memcpy(q_, &(lanes), 64);                                                                          \
    __asm__ volatile("testl %k0, %k0\n\tjnz 9f\n\t.pushsection .text.unlikely\n"                       \
                     "9:\tmovups %1, vdsp_ivp_refused_lanes(%%rip)\n\tmovups %2, vdsp_ivp_refused_lanes+16(%%rip)\n" \
                     "\tmovups %3, vdsp_ivp_refused_lanes+32(%%rip)\n\tmovups %4, vdsp_ivp_refused_lanes+48(%%rip)\n" \
                     "\tleaq vdsp_ivp_refused_lanes(%%rip), %%rsi\n\tmovl %5, %%edi\n\tmovl %6, %%edx\n"          \
                     "\tmovl %7, %%ecx\n\tjmp vdsp_ivp_refuse_jump@PLT\n\t.popsection"                        \
                     : : "r"((uint32_t)(bad)), "x"(q_[0]), "x"(q_[1]), "x"(q_[2]), "x"(q_[3]), "i"(what), "i"(b),   \
                       "i"(c));                                                                        \
  } while (0)
#else
#define VDSP_IVP_REQUIRE(bad, what, b) vdsp_ivp_refuse_if(bad, what, 0, b, 0)
#define VDSP_IVP_REQUIRE_LANES(bad, what, lanes, b, c) vdsp_ivp_refuse_if(bad, what, &(lanes), b, c)
#endif
#endif
#if defined(__clang__)
#define VDSP_IVP_LANES _Pragma("unroll")
#else
#define VDSP_IVP_LANES _Pragma("GCC unroll 64") /* a copy loop over lanes: fully unrolled */
#endif

#ifdef __cplusplus
#define VDSP_IVP_VEC_CTORS(T, E, L)                                                 \
  T() = default;                                                                    \
  VDSP_IVP_MEMBER T(E x) { VDSP_IVP_LANES for (int i = 0; i < (L); i++) s[i] = x; }
#else
#define VDSP_IVP_VEC_CTORS(T, E, L)
#endif

/* --- board-time counters (docs/dsp_kernels.md, "Board time") ------------------------------
 * Every intrinsic of the subset has an id in VDSP_IVP_INTRINSICS; its IVP_ macro counts each use
 * with VDSP_IVP_COUNT(NAME) first thing (an intrinsic whose NAME is not in the list is a compile
 * error), and the ones that touch memory add, in their function, whether it was outside TCM
 * (VDSP_IVP_WHERE). The kernel runtime (src/vdsp_board.c) owns the counters, zeroes them before a
 * task and reads them after it; dsp_side/ckernel/board_model.py prices each id (a test fails for
 * an id without a price). The emulation adds none of the kernel's counted basic blocks (above).
 * Adding an intrinsic: X(NAME) here, VDSP_IVP_COUNT(NAME) in its macro, VDSP_IVP_INLINE on its
 * functions (branch-free bodies, or VDSP_IVP_OUTLINE), its price in board_model.py. */
#define VDSP_IVP_INTRINSICS(X) \
  X(GATHERAN_2XF32) \
  X(GATHERAN_2X32) \
  X(GATHERDN_2XF32) \
  X(GATHERDN_2X32) \
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
  X(SELN_2X32) \
  X(DSELN_2X32I) \
  X(ZALIGN) \
  X(SA2NX8_IP) \
  X(SAPOS2NX8U_FP) \
  X(SVN_2X32_IP) \
  X(LVN_2X32_IP) \
  X(FIRINTN_2XF32) \
  X(MAXN_2X32) \
  X(MINN_2X32)

enum {
#define VDSP_IVP_ID(name) VDSP_IVP_ID_##name,
  VDSP_IVP_INTRINSICS(VDSP_IVP_ID)
#undef VDSP_IVP_ID
  VDSP_IVP_IDS
};
#define VDSP_IVP_HIDDEN __attribute__((visibility("hidden"))) /* inside the kernel library: no GOT */
#ifdef __cplusplus
extern "C" {
#endif
extern VDSP_IVP_HIDDEN uint64_t vdsp_ivp_count[VDSP_IVP_IDS];   /* uses of each intrinsic in the running task */
extern VDSP_IVP_HIDDEN uint64_t vdsp_ivp_outside[VDSP_IVP_IDS]; /* of them, gathers/scatters/stores outside TCM */
extern VDSP_IVP_HIDDEN uintptr_t vdsp_ivp_tcm[2];     /* the TCM banks' first bytes (the runtime; 0 before its init) */
extern VDSP_IVP_HIDDEN uintptr_t vdsp_ivp_tcm_bytes;  /* the bytes of the banks' spans, bank 1's after bank 0's */
extern VDSP_IVP_HIDDEN uint32_t vdsp_ivp_refused_lanes[VDSP_IVP_N_2]; /* VDSP_IVP_REQUIRE_LANES' lanes */
extern VDSP_IVP_HIDDEN uintptr_t vdsp_ivp_stream[2]; /* the IDMA engine's stream (below): next line, end */
#ifdef __cplusplus
}
#endif
/* a function call, not a bare ++ in the macro: two intrinsics of one expression
 * (IVP_ORBN_2(IVP_ULEN_2XF32(..), IVP_ULEN_2XF32(..))) would otherwise modify one counter
 * unsequenced; inlined, it is the increment */
#define VDSP_IVP_COUNT(name) vdsp_ivp_tally(VDSP_IVP_ID_##name)
#ifdef VDSP_IVP_CALLS
#define VDSP_IVP_COUNTER static inline VDSP_IVP_NO_COV
#else
#define VDSP_IVP_COUNTER static inline VDSP_IVP_ALWAYS_INLINE
#endif
VDSP_IVP_COUNTER int vdsp_ivp_tally(int id) { ++vdsp_ivp_count[id]; return 0; }
/* 1 when p is in no TCM bank (no branch: one unsigned comparison; the banks are one span) */
VDSP_IVP_COUNTER uint64_t vdsp_ivp_outside_tcm(void const *p) {
  return (uint64_t)((uintptr_t)p - vdsp_ivp_tcm[0] >= vdsp_ivp_tcm_bytes);
}
/* The IDMA engine alongside the core, on the host: each aligned vector load of the kernel
 * (IVP_LVN_2X32_IP, the loads of a tile streaming through TCM) brings one 64-byte line of the
 * source of a transfer into TCM not yet performed into the host's cache (vdsp_ivp_stream: its
 * next line and its end, kept by the runtime; equal when there is none), so that the transfer,
 * performed when the kernel waits for it, copies from the cache: the overlap of DMA and
 * compute the board has, which a copy performed at the wait would not have. A prefetch never
 * faults and changes no byte; no branch, no count, nothing the board-time estimate sees. (On
 * the development VM CenterPoint's stage 1 took 2-6 % less, the other stages the same, each
 * timed on its second task in a row; a line per store, gather and scatter as well cost more than
 * it gained: benchmarks README. -DVDSP_IVP_NO_STREAM: none.) */
VDSP_IVP_COUNTER int vdsp_ivp_stream_line(void) {
#if !defined(VDSP_IVP_NO_STREAM)
  uintptr_t const at = vdsp_ivp_stream[0];
  __builtin_prefetch((void const *)at, 0, 2);
  vdsp_ivp_stream[0] = at + (at < vdsp_ivp_stream[1] ? 64u : 0u);
#endif
  return 0;
}
#define VDSP_IVP_WHERE(name, p) (vdsp_ivp_outside[VDSP_IVP_ID_##name] += vdsp_ivp_outside_tcm(p))

/* --- vector types --------------------------------------------------------------------------- */
typedef struct xb_vecN_2xf32 { float s[VDSP_IVP_N_2]; VDSP_IVP_VEC_CTORS(xb_vecN_2xf32, float, VDSP_IVP_N_2) } xb_vecN_2xf32;
typedef struct xb_vecN_2x32v { int32_t s[VDSP_IVP_N_2]; VDSP_IVP_VEC_CTORS(xb_vecN_2x32v, int32_t, VDSP_IVP_N_2) } xb_vecN_2x32v;
typedef struct xb_vecN_2x32Uv {
  uint32_t s[VDSP_IVP_N_2];
  VDSP_IVP_VEC_CTORS(xb_vecN_2x32Uv, uint32_t, VDSP_IVP_N_2)
#ifdef __cplusplus
  /* signed and unsigned 32-bit vectors convert into each other, bits unchanged */
  VDSP_IVP_MEMBER xb_vecN_2x32Uv(xb_vecN_2x32v const &v) { memcpy(s, v.s, sizeof s); }
  VDSP_IVP_MEMBER operator xb_vecN_2x32v() const { xb_vecN_2x32v v; memcpy(v.s, s, sizeof s); return v; }
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
typedef struct __attribute__((unused)) valign { uint8_t bytes[VDSP_IVP_2N]; uint8_t *at; uint32_t count; } valign;

#ifdef __cplusplus
static_assert(sizeof(xb_vecN_2xf32) == 64 && sizeof(xb_vecN_2x32v) == 64 && sizeof(xb_vecN_2x32Uv) == 64 &&
              sizeof(xb_vec2Nx8) == 64 && sizeof(xb_vecNx16U) == 64, "a vector is 512 bits");
#else
_Static_assert(sizeof(xb_vecN_2xf32) == 64 && sizeof(xb_vecN_2x32v) == 64 && sizeof(xb_vecN_2x32Uv) == 64 &&
               sizeof(xb_vec2Nx8) == 64 && sizeof(xb_vecNx16U) == 64, "a vector is 512 bits");
#endif

/* The lanes as GCC/Clang vectors, for whole-vector arithmetic in the intrinsics' bodies (never in
 * a function's signature: the x86-64 ABI of a 64-byte vector argument depends on the ISA).
 * VDSP_IVP_GET/PUT copy a vector type's bytes in and out (the same 64 bytes, lane i to lane i);
 * VDSP_IVP_PICK(m, a, b): a where the integer mask m is all ones, else b. */
typedef int32_t vdsp_ivp_i32 __attribute__((vector_size(64)));
typedef uint32_t vdsp_ivp_u32 __attribute__((vector_size(64)));
typedef int16_t vdsp_ivp_i16 __attribute__((vector_size(64)));
typedef int8_t vdsp_ivp_i8h __attribute__((vector_size(32)));  /* 32 bytes: half a vector */
typedef uint8_t vdsp_ivp_u8b __attribute__((vector_size(16)));  /* the 16 predicates of a vboolN_2 */
typedef uint32_t vdsp_ivp_u32h __attribute__((vector_size(32)));
typedef uint8_t vdsp_ivp_u8 __attribute__((vector_size(64)));
typedef uint32_t vdsp_ivp_u32q __attribute__((vector_size(16)));
#define VDSP_IVP_GET(vec, from) memcpy(&(vec), (from), sizeof(vec))
#define VDSP_IVP_PUT(to, vec) memcpy((to), &(vec), sizeof(vec))
#define VDSP_IVP_PICK(m, a, b) (((a) & (m)) | ((b) & ~(m)))
/* The host's vector width for what GCC does not split into the host's vectors by itself
 * (comparisons, conversions, variable and byte shuffles: a 64-byte vector of those is done lane
 * by lane on a host with narrower vectors): VDSP_IVP_HOST_BYTES, the widest vector the
 * compilation targets (64 with AVX-512, 32 with AVX2, else 16), and those operations on the
 * VDSP_IVP_CHUNKS chunks of that width a vector is (unrolled: no loop, no block). The kernel
 * library is built once per x86-64 level (dsp_side.ckernel.LEVELS); every chunk
 * width gives the same bytes. */
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define VDSP_IVP_HOST_BYTES 64
#elif defined(__AVX2__)
#define VDSP_IVP_HOST_BYTES 32
#else
#define VDSP_IVP_HOST_BYTES 16
#endif
/* The host's intrinsics below come from <immintrin.h> where the build targets AVX2 or AVX-512, else
 * from SSE2's <emmintrin.h>, which holds all the 16-byte paths use: <immintrin.h> is some 60,000
 * lines that the compiler reads for every file including this header, whatever the level (half
 * the CPU time of compiling the runtime, vdsp_rt.c, at -O2 with GCC 12). */
#if (defined(__x86_64__) || defined(__i386__)) && VDSP_IVP_HOST_BYTES > 16
#include <immintrin.h>
#elif (defined(__x86_64__) || defined(__i386__)) && defined(__SSE2__)
#include <emmintrin.h>
#endif
#define VDSP_IVP_CHUNKS (64 / VDSP_IVP_HOST_BYTES)
typedef float vdsp_ivp_cf32 __attribute__((vector_size(VDSP_IVP_HOST_BYTES)));
typedef int32_t vdsp_ivp_ci32 __attribute__((vector_size(VDSP_IVP_HOST_BYTES)));
typedef uint32_t vdsp_ivp_cu32 __attribute__((vector_size(VDSP_IVP_HOST_BYTES)));
typedef uint8_t vdsp_ivp_cu8 __attribute__((vector_size(VDSP_IVP_HOST_BYTES)));
#define VDSP_IVP_EACH_CHUNK(c) VDSP_IVP_LANES for (int c = 0; c < VDSP_IVP_CHUNKS; c++)
/* Whole-vector arithmetic (add, subtract, divide, the in-lane selections) on VDSP_IVP_WORK_CHUNKS
 * pieces of VDSP_IVP_WORK_BYTES: the whole vector on every level (AVX-512's register; with AVX2
 * and SSE2, GCC's own split of it). (AVX2 builds once worked in two 32-byte chunks, CenterPoint's
 * stage 1 1.3 ms instead of 1.5, but a vector that a loop carries and the kernel also reads lane by
 * lane then came back from memory at the loop's latch, a counted block per iteration that the
 * other levels do not have: tests/dsp/test_board_time.py.) */
#define VDSP_IVP_WORK_BYTES 64
#define VDSP_IVP_WORK_CHUNKS (64 / VDSP_IVP_WORK_BYTES)
typedef float vdsp_ivp_wf32 __attribute__((vector_size(VDSP_IVP_WORK_BYTES)));
typedef uint32_t vdsp_ivp_wu32 __attribute__((vector_size(VDSP_IVP_WORK_BYTES)));
#define VDSP_IVP_EACH_WORK(c) VDSP_IVP_LANES for (int c = 0; c < VDSP_IVP_WORK_CHUNKS; c++)
/* On x86 with chunks narrower than a vector (AVX2, SSE2) the predicates' conversions and the
 * shuffles below are the host's instructions (above), which GCC's vector extensions do
 * not reach for those widths. */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__SSE2__) && VDSP_IVP_CHUNKS > 1
#define VDSP_IVP_X86 VDSP_IVP_HOST_BYTES
#else
#define VDSP_IVP_X86 0
#endif
/* VDSP_IVP_MASKS(t, m): the predicates t (a vboolN_2) as masks m[0..VDSP_IVP_CHUNKS - 1]
 * (vdsp_ivp_ci32 chunks), all ones where true. */
#if VDSP_IVP_X86 == 32
#define VDSP_IVP_MASKS(t, m)                                                                           \
  do {                                                                                                 \
    __m128i p_;                                                                                        \
    memcpy(&p_, (t).b, 16);                                                                            \
    (m)[0] = ~(vdsp_ivp_ci32)_mm256_cmpeq_epi32(_mm256_cvtepu8_epi32(p_), _mm256_setzero_si256());    \
    (m)[1] = ~(vdsp_ivp_ci32)_mm256_cmpeq_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(p_, 8)), _mm256_setzero_si256()); \
  } while (0)
#elif VDSP_IVP_X86 == 16
#define VDSP_IVP_MASKS(t, m)                                                                           \
  do {                                                                                                 \
    __m128i p_, z_ = _mm_setzero_si128(), lo_, hi_;                                                    \
    memcpy(&p_, (t).b, 16);                                                                            \
    lo_ = _mm_unpacklo_epi8(p_, z_), hi_ = _mm_unpackhi_epi8(p_, z_); /* 16-bit lanes */               \
    (m)[0] = ~(vdsp_ivp_ci32)_mm_cmpeq_epi32(_mm_unpacklo_epi16(lo_, z_), z_);                         \
    (m)[1] = ~(vdsp_ivp_ci32)_mm_cmpeq_epi32(_mm_unpackhi_epi16(lo_, z_), z_);                         \
    (m)[2] = ~(vdsp_ivp_ci32)_mm_cmpeq_epi32(_mm_unpacklo_epi16(hi_, z_), z_);                         \
    (m)[3] = ~(vdsp_ivp_ci32)_mm_cmpeq_epi32(_mm_unpackhi_epi16(hi_, z_), z_);                         \
  } while (0)
#else /* one chunk (AVX-512), or another host: a widening conversion of the 16 bytes */
#define VDSP_IVP_MASKS(t, m)                                                                           \
  do {                                                                                                 \
    vdsp_ivp_u8b p_;                                                                                   \
    VDSP_IVP_GET(p_, (t).b);                                                                           \
    vdsp_ivp_i32 const w_ = __builtin_convertvector(p_ != 0, vdsp_ivp_i32);                            \
    memcpy((m), &w_, 64);                                                                              \
  } while (0)
#endif
/* VDSP_IVP_PREDICATES(r, m): the 16 predicates r (a vboolN_2) of the masks m[0..VDSP_IVP_CHUNKS - 1]
 * (vdsp_ivp_ci32 chunks, 0 or -1 per lane): the masks packed to bytes, & 1. */
#if VDSP_IVP_X86 == 32
#define VDSP_IVP_PREDICATES(r, m)                                                                      \
  do {                                                                                                 \
    /* words a0-3 b0-3 a4-7 b4-7, then a0-7 b0-7, then their bytes */                                 \
    __m256i const w_ = _mm256_permute4x64_epi64(_mm256_packs_epi32((__m256i)(m)[0], (__m256i)(m)[1]), 0xd8); \
    __m128i const b_ = _mm_and_si128(_mm_packs_epi16(_mm256_castsi256_si128(w_), _mm256_extracti128_si256(w_, 1)), \
                                     _mm_set1_epi8(1));                                                \
    memcpy((r).b, &b_, 16);                                                                            \
  } while (0)
#elif VDSP_IVP_X86 == 16
#define VDSP_IVP_PREDICATES(r, m)                                                                      \
  do {                                                                                                 \
    __m128i const b_ = _mm_and_si128(_mm_packs_epi16(_mm_packs_epi32((__m128i)(m)[0], (__m128i)(m)[1]), \
                                                     _mm_packs_epi32((__m128i)(m)[2], (__m128i)(m)[3])), \
                                     _mm_set1_epi8(1));                                                \
    memcpy((r).b, &b_, 16);                                                                            \
  } while (0)
#else
#define VDSP_IVP_PREDICATES(r, m)                                                                      \
  do {                                                                                                 \
    vdsp_ivp_u8b t_;                                                                                   \
    vdsp_ivp_i32 w_;                                                                                   \
    memcpy(&w_, (m), 64);                                                                              \
    t_ = __builtin_convertvector(w_ & 1, vdsp_ivp_u8b);                                                \
    VDSP_IVP_PUT((r).b, t_);                                                                           \
  } while (0)
#endif

/* --- scalar broadcast (see the invariants) -------------------------------------------------- */
VDSP_IVP_INLINE xb_vecN_2xf32 vdsp_ivp_f32_bcast(float x) { xb_vecN_2xf32 v; VDSP_IVP_LANES for (int i = 0; i < VDSP_IVP_N_2; i++) v.s[i] = x; return v; }
VDSP_IVP_INLINE xb_vecN_2x32v vdsp_ivp_i32_bcast(int32_t x) { xb_vecN_2x32v v; VDSP_IVP_LANES for (int i = 0; i < VDSP_IVP_N_2; i++) v.s[i] = x; return v; }
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
/* Every lane's byte offset inside the window and aligned to the element's `size` (a power of
 * two, a constant), else the task ends naming the intrinsic `id` (a constant) and the first bad
 * lane (vdsp_ivp_refused). */
#define VDSP_IVP_WINDOW_BITS 16 /* VDSP_IVP_WINDOW_BYTES is 1 << this */
#define VDSP_IVP_CHECK_WINDOW(id, off, size)                                                      \
  do {                                                                                           \
    vdsp_ivp_u32 o_, bad_;                                                                       \
    vdsp_ivp_u32h lo_, hi_;                                                                      \
    vdsp_ivp_u32q q0_, q1_;                                                                      \
    VDSP_IVP_GET(o_, (off).s);                                                                   \
    /* bad lanes: an offset of 2^16 or more, or one whose element reaches past 2^16 (an offset    \
     * below 2^16 plus size - 1 does not wrap), or misaligned; no comparisons (any width) */      \
    bad_ = ((o_ | (o_ + ((size) - 1u))) >> VDSP_IVP_WINDOW_BITS) | (o_ & ((size) - 1u));          \
    memcpy(&lo_, &bad_, 32), memcpy(&hi_, (char const *)&bad_ + 32, 32), lo_ |= hi_;            \
    memcpy(&q0_, &lo_, 16), memcpy(&q1_, (char const *)&lo_ + 16, 16), q0_ |= q1_;              \
    VDSP_IVP_REQUIRE_LANES(q0_[0] | q0_[1] | q0_[2] | q0_[3], VDSP_IVP_BAD_WINDOW, o_, size, id); \
  } while (0)

/* IVP_GATHERAN_2XF32(base, offsets): lane i of the gather register gets the 32-bit float at
 * (char *)base + offsets[i] (a byte offset, 4-byte aligned, inside the 64 kB window).
 * IVP_GATHERAN_2X32(base, offsets): the same for 32-bit integers (the same 32 bits per lane). */
/* the 16 words at base + off.s[i] (checked inside the window) into g.u.w: the host's gather
 * instruction where the build has one (x86-64-v4: one of 16 lanes; x86-64-v3: two of 8), else one
 * load a lane (and with VDSP_IVP_NO_HW_GATHER given, to compare: vdsp_sim/benchmarks/README.md) */
#if !defined(VDSP_IVP_NO_HW_GATHER) && VDSP_IVP_HOST_BYTES == 64 && defined(__x86_64__)
#define VDSP_IVP_GATHER_LANES(g, base, off)                                                        \
  do {                                                                                             \
    __m512i o_;                                                                                    \
    memcpy(&o_, (off).s, 64);                                                                      \
    __m512i const w_ = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), 0xffff, o_, (base), 1); \
    memcpy((g).u.w, &w_, 64);                                                                      \
  } while (0)
#elif !defined(VDSP_IVP_NO_HW_GATHER) && VDSP_IVP_X86 == 32
#define VDSP_IVP_GATHER_LANES(g, base, off)                                                        \
  do {                                                                                             \
    __m256i o_[2], w_[2];                                                                          \
    memcpy(o_, (off).s, 64);                                                                       \
    w_[0] = _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), (int const *)(base), o_[0], _mm256_set1_epi32(-1), 1); \
    w_[1] = _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), (int const *)(base), o_[1], _mm256_set1_epi32(-1), 1); \
    memcpy((g).u.w, w_, 64);                                                                       \
  } while (0)
#else
#define VDSP_IVP_GATHER_LANES(g, base, off) \
  VDSP_IVP_LANES for (int i = 0; i < VDSP_IVP_N_2; i++) memcpy(&(g).u.w[i], (char const *)(base) + (off).s[i], 4)
#endif
#define VDSP_IVP_GATHERA_32(fn, NAME)                                                              \
  VDSP_IVP_INLINE xb_gsr fn(void const *base, xb_vecN_2x32Uv off) {                                \
    xb_gsr g;                                                                                      \
    VDSP_IVP_WHERE(NAME, base);                                                                    \
    VDSP_IVP_CHECK_WINDOW(VDSP_IVP_ID_##NAME, off, 4);                                             \
    VDSP_IVP_GATHER_LANES(g, base, off);                                                           \
    return g;                                                                                      \
  }
VDSP_IVP_GATHERA_32(vdsp_ivp_gathera_32, GATHERAN_2XF32)
VDSP_IVP_GATHERA_32(vdsp_ivp_gathera_32i, GATHERAN_2X32)
#define IVP_GATHERAN_2XF32(base, offsets) (VDSP_IVP_COUNT(GATHERAN_2XF32), vdsp_ivp_gathera_32((void const *)(base), VDSP_IVP_U32(offsets)))
#define IVP_GATHERAN_2X32(base, offsets) (VDSP_IVP_COUNT(GATHERAN_2X32), vdsp_ivp_gathera_32i((void const *)(base), VDSP_IVP_U32(offsets)))

/* IVP_GATHERDN_2XF32(gsr): the 16 floats a 32-bit gather fetched, lane i from lane i.
 * IVP_GATHERDN_2X32(gsr): the same 16 lanes as 32-bit integers (bits unchanged). */
VDSP_IVP_INLINE xb_vecN_2xf32 vdsp_ivp_gatherd_f32(xb_gsr g) { xb_vecN_2xf32 v; memcpy(v.s, g.u.w, sizeof v.s); return v; }
VDSP_IVP_INLINE xb_vecN_2x32v vdsp_ivp_gatherd_i32(xb_gsr g) { xb_vecN_2x32v v; memcpy(v.s, g.u.w, sizeof v.s); return v; }
#define IVP_GATHERDN_2XF32(gsr) (VDSP_IVP_COUNT(GATHERDN_2XF32), vdsp_ivp_gatherd_f32(gsr))
#define IVP_GATHERDN_2X32(gsr) (VDSP_IVP_COUNT(GATHERDN_2X32), vdsp_ivp_gatherd_i32(gsr))

/* IVP_GATHERANX8S(base, offsets): lane i (of 32) of the gather register gets the signed byte at
 * (char *)base + offsets[i], sign-extended to 16 bits (16-bit offsets: always inside the window). */
VDSP_IVP_INLINE xb_gsr vdsp_ivp_gathera_8s(void const *base, xb_vecNx16U off) {
  xb_gsr g;
  VDSP_IVP_WHERE(GATHERANX8S, base);
  VDSP_IVP_LANES for (int i = 0; i < VDSP_IVP_N; i++) g.u.h[i] = ((int8_t const *)base)[off.s[i]];
  return g;
}
#define IVP_GATHERANX8S(base, offsets) (VDSP_IVP_COUNT(GATHERANX8S), vdsp_ivp_gathera_8s((void const *)(base), offsets))

/* the 32 bytes an 8-bit gather fetched (lane i from lane i), into 32 bytes at `to` */
VDSP_IVP_INLINE void vdsp_ivp_gatherd_bytes(int8_t *to, xb_gsr const *g) {
  VDSP_IVP_LANES for (int i = 0; i < VDSP_IVP_N; i++) to[i] = (int8_t)g->u.h[i]; /* a sign-extended byte: exact */
}

/* IVP_GATHERD2NX8_L(gsr): a 64-byte vector whose lanes 0..31 are the 32 bytes an 8-bit gather
 * fetched (lane i from lane i) and whose lanes 32..63 are 0 (this emulation's choice). */
VDSP_IVP_INLINE xb_vec2Nx8 vdsp_ivp_gatherd_2nx8_l(xb_gsr g) {
  xb_vec2Nx8 v;
  vdsp_ivp_gatherd_bytes(v.s, &g);
  memset(v.s + VDSP_IVP_N, 0, VDSP_IVP_N);
  return v;
}
#define IVP_GATHERD2NX8_L(gsr) (VDSP_IVP_COUNT(GATHERD2NX8_L), vdsp_ivp_gatherd_2nx8_l(gsr))

/* IVP_GATHERD2NX8_H(v, gsr): sets lanes 32..63 of the vector variable v to the 32 bytes an 8-bit
 * gather fetched (lane 32 + i from lane i); lanes 0..31 of v are kept. */
VDSP_IVP_INLINE void vdsp_ivp_gatherd_2nx8_h(xb_vec2Nx8 *v, xb_gsr g) { vdsp_ivp_gatherd_bytes(v->s + VDSP_IVP_N, &g); }
#define IVP_GATHERD2NX8_H(v, gsr) (VDSP_IVP_COUNT(GATHERD2NX8_H), vdsp_ivp_gatherd_2nx8_h(&(v), gsr))

/* IVP_SCATTERN_2X32(v, base, offsets): stores lane i of v (32 bits) at (char *)base + offsets[i]
 * (a byte offset, 4-byte aligned, inside the 64 kB window), lanes in order 0..15: of lanes with
 * one offset the highest wins. Here the stores land at once; on the board they land by the next
 * IVP_SCATTERW, which a kernel must issue before it (or a DMA) reads them. */
VDSP_IVP_INLINE void vdsp_ivp_scatter_32(xb_vecN_2x32v v, void *base, xb_vecN_2x32Uv off) {
  VDSP_IVP_WHERE(SCATTERN_2X32, base);
  VDSP_IVP_CHECK_WINDOW(VDSP_IVP_ID_SCATTERN_2X32, off, 4);
  VDSP_IVP_LANES for (int i = 0; i < VDSP_IVP_N_2; i++) memcpy((char *)base + off.s[i], &v.s[i], 4);
}
#define IVP_SCATTERN_2X32(v, base, offsets) (VDSP_IVP_COUNT(SCATTERN_2X32), vdsp_ivp_scatter_32(VDSP_IVP_I32(v), (void *)(base), VDSP_IVP_U32(offsets)))

/* IVP_SCATTERW(): waits until every scatter issued has written memory (here: they have). */
#define IVP_SCATTERW() (VDSP_IVP_COUNT(SCATTERW), ((void)0))

/* --- arithmetic ------------------------------------------------------------------------------ */
/* IVP_SUBN_2XF32(a, b): lane i = a[i] - b[i], IEEE single, round to nearest even. */
VDSP_IVP_INLINE xb_vecN_2xf32 vdsp_ivp_subf(xb_vecN_2xf32 a, xb_vecN_2xf32 b) {
  vdsp_ivp_wf32 x[VDSP_IVP_WORK_CHUNKS], y[VDSP_IVP_WORK_CHUNKS];
  VDSP_IVP_GET(x, a.s), VDSP_IVP_GET(y, b.s);
  VDSP_IVP_EACH_WORK(c) x[c] -= y[c];
  VDSP_IVP_PUT(a.s, x);
  return a;
}
#define IVP_SUBN_2XF32(a, b) (VDSP_IVP_COUNT(SUBN_2XF32), vdsp_ivp_subf(VDSP_IVP_F32(a), VDSP_IVP_F32(b)))

/* IVP_DIVN_2XF32(a, b): lane i = a[i] / b[i], IEEE single, correctly rounded (nearest even). */
VDSP_IVP_INLINE xb_vecN_2xf32 vdsp_ivp_divf(xb_vecN_2xf32 a, xb_vecN_2xf32 b) {
  vdsp_ivp_wf32 x[VDSP_IVP_WORK_CHUNKS], y[VDSP_IVP_WORK_CHUNKS];
  VDSP_IVP_GET(x, a.s), VDSP_IVP_GET(y, b.s);
  VDSP_IVP_EACH_WORK(c) x[c] /= y[c];
  VDSP_IVP_PUT(a.s, x);
  return a;
}
#define IVP_DIVN_2XF32(a, b) (VDSP_IVP_COUNT(DIVN_2XF32), vdsp_ivp_divf(VDSP_IVP_F32(a), VDSP_IVP_F32(b)))

/* VDSP_IVP_X86_TRUNC(x): the host's truncating conversion of a chunk of floats (x86) */
#if defined(__x86_64__) && VDSP_IVP_HOST_BYTES == 64
#define VDSP_IVP_X86_TRUNC(x) _mm512_maskz_cvttps_epi32((__mmask16)0xffff, (__m512)(x)) /* (no undefined pass-through) */
#elif defined(__x86_64__) && VDSP_IVP_HOST_BYTES == 32
#define VDSP_IVP_X86_TRUNC(x) _mm256_cvttps_epi32((__m256)(x))
#elif defined(__x86_64__) && defined(__SSE2__)
#define VDSP_IVP_X86_TRUNC(x) _mm_cvttps_epi32((__m128)(x))
#endif
/* IVP_TRUNCN_2XF32(a, q): lane i = a[i] * 2^q rounded toward zero to int32 (q fractional bits,
 * 0 <= q <= 31), saturated to [INT32_MIN, INT32_MAX]; NaN gives 0 (assumed). */
VDSP_IVP_INLINE xb_vecN_2x32v vdsp_ivp_truncf(xb_vecN_2xf32 a, int q) {
  xb_vecN_2x32v r;
  vdsp_ivp_cf32 x[VDSP_IVP_CHUNKS];
  vdsp_ivp_ci32 t[VDSP_IVP_CHUNKS];
  VDSP_IVP_REQUIRE((uint32_t)q > 31u, VDSP_IVP_BAD_FRACTION, (uint32_t)q);
  VDSP_IVP_GET(x, a.s);
#ifdef VDSP_IVP_X86_TRUNC
  /* x86: the host's truncation (cvttps2dq) gives 0x80000000 for NaN and every lane outside
   * int32 (and for -2^31 itself); a lane >= 2^31 flips it to INT32_MAX, NaN lanes are cleared:
   * three instructions fewer a chunk than the portable one below, the same words (CenterPoint's
   * stage 1, seven truncations a step: about 8 % less time on AVX-512 and on AVX2) */
  VDSP_IVP_EACH_CHUNK(c) {
    x[c] *= (float)(1u << (q & 31));
    vdsp_ivp_ci32 const host = (vdsp_ivp_ci32)VDSP_IVP_X86_TRUNC(x[c]);
    t[c] = (host ^ (x[c] >= 2147483648.0f)) & (x[c] == x[c]);
  }
#else
  VDSP_IVP_EACH_CHUNK(c) {
    x[c] *= (float)(1u << (q & 31)); /* a power of two: the product is exact, or infinite (saturated) */
    /* one comparison per mask (GCC scalarises a combination of two for a narrower host) */
    vdsp_ivp_ci32 const in = (vdsp_ivp_cf32)((vdsp_ivp_ci32)x[c] & 0x7fffffff) < 2147483648.0f; /* |x| < 2^31; not NaN */
    vdsp_ivp_cf32 const safe = (vdsp_ivp_cf32)((vdsp_ivp_ci32)x[c] & in);                      /* +0 where not */
    t[c] = __builtin_convertvector(safe, vdsp_ivp_ci32);
    t[c] = VDSP_IVP_PICK(x[c] >= 2147483648.0f, INT32_MAX, t[c]);
    t[c] = VDSP_IVP_PICK(x[c] <= -2147483648.0f, INT32_MIN, t[c]); /* -2^31 itself is INT32_MIN */
  }
#endif
  VDSP_IVP_PUT(r.s, t);
  return r;
}
#define IVP_TRUNCN_2XF32(a, q) (VDSP_IVP_COUNT(TRUNCN_2XF32), vdsp_ivp_truncf(VDSP_IVP_F32(a), q))

/* IVP_SLLN_2X32(a, s): lane i = a[i] shifted left by s[i] bits, logically, modulo 2^32; s[i] of
 * 32 or more gives 0; a negative s[i] shifts right logically by -s[i] (assumed). */
VDSP_IVP_INLINE xb_vecN_2x32v vdsp_ivp_sll(xb_vecN_2x32v a, xb_vecN_2x32v s) {
  vdsp_ivp_cu32 u[VDSP_IVP_CHUNKS];
  vdsp_ivp_ci32 k[VDSP_IVP_CHUNKS];
  VDSP_IVP_GET(u, a.s), VDSP_IVP_GET(k, s.s);
  VDSP_IVP_EACH_CHUNK(c) {
    vdsp_ivp_cu32 const left = u[c] << ((vdsp_ivp_cu32)k[c] & 31u), right = u[c] >> ((0u - (vdsp_ivp_cu32)k[c]) & 31u);
    vdsp_ivp_ci32 const none = (k[c] >= 32) | (k[c] <= -32); /* every bit shifted out */
    u[c] = VDSP_IVP_PICK((vdsp_ivp_cu32)(k[c] >= 0), left, right) & ~(vdsp_ivp_cu32)none;
  }
  VDSP_IVP_PUT(a.s, u);
  return a;
}
#define IVP_SLLN_2X32(a, s) (VDSP_IVP_COUNT(SLLN_2X32), vdsp_ivp_sll(VDSP_IVP_I32(a), VDSP_IVP_I32(s)))

/* IVP_ADDN_2X32(a, b): lane i = a[i] + b[i] modulo 2^32 (wraps, no saturation). */
VDSP_IVP_INLINE xb_vecN_2x32v vdsp_ivp_add32(xb_vecN_2x32v a, xb_vecN_2x32v b) {
  vdsp_ivp_wu32 x[VDSP_IVP_WORK_CHUNKS], y[VDSP_IVP_WORK_CHUNKS];
  VDSP_IVP_GET(x, a.s), VDSP_IVP_GET(y, b.s);
  VDSP_IVP_EACH_WORK(c) x[c] += y[c];
  VDSP_IVP_PUT(a.s, x);
  return a;
}
#define IVP_ADDN_2X32(a, b) (VDSP_IVP_COUNT(ADDN_2X32), vdsp_ivp_add32(VDSP_IVP_I32(a), VDSP_IVP_I32(b)))

/* --- predicates and selection ------------------------------------------------------------- */
/* IVP_ULEN_2XF32(a, b): lane i true when a[i] <= b[i] or either is NaN (unordered or less-equal). */
VDSP_IVP_INLINE vboolN_2 vdsp_ivp_ule(xb_vecN_2xf32 a, xb_vecN_2xf32 b) {
  vboolN_2 r;
  vdsp_ivp_cf32 x[VDSP_IVP_CHUNKS], y[VDSP_IVP_CHUNKS];
  vdsp_ivp_ci32 m[VDSP_IVP_CHUNKS];
  VDSP_IVP_GET(x, a.s), VDSP_IVP_GET(y, b.s);
  VDSP_IVP_EACH_CHUNK(c) m[c] = ~(x[c] > y[c]);
  VDSP_IVP_PREDICATES(r, m);
  return r;
}
#define IVP_ULEN_2XF32(a, b) (VDSP_IVP_COUNT(ULEN_2XF32), vdsp_ivp_ule(VDSP_IVP_F32(a), VDSP_IVP_F32(b)))

/* IVP_ORBN_2(a, b): lane i true when a[i] or b[i] is. */
VDSP_IVP_INLINE vboolN_2 vdsp_ivp_orb(vboolN_2 a, vboolN_2 b) {
  vdsp_ivp_u8b x, y;
  VDSP_IVP_GET(x, a.b), VDSP_IVP_GET(y, b.b), x |= y, VDSP_IVP_PUT(a.b, x);
  return a;
}
#define IVP_ORBN_2(a, b) (VDSP_IVP_COUNT(ORBN_2), vdsp_ivp_orb(a, b))

/* IVP_MOVN_2X32T(a, b, t): lane i = a[i] where t[i] is true, else b[i]. */
VDSP_IVP_INLINE xb_vecN_2x32v vdsp_ivp_movt(xb_vecN_2x32v a, xb_vecN_2x32v b, vboolN_2 t) {
  vdsp_ivp_ci32 x[VDSP_IVP_CHUNKS], y[VDSP_IVP_CHUNKS], m[VDSP_IVP_CHUNKS];
  VDSP_IVP_GET(x, a.s), VDSP_IVP_GET(y, b.s);
  VDSP_IVP_MASKS(t, m); /* all ones where true */
  VDSP_IVP_EACH_CHUNK(c) x[c] = VDSP_IVP_PICK(m[c], x[c], y[c]);
  VDSP_IVP_PUT(b.s, x);
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
  uint32_t const e = (uint32_t)sel >> 4, odd = (uint32_t)sel & 15u;
  VDSP_IVP_REQUIRE((e - 1u > 1u) | (odd > 1u), VDSP_IVP_BAD_SELECTOR, (uint32_t)sel);
  vdsp_ivp_wu32 h[VDSP_IVP_WORK_CHUNKS], l[VDSP_IVP_WORK_CHUNKS];
  VDSP_IVP_GET(h, hi.s), VDSP_IVP_GET(l, lo.s);
  uint32_t const m = 0u - (uint32_t)(e == 1u);
  /* each 32-bit lane holds 4 bytes (E = 1) or 2 halfwords (E = 2): picks within the lane */
  VDSP_IVP_EACH_WORK(c) {
    vdsp_ivp_wu32 const bytes = ((l[c] >> (8u * (odd & 1u))) & 0x00ff00ffu) |
                                (((h[c] >> (8u * (odd & 1u))) & 0x00ff00ffu) << 8);
    vdsp_ivp_wu32 const halves = ((l[c] >> (16u * (odd & 1u))) & 0xffffu) | (((h[c] >> (16u * (odd & 1u))) & 0xffffu) << 16);
    l[c] = VDSP_IVP_PICK(m, bytes, halves);
  }
  VDSP_IVP_PUT(hi.s, l);
  return hi;
}
#define IVP_SELN_2X32I(hi, lo, sel) (VDSP_IVP_COUNT(SELN_2X32I), vdsp_ivp_sel32i(VDSP_IVP_I32(hi), VDSP_IVP_I32(lo), sel))

/* IVP_SELN_2X32(hi, lo, sel): lane i = c[sel[i] mod 32] of the 32 words c of lo then hi (lo
 * first, the second operand): any selection of 16 of the two vectors' words, by the low 5 bits
 * of each index (the higher bits ignored: assumed). */
#if defined(__clang__) || VDSP_IVP_CHUNKS == 4 /* word by word: Clang, and SSE2's 16-byte chunks */
#define VDSP_IVP_SELECT_WORDS(r, l, h, k)                                                      \
  do {                                                                                        \
    uint32_t c_[2 * VDSP_IVP_N_2], r_[VDSP_IVP_N_2], k_[VDSP_IVP_N_2];                        \
    VDSP_IVP_PUT(c_, l), VDSP_IVP_PUT(c_ + VDSP_IVP_N_2, h), VDSP_IVP_PUT(k_, k);              \
    VDSP_IVP_LANES for (int i_ = 0; i_ < VDSP_IVP_N_2; i_++) r_[i_] = c_[k_[i_] & 31u];       \
    VDSP_IVP_GET(r, r_);                                                                      \
  } while (0)
#else
#define VDSP_IVP_SELECT_WORDS(r, l, h, k) ((r) = __builtin_shuffle(l, h, k))
#endif
#if VDSP_IVP_X86 == 32
/* AVX2: each result chunk of 8 words is one of the four source chunks' words by the index's low 3
 * bits (vpermd of each), chosen by its bit 3 (within a pair) and bit 4 (the pair): blends by the
 * sign bit of the index shifted up. A selector the compiler knows (a kernel's constant table,
 * once inlined) is its two-source shuffles of 8 words instead (GCC), which it turns into the
 * few instructions those lanes need (CenterPoint's stage 1, whose selections merge a vector's
 * words into what earlier ones gathered: 1.92 -> 1.75 ms on an AVX2 build); the same words
 * either way. */
typedef uint32_t vdsp_ivp_u32c8 __attribute__((vector_size(32)));
#define VDSP_IVP_KNOWN_LANES(v) /* every lane a constant to the compiler (GCC) */                       \
  __builtin_constant_p((v)[0] + (v)[1] + (v)[2] + (v)[3] + (v)[4] + (v)[5] + (v)[6] + (v)[7] + (v)[8] + \
                       (v)[9] + (v)[10] + (v)[11] + (v)[12] + (v)[13] + (v)[14] + (v)[15])
VDSP_IVP_INLINE xb_vecN_2x32v vdsp_ivp_sel32(xb_vecN_2x32v hi, xb_vecN_2x32v lo, xb_vecN_2x32v sel) {
  __m256i src[4], k[2];
  __m256 r[2];
#if !defined(__clang__)
  if (VDSP_IVP_KNOWN_LANES(sel.s)) { /* decided by the compiler: no branch */
    vdsp_ivp_u32c8 w[4], idx[2], out[2];
    memcpy(w, lo.s, 64), memcpy(w + 2, hi.s, 64), memcpy(idx, sel.s, 64);
    VDSP_IVP_EACH_CHUNK(c) {
      vdsp_ivp_u32c8 const in_pair = idx[c] & 15u, pair = (vdsp_ivp_u32c8){0, 1, 2, 3, 4, 5, 6, 7} + (idx[c] & 16u) / 2u;
      out[c] = __builtin_shuffle(__builtin_shuffle(w[0], w[1], in_pair), __builtin_shuffle(w[2], w[3], in_pair), pair);
    }
    memcpy(hi.s, out, 64);
    return hi;
  }
#endif
  memcpy(src, lo.s, 64), memcpy(src + 2, hi.s, 64), VDSP_IVP_GET(k, sel.s);
  VDSP_IVP_EACH_CHUNK(c) {
    __m256 const pair0 = _mm256_blendv_ps(_mm256_castsi256_ps(_mm256_permutevar8x32_epi32(src[0], k[c])),
                                          _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(src[1], k[c])),
                                          _mm256_castsi256_ps(_mm256_slli_epi32(k[c], 28)));
    __m256 const pair1 = _mm256_blendv_ps(_mm256_castsi256_ps(_mm256_permutevar8x32_epi32(src[2], k[c])),
                                          _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(src[3], k[c])),
                                          _mm256_castsi256_ps(_mm256_slli_epi32(k[c], 28)));
    r[c] = _mm256_blendv_ps(pair0, pair1, _mm256_castsi256_ps(_mm256_slli_epi32(k[c], 27)));
  }
  VDSP_IVP_PUT(hi.s, r);
  return hi;
}
#else
/* VDSP_IVP_SELECT_WORDS: one chunk, the host's two-source shuffle (AVX-512: vpermi2d); 16-byte
 * chunks (SSE2) or Clang, word by word */
VDSP_IVP_INLINE xb_vecN_2x32v vdsp_ivp_sel32(xb_vecN_2x32v hi, xb_vecN_2x32v lo, xb_vecN_2x32v sel) {
  vdsp_ivp_u32 h, l, k, r;
  VDSP_IVP_GET(h, hi.s), VDSP_IVP_GET(l, lo.s), VDSP_IVP_GET(k, sel.s);
  k &= 31u;
#if VDSP_IVP_HOST_BYTES == 64 && defined(__x86_64__)
  /* the index in a register, known or not: GCC's own expansion of a known 16-word two-source
   * shuffle (blends and permutes with their own constants) took CenterPoint's stage 1 about 6 %
   * longer than the one vpermt2d does */
  __asm__("" : "+v"(k));
#endif
  VDSP_IVP_SELECT_WORDS(r, l, h, k);
  VDSP_IVP_PUT(hi.s, r);
  return hi;
}
#endif
#define IVP_SELN_2X32(hi, lo, sel) (VDSP_IVP_COUNT(SELN_2X32), vdsp_ivp_sel32(VDSP_IVP_I32(hi), VDSP_IVP_I32(lo), VDSP_IVP_I32(sel)))

/* Selector of IVP_DSELN_2X32I (this header's value). The 128 bytes of lo then hi (lo first, the
 * second operand) read as 8-bit elements c[0..127]:
 *   8B_DEINTERLEAVE_1: lo_out byte k = c[2k] (the even elements), hi_out byte k = c[2k + 1] (k < 64). */
#define IVP_DSELI_8B_DEINTERLEAVE_1 0x30

/* IVP_DSELN_2X32I(hi_out, lo_out, hi, lo, sel): (a statement) the variables hi_out and lo_out
 * become the two 64-byte results that selector `sel` makes of hi and lo (above); another
 * selector value is a fault naming it. */
#if defined(__clang__)
#define VDSP_IVP_EVEN_ODD(even, odd, l, h)                                                                    \
  (even) = __builtin_shufflevector(l, h, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 36, \
                                   38, 40, 42, 44, 46, 48, 50, 52, 54, 56, 58, 60, 62, 64, 66, 68, 70, 72, 74, 76,  \
                                   78, 80, 82, 84, 86, 88, 90, 92, 94, 96, 98, 100, 102, 104, 106, 108, 110, 112,   \
                                   114, 116, 118, 120, 122, 124, 126),                                             \
  (odd) = __builtin_shufflevector(l, h, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31, 33, 35, 37,   \
                                  39, 41, 43, 45, 47, 49, 51, 53, 55, 57, 59, 61, 63, 65, 67, 69, 71, 73, 75, 77,   \
                                  79, 81, 83, 85, 87, 89, 91, 93, 95, 97, 99, 101, 103, 105, 107, 109, 111, 113,    \
                                  115, 117, 119, 121, 123, 125, 127)
#else
/* in chunks: result chunk j is the even (odd) bytes of source chunks 2j and 2j + 1 of the 128 */
#define VDSP_IVP_EVEN_ODD(even, odd, l, h)                                                         \
  do {                                                                                             \
    vdsp_ivp_cu8 k_, s_[2 * VDSP_IVP_CHUNKS], e_[VDSP_IVP_CHUNKS], o_[VDSP_IVP_CHUNKS];            \
    VDSP_IVP_LANES for (int i_ = 0; i_ < VDSP_IVP_HOST_BYTES; i_++) k_[i_] = (uint8_t)(2 * i_);     \
    memcpy(s_, &(l), 64), memcpy(s_ + VDSP_IVP_CHUNKS, &(h), 64);                                  \
    VDSP_IVP_EACH_CHUNK(j_) e_[j_] = __builtin_shuffle(s_[2 * j_], s_[2 * j_ + 1], k_),            \
                            o_[j_] = __builtin_shuffle(s_[2 * j_], s_[2 * j_ + 1], k_ + 1);        \
    memcpy(&(even), e_, 64), memcpy(&(odd), o_, 64);                                               \
  } while (0)
#endif
VDSP_IVP_INLINE void vdsp_ivp_dsel32i(xb_vecN_2x32v *hi_out, xb_vecN_2x32v *lo_out, xb_vecN_2x32v hi,
                                      xb_vecN_2x32v lo, int sel) {
  VDSP_IVP_REQUIRE(sel != IVP_DSELI_8B_DEINTERLEAVE_1, VDSP_IVP_BAD_DSELECTOR, (uint32_t)sel);
#if VDSP_IVP_X86 == 32 && !defined(__clang__)
  /* AVX2 (in registers: GCC moves a 64-byte vector of bytes through memory there): within each
   * 16-byte lane the even bytes to its low half and the odd ones to its high half (vpshufb), then
   * the halves of two chunks in order (vpermq, vperm2i128) */
  __m256i s[4], e[2], o[2];
  __m256i const k = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12, 14, 1,
                                     3, 5, 7, 9, 11, 13, 15);
  memcpy(s, lo.s, 64), memcpy(s + 2, hi.s, 64);
  VDSP_IVP_EACH_CHUNK(j) {
    __m256i const a = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(s[2 * j], k), 0xd8);
    __m256i const b = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(s[2 * j + 1], k), 0xd8);
    e[j] = _mm256_permute2x128_si256(a, b, 0x20), o[j] = _mm256_permute2x128_si256(a, b, 0x31);
  }
  VDSP_IVP_PUT(lo_out->s, e), VDSP_IVP_PUT(hi_out->s, o);
#else
  vdsp_ivp_u8 h, l, even, odd;
  VDSP_IVP_GET(h, hi.s), VDSP_IVP_GET(l, lo.s);
  VDSP_IVP_EVEN_ODD(even, odd, l, h);
  VDSP_IVP_PUT(lo_out->s, even), VDSP_IVP_PUT(hi_out->s, odd);
#endif
}
#define IVP_DSELN_2X32I(hi_out, lo_out, hi, lo, sel) (VDSP_IVP_COUNT(DSELN_2X32I), vdsp_ivp_dsel32i(&(hi_out), &(lo_out), VDSP_IVP_I32(hi), VDSP_IVP_I32(lo), sel))

/* --- aligning stores ------------------------------------------------------------------------ */
/* IVP_ZALIGN(): an empty alignment register. */
VDSP_IVP_INLINE valign vdsp_ivp_zalign(void) { valign a; memset(&a, 0, sizeof a); return a; }
#define IVP_ZALIGN() (VDSP_IVP_COUNT(ZALIGN), vdsp_ivp_zalign())

VDSP_IVP_OUTLINE void vdsp_ivp_align_drain(valign *a) {
  if (a->count) memcpy(a->at, a->bytes, a->count);
  a->count = 0;
}

/* IVP_SA2NX8_IP(v, a, p): stores the 64 bytes of v at p (any alignment) and advances p by 64
 * bytes. The bytes past the last 64-byte boundary of p + 64 stay in the alignment register a
 * until its next store or IVP_SAPOS2NX8U_FP: a kernel that omits the flush loses them. */
VDSP_IVP_OUTLINE void *vdsp_ivp_sa2nx8_ip(xb_vec2Nx8 v, valign *a, void *p) {
  uint8_t *d = (uint8_t *)p;
  uint32_t keep = (uint32_t)(((uintptr_t)d + 64u) % 64u);
  VDSP_IVP_WHERE(SA2NX8_IP, p);
  if (!keep && !a->count) { /* aligned, nothing held (a stream of aligned stores, as often): one copy */
    memcpy(d, v.s, 64);
    return d + 64;
  }
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

/* IVP_SVN_2X32_IP(v, p, inc): the aligned store: writes the 64 bytes of v (lane 0 first) at p
 * rounded down to a multiple of 64 bytes (the core ignores an aligned store's low address bits)
 * and advances p by inc bytes (a constant of the kernel's). */
VDSP_IVP_INLINE void vdsp_ivp_sv_32(xb_vecN_2x32v v, void *p) {
  VDSP_IVP_WHERE(SVN_2X32_IP, p);
  memcpy((void *)((uintptr_t)p & ~(uintptr_t)63u), v.s, 64);
}
#define IVP_SVN_2X32_IP(v, p, inc) (VDSP_IVP_COUNT(SVN_2X32_IP), vdsp_ivp_sv_32(VDSP_IVP_I32(v), (void *)(p)), \
                                    ((p) = (VDSP_IVP_TYPEOF(p))((char *)(p) + (inc))))

/* IVP_LVN_2X32_IP(v, p, inc): the aligned load: the variable v becomes the 64 bytes (lane 0
 * first) at p rounded down to a multiple of 64 bytes (the core ignores an aligned load's low
 * address bits), and p advances by inc bytes (a constant of the kernel's). */
VDSP_IVP_INLINE xb_vecN_2x32v vdsp_ivp_lv_32(void const *p) {
  xb_vecN_2x32v v;
  vdsp_ivp_stream_line();
  VDSP_IVP_WHERE(LVN_2X32_IP, p);
  memcpy(v.s, (void const *)((uintptr_t)p & ~(uintptr_t)63u), 64);
  return v;
}
#define IVP_LVN_2X32_IP(v, p, inc) (VDSP_IVP_COUNT(LVN_2X32_IP), (v) = vdsp_ivp_lv_32((void const *)(p)), \
                                    ((p) = (VDSP_IVP_TYPEOF(p))((char const *)(p) + (inc))))

/* --- emulation speed (added for the stock point-cloud kernels) ---------------------------- */
/* VDSP_IVP_HOST_CLONES before a kernel's hot function: a function of its own, never inlined into
 * its caller (where the compiler hoists what a loop's intrinsics share, the blocks it counts stay
 * those of the calls mode: "how the intrinsics run on the host"). Its vectors are the host's
 * widest because the build compiles the whole kernel library once per x86-64 level
 * (VDSP_IVP_HOST_BYTES) and a core loads the widest its CPU runs (the name is from the versions
 * where the function alone was compiled for several widths). VDSP_KERNEL_INLINE: a kernel's own
 * helper inlined into it (its basic blocks are the kernel's, counted for the board-time estimate). */
#define VDSP_IVP_HOST_CLONES __attribute__((noinline))
#define VDSP_KERNEL_INLINE static inline VDSP_IVP_ALWAYS_INLINE

/* --- rounding and clamping (added for the stock point-cloud kernels, stage 1) -------------- */
/* IVP_FIRINTN_2XF32(a): lane i = a[i] rounded to an integral float in the core's rounding mode
 * (FCR), which is round to nearest, ties to even, the default and the only mode of this
 * emulation (rint/nearbyint); -0.5 gives -0, NaN stays NaN, infinities and zeros are kept. */
/* VDSP_IVP_X86_RINT(x), VDSP_IVP_X86_MAX(x, y), VDSP_IVP_X86_MIN(x, y): the host's own rounding
 * to an integral float (nearest even, no exception) and signed 32-bit maximum and minimum of a
 * chunk, where the build has them (AVX-512, AVX2); elsewhere the portable code below (GCC made
 * comparisons and blends of its selections, not the host's max and min: with these,
 * CenterPoint's stage 1, five roundings and ten clamps a step, about 9 % less time on AVX-512) */
#if defined(__x86_64__) && VDSP_IVP_HOST_BYTES == 64
#define VDSP_IVP_X86_RINT(x) _mm512_maskz_roundscale_ps((__mmask16)0xffff, (__m512)(x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define VDSP_IVP_X86_MAX(x, y) _mm512_maskz_max_epi32((__mmask16)0xffff, (__m512i)(x), (__m512i)(y))
#define VDSP_IVP_X86_MIN(x, y) _mm512_maskz_min_epi32((__mmask16)0xffff, (__m512i)(x), (__m512i)(y))
#elif defined(__x86_64__) && VDSP_IVP_HOST_BYTES == 32
#define VDSP_IVP_X86_RINT(x) _mm256_round_ps((__m256)(x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define VDSP_IVP_X86_MAX(x, y) _mm256_max_epi32((__m256i)(x), (__m256i)(y))
#define VDSP_IVP_X86_MIN(x, y) _mm256_min_epi32((__m256i)(x), (__m256i)(y))
#endif
VDSP_IVP_INLINE xb_vecN_2xf32 vdsp_ivp_firint(xb_vecN_2xf32 a) {
  vdsp_ivp_cu32 bits[VDSP_IVP_CHUNKS];
  VDSP_IVP_GET(bits, a.s);
#ifdef VDSP_IVP_X86_RINT
  /* a NaN keeps its bits (the host's rounding would quiet a signalling one): the same words */
  VDSP_IVP_EACH_CHUNK(c) {
    vdsp_ivp_cf32 const x = (vdsp_ivp_cf32)bits[c];
    bits[c] = VDSP_IVP_PICK((vdsp_ivp_cu32)(x != x), bits[c], (vdsp_ivp_cu32)VDSP_IVP_X86_RINT(x));
  }
#else
  VDSP_IVP_EACH_CHUNK(c) {
    vdsp_ivp_cf32 const big = (vdsp_ivp_cf32){} + 8388608.0f; /* 2^23: every float from here on is an integer */
    vdsp_ivp_cf32 const ax = (vdsp_ivp_cf32)(bits[c] & 0x7fffffffu);
    vdsp_ivp_cu32 const r = (vdsp_ivp_cu32)((ax + big) - big) | (bits[c] & 0x80000000u); /* the addition rounds,
                                                                             ties to even; +0 or more: x's sign */
    bits[c] = VDSP_IVP_PICK((vdsp_ivp_cu32)(ax < big), r, bits[c]); /* NaN, infinities, |x| >= 2^23 are kept */
  }
#endif
  VDSP_IVP_PUT(a.s, bits);
  return a;
}
#define IVP_FIRINTN_2XF32(a) (VDSP_IVP_COUNT(FIRINTN_2XF32), vdsp_ivp_firint(VDSP_IVP_F32(a)))

/* IVP_MAXN_2X32(a, b): lane i = the greater of a[i] and b[i], signed. */
VDSP_IVP_INLINE xb_vecN_2x32v vdsp_ivp_max32(xb_vecN_2x32v a, xb_vecN_2x32v b) {
  vdsp_ivp_ci32 x[VDSP_IVP_CHUNKS], y[VDSP_IVP_CHUNKS];
  VDSP_IVP_GET(x, a.s), VDSP_IVP_GET(y, b.s);
#ifdef VDSP_IVP_X86_MAX
  VDSP_IVP_EACH_CHUNK(c) x[c] = (vdsp_ivp_ci32)VDSP_IVP_X86_MAX(x[c], y[c]);
#else
  VDSP_IVP_EACH_CHUNK(c) x[c] = VDSP_IVP_PICK(x[c] > y[c], x[c], y[c]);
#endif
  VDSP_IVP_PUT(a.s, x);
  return a;
}
#define IVP_MAXN_2X32(a, b) (VDSP_IVP_COUNT(MAXN_2X32), vdsp_ivp_max32(VDSP_IVP_I32(a), VDSP_IVP_I32(b)))

/* IVP_MINN_2X32(a, b): lane i = the smaller of a[i] and b[i], signed. */
VDSP_IVP_INLINE xb_vecN_2x32v vdsp_ivp_min32(xb_vecN_2x32v a, xb_vecN_2x32v b) {
  vdsp_ivp_ci32 x[VDSP_IVP_CHUNKS], y[VDSP_IVP_CHUNKS];
  VDSP_IVP_GET(x, a.s), VDSP_IVP_GET(y, b.s);
#ifdef VDSP_IVP_X86_MIN
  VDSP_IVP_EACH_CHUNK(c) x[c] = (vdsp_ivp_ci32)VDSP_IVP_X86_MIN(x[c], y[c]);
#else
  VDSP_IVP_EACH_CHUNK(c) x[c] = VDSP_IVP_PICK(x[c] < y[c], x[c], y[c]);
#endif
  VDSP_IVP_PUT(a.s, x);
  return a;
}
#define IVP_MINN_2X32(a, b) (VDSP_IVP_COUNT(MINN_2X32), vdsp_ivp_min32(VDSP_IVP_I32(a), VDSP_IVP_I32(b)))

/* --- names of the ISA outside the subset: a compile error naming the intrinsic ------------- */
#define VDSP_IVP_HOW " is not in the vdsp-sim IVP subset: add it to dsp_side/ckernel/include/xtensa/tie/xt_ivpn.h " \
                     "with its semantics and a test in tests/dsp/test_ivp.py (docs/dsp_kernels.md, The IVP subset)"
#ifdef __cplusplus
#define VDSP_IVP_MISSING(name) ([]() { static_assert(sizeof(char) == 0, #name VDSP_IVP_HOW); }(), 0)
#else
#define VDSP_IVP_MISSING(name) sizeof(struct { _Static_assert(0, #name VDSP_IVP_HOW); int missing; })
#endif
#include "xt_ivpn_missing.h"

#endif /* VDSP_XT_IVPN_H_ */
