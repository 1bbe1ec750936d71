/*
 * The emulation's cost per IVP intrinsic (vdsp bench ckernel): `ivp_bench N` calls each intrinsic
 * of the stock point-cloud kernels N times in a loop and prints "NAME ns_per_call", one line each.
 * Compiled as the kernels are (-O2 and the x86-64 level's flags, against <xtensa/tie/xt_ivpn.h>, with
 * the kernel runtime; the loop a function of its own, as the stock kernels' hot loops). CPU time of
 * the thread.
 * Each call's result feeds the next (or a sink) through a compiler barrier, so no call is
 * optimised away; the "(loop)" line is the loop and the barrier alone, to subtract.
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xtensa/tie/xt_ivpn.h>

#define KEEP(v) __asm__ __volatile__("" : : "g"(&(v)) : "memory") /* v is in memory, read and written */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); /* CPU time: what other work on the host does not inflate */
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define BENCH(name, body)                                  \
  do {                                                     \
    double t0 = now();                                     \
    for (long i = 0; i < n; i++) {                         \
      body;                                                \
    }                                                      \
    printf("%s %.3f\n", name, (now() - t0) * 1e9 / (double)n); \
  } while (0)

static float mem[16384];
static int8_t bytes[65536];
static int32_t words[16384];

/* a function of its own, as the stock kernels' hot loops are (VDSP_IVP_HOST_CLONES) */
VDSP_IVP_HOST_CLONES static int run(long n) {
  for (int i = 0; i < 16384; i++) mem[i] = (float)i * 0.25f, words[i] = i;
  for (int i = 0; i < 65536; i++) bytes[i] = (int8_t)i;
  xb_vecN_2xf32 f = IVP_SUBN_2XF32(1.5f, 0.0f), g = IVP_SUBN_2XF32(1.0000001f, 0.0f);
  xb_vecN_2x32v a = IVP_ADDN_2X32(3, 0), b = IVP_ADDN_2X32(1, 0);
  xb_vecN_2x32Uv off;
  xb_vecNx16U off16;
  for (int i = 0; i < 16; i++) off.s[i] = (uint32_t)(4 * (5 * i + 1));
  for (int i = 0; i < 32; i++) off16.s[i] = (uint16_t)(4 * i);
  vboolN_2 t = IVP_ULEN_2XF32(f, g);
  xb_vec2Nx8 v8 = IVP_GATHERD2NX8_L(IVP_GATHERANX8S(bytes, off16));
  static int8_t out[64 * 1024 + 64];

  BENCH("(loop)", KEEP(f));
  BENCH("IVP_GATHERAN_2XF32+IVP_GATHERDN_2XF32", f = IVP_GATHERDN_2XF32(IVP_GATHERAN_2XF32(mem, off)); KEEP(f));
  BENCH("IVP_GATHERAN_2X32+IVP_GATHERDN_2X32", a = IVP_GATHERDN_2X32(IVP_GATHERAN_2X32(words, off)); KEEP(a));
  BENCH("IVP_SUBN_2XF32", f = IVP_SUBN_2XF32(f, g); KEEP(f));
  BENCH("IVP_DIVN_2XF32", f = IVP_DIVN_2XF32(f, g); KEEP(f));
  BENCH("IVP_FIRINTN_2XF32", f = IVP_FIRINTN_2XF32(f); KEEP(f));
  BENCH("IVP_TRUNCN_2XF32", a = IVP_TRUNCN_2XF32(f, 0); KEEP(a));
  BENCH("IVP_MAXN_2X32", a = IVP_MAXN_2X32(a, b); KEEP(a));
  BENCH("IVP_MINN_2X32", a = IVP_MINN_2X32(a, b); KEEP(a));
  BENCH("IVP_SLLN_2X32", a = IVP_SLLN_2X32(a, 1); KEEP(a));
  BENCH("IVP_ADDN_2X32", a = IVP_ADDN_2X32(a, b); KEEP(a));
  BENCH("IVP_ULEN_2XF32", t = IVP_ULEN_2XF32(f, g); KEEP(t));
  BENCH("IVP_ORBN_2", t = IVP_ORBN_2(t, t); KEEP(t));
  BENCH("IVP_MOVN_2X32T", a = IVP_MOVN_2X32T(-1, a, t); KEEP(a));
  BENCH("IVP_SELN_2X32I", a = IVP_SELN_2X32I(a, b, IVP_SELI_8B_INTERLEAVE_1_EVEN); KEEP(a));
  BENCH("IVP_SELN_2X32", a = IVP_SELN_2X32(a, b, b); KEEP(a));
  BENCH("IVP_DSELN_2X32I", { IVP_DSELN_2X32I(b, a, b, a, IVP_DSELI_8B_DEINTERLEAVE_1); KEEP(a); KEEP(b); });
  BENCH("IVP_SCATTERN_2X32", IVP_SCATTERN_2X32(a, words, off); KEEP(words));
  BENCH("IVP_GATHERANX8S+IVP_GATHERD2NX8_L", v8 = IVP_GATHERD2NX8_L(IVP_GATHERANX8S(bytes, off16)); KEEP(v8));
  BENCH("IVP_GATHERD2NX8_H", { xb_gsr gs = IVP_GATHERANX8S(bytes, off16); KEEP(gs); IVP_GATHERD2NX8_H(v8, gs); KEEP(v8); });
  {
    valign al = IVP_ZALIGN();
    xb_vec2Nx8 *p = (xb_vec2Nx8 *)(out + 1);
    BENCH("IVP_SA2NX8_IP", {
      if ((i & 1023) == 0) p = (xb_vec2Nx8 *)(out + 1);
      IVP_SA2NX8_IP(v8, al, p);
      KEEP(p);
    });
    IVP_SAPOS2NX8U_FP(al, p);
  }
  {
    xb_vecN_2x32v *q = (xb_vecN_2x32v *)(out + 64 - (uintptr_t)out % 64); /* 64-byte aligned */
    xb_vecN_2x32v *const first = q;
    BENCH("IVP_SVN_2X32_IP", {
      if ((i & 1023) == 0) q = first;
      IVP_SVN_2X32_IP(a, q, 64);
      KEEP(q);
    });
    xb_vecN_2x32v const *l = first;
    BENCH("IVP_LVN_2X32_IP", {
      if ((i & 1023) == 0) l = first;
      IVP_LVN_2X32_IP(a, l, 64);
      KEEP(a);
      KEEP(l);
    });
  }
  return 0;
}

int main(int argc, char **argv) {
  long const n = argc > 1 ? atol(argv[1]) : 1000000;
  return n > 0 ? run(n) : 2;
}
