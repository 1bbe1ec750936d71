/*
 * Test driver of <xtensa/tie/xt_ivpn.h> (tests/dsp/test_ivp.py): `ivp_driver OP` reads OP's operands
 * from stdin as raw little-endian bytes, applies the one intrinsic under test and writes its
 * result to stdout as raw bytes; the test compares them with a numpy reference of its own.
 * Compiled as C11 and as C++17, -Wall -Wextra -Werror, linked with the kernel runtime.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xtensa/tie/xt_ivpn.h>

#define WINDOW 65536

static unsigned char in[4 * WINDOW];
static size_t in_len, in_at;

/* the next n bytes of the input (exits when the input is shorter) */
static void take(void *dst, size_t n) {
  if (in_at + n > in_len) {
    fprintf(stderr, "ivp_driver: input too short\n");
    exit(2);
  }
  memcpy(dst, in + in_at, n);
  in_at += n;
}

static void give(void const *src, size_t n) { fwrite(src, 1, n, stdout); }

/* the "sv" and "lv" ops' operands: at, count (0..63, 0..60) from the input; a 64-byte aligned
 * space (as TCM) of 64 * 62 bytes, or NULL for operands out of range */
static unsigned char *aligned_space(int32_t *at, int32_t *count) {
  static unsigned char raw[64 * 63];
  take(at, 4);
  take(count, 4);
  if (*at < 0 || *at > 63 || *count < 0 || *count > 60) return NULL;
  return raw + (64 - (uintptr_t)raw % 64) % 64;
}

/* the "selk" op's selectors (tests/dsp/test_ivp.py has the same table): words of lo only, of hi
 * only, of all four halves with the bits above the low 5 set in some lanes, and a merge of hi's
 * words into lo's own lanes (as stage 1's selections are) */
static const int32_t KNOWN[4][16] = {
    {3, 0, 15, 7, 7, 1, 2, 14, 8, 9, 10, 4, 5, 6, 11, 12},
    {16, 31, 17, 30, 18, 29, 19, 28, 20, 27, 21, 26, 22, 25, 23, 24},
    {31, 0, 16, 15, 40, 65, -1, 1 << 20, 9, 25, 8, 24, 3, 19, 12, 28},
    {0, 1, 18, 3, 4, 21, 6, 7, 24, 9, 10, 27, 12, 13, 30, 15}};

int main(int argc, char **argv) {
  static unsigned char mem[WINDOW + 64];
  if (argc != 2) return 2;
  in_len = fread(in, 1, sizeof in, stdin);
  char const *op = argv[1];
  if (!strcmp(op, "gather_f32")) { /* mem, offsets -> 16 floats */
    xb_vecN_2x32Uv off;
    take(mem, WINDOW);
    take(off.s, 64);
    xb_gsr g = IVP_GATHERAN_2XF32((float32_t const *)mem, off);
    xb_vecN_2xf32 v = IVP_GATHERDN_2XF32(g);
    give(v.s, 64);
  } else if (!strcmp(op, "gather_i32")) { /* mem, offsets -> 16 int32 */
    xb_vecN_2x32Uv off;
    take(mem, WINDOW);
    take(off.s, 64);
    xb_vecN_2x32v v = IVP_GATHERDN_2X32(IVP_GATHERAN_2X32((int32_t const *)mem, off));
    give(v.s, 64);
  } else if (!strcmp(op, "gather8")) { /* mem, a vector, 32 u16 offsets -> _L of the gather, _H into the vector */
    xb_vecNx16U off;
    xb_vec2Nx8 v;
    take(mem, WINDOW);
    take(v.s, 64);
    take(off.s, 64);
    xb_gsr g = IVP_GATHERANX8S((int8_t const *)mem, off);
    xb_vec2Nx8 low = IVP_GATHERD2NX8_L(g);
    IVP_GATHERD2NX8_H(v, g);
    give(low.s, 64);
    give(v.s, 64);
  } else if (!strcmp(op, "scatter")) { /* mem, 16 i32 values, offsets -> mem */
    xb_vecN_2x32v v;
    xb_vecN_2x32Uv off;
    take(mem, WINDOW);
    take(v.s, 64);
    take(off.s, 64);
    xb_vecN_2x32v *base = (xb_vecN_2x32v *)mem;
    IVP_SCATTERN_2X32(v, base, off);
    IVP_SCATTERW();
    give(mem, WINDOW);
  } else if (!strcmp(op, "sub") || !strcmp(op, "div") || !strcmp(op, "ule")) { /* a, b floats */
    xb_vecN_2xf32 a, b;
    take(a.s, 64);
    take(b.s, 64);
    if (op[0] == 's') {
      xb_vecN_2xf32 r = IVP_SUBN_2XF32(a, b);
      give(r.s, 64);
    } else if (op[0] == 'd') {
      xb_vecN_2xf32 r = IVP_DIVN_2XF32(a, b);
      give(r.s, 64);
    } else {
      vboolN_2 r = IVP_ULEN_2XF32(a, b);
      give(r.b, 16);
    }
  } else if (!strcmp(op, "broadcast")) { /* a floats, scalar float s, scalar i32 k -> a - s, a / s, a <= s, k + 0 */
    xb_vecN_2xf32 a;
    float s;
    int32_t k;
    take(a.s, 64);
    take(&s, 4);
    take(&k, 4);
    xb_vecN_2xf32 d = IVP_SUBN_2XF32(a, s), q = IVP_DIVN_2XF32(a, s);
    vboolN_2 le = IVP_ULEN_2XF32(a, s);
    xb_vecN_2x32v kk = IVP_ADDN_2X32(k, 0);
    give(d.s, 64);
    give(q.s, 64);
    give(le.b, 16);
    give(kk.s, 64);
  } else if (!strcmp(op, "trunc")) { /* a floats, q -> i32 */
    xb_vecN_2xf32 a;
    int32_t q;
    take(a.s, 64);
    take(&q, 4);
    xb_vecN_2x32v r = IVP_TRUNCN_2XF32(a, q);
    give(r.s, 64);
  } else if (!strcmp(op, "firint")) { /* a floats -> a rounded to integral floats */
    xb_vecN_2xf32 a;
    take(a.s, 64);
    xb_vecN_2xf32 r = IVP_FIRINTN_2XF32(a);
    give(r.s, 64);
  } else if (!strcmp(op, "sll") || !strcmp(op, "add") || !strcmp(op, "max") || !strcmp(op, "min")) { /* a, b i32 */
    xb_vecN_2x32v a, b;
    take(a.s, 64);
    take(b.s, 64);
    xb_vecN_2x32v r = op[0] == 's'   ? IVP_SLLN_2X32(a, b)
                      : op[0] == 'a' ? IVP_ADDN_2X32(a, b)
                      : op[1] == 'a' ? IVP_MAXN_2X32(a, b)
                                     : IVP_MINN_2X32(a, b);
    give(r.s, 64);
  } else if (!strcmp(op, "orb")) { /* a, b predicates (16 bytes of 0/1) */
    vboolN_2 a, b;
    take(a.b, 16);
    take(b.b, 16);
    vboolN_2 r = IVP_ORBN_2(a, b);
    give(r.b, 16);
  } else if (!strcmp(op, "movt")) { /* a, b i32, t predicates */
    xb_vecN_2x32v a, b;
    vboolN_2 t;
    take(a.s, 64);
    take(b.s, 64);
    take(t.b, 16);
    xb_vecN_2x32v r = IVP_MOVN_2X32T(a, b, t), m = IVP_MOVN_2X32T(-1, b, t);
    give(r.s, 64);
    give(m.s, 64);
  } else if (!strcmp(op, "sel")) { /* hi, lo i32 -> the four selectors' results */
    xb_vecN_2x32v hi, lo, r;
    take(hi.s, 64);
    take(lo.s, 64);
    r = IVP_SELN_2X32I(hi, lo, IVP_SELI_8B_INTERLEAVE_1_EVEN);
    give(r.s, 64);
    r = IVP_SELN_2X32I(hi, lo, IVP_SELI_8B_INTERLEAVE_1_ODD);
    give(r.s, 64);
    r = IVP_SELN_2X32I(hi, lo, IVP_SELI_INTERLEAVE_1_EVEN);
    give(r.s, 64);
    r = IVP_SELN_2X32I(hi, lo, IVP_SELI_INTERLEAVE_1_ODD);
    give(r.s, 64);
  } else if (!strcmp(op, "selv")) { /* hi, lo, sel i32 -> IVP_SELN_2X32(hi, lo, sel) */
    xb_vecN_2x32v hi, lo, sel;
    take(hi.s, 64);
    take(lo.s, 64);
    take(sel.s, 64);
    xb_vecN_2x32v r = IVP_SELN_2X32(hi, lo, sel);
    give(r.s, 64);
  } else if (!strcmp(op, "selk")) { /* hi, lo i32 -> IVP_SELN_2X32 by each of KNOWN's selectors, constants
                                      * the compiler sees (the emulation's own path for those) */
    xb_vecN_2x32v hi, lo, sel, r;
    take(hi.s, 64);
    take(lo.s, 64);
    memcpy(sel.s, KNOWN[0], 64), r = IVP_SELN_2X32(hi, lo, sel), give(r.s, 64);
    memcpy(sel.s, KNOWN[1], 64), r = IVP_SELN_2X32(hi, lo, sel), give(r.s, 64);
    memcpy(sel.s, KNOWN[2], 64), r = IVP_SELN_2X32(hi, lo, sel), give(r.s, 64);
    memcpy(sel.s, KNOWN[3], 64), r = IVP_SELN_2X32(hi, lo, sel), give(r.s, 64);
  } else if (!strcmp(op, "sel_bad")) {
    xb_vecN_2x32v z = IVP_ADDN_2X32(0, 0), r = IVP_SELN_2X32I(z, z, 0x7f);
    give(r.s, 64);
  } else if (!strcmp(op, "store")) { /* at, count, flush, count vectors -> the 64 * (count + 2) bytes */
    int32_t at, count, flush;
    static unsigned char raw[64 * 63];
    unsigned char *space = raw + (64 - (uintptr_t)raw % 64) % 64; /* 64-byte aligned, as TCM */
    take(&at, 4);
    take(&count, 4);
    take(&flush, 4);
    if (at < 0 || at > 63 || count < 0 || count > 60) return 2;
    memset(space, 0xee, 64 * 62);
    xb_vec2Nx8 *p = (xb_vec2Nx8 *)(space + at);
    valign a = IVP_ZALIGN();
    for (int32_t i = 0; i < count; i++) {
      xb_vec2Nx8 v;
      take(v.s, 64);
      IVP_SA2NX8_IP(v, a, p);
    }
    if (flush) IVP_SAPOS2NX8U_FP(a, p);
    if ((unsigned char *)p != space + at + 64 * count) return 3; /* the pointer advanced by 64 a store */
    give(space, 64 * ((size_t)count + 2));
  } else if (!strcmp(op, "sv")) { /* at, count, count i32 vectors -> the 64 * (count + 2) bytes */
    int32_t at, count;
    unsigned char *space = aligned_space(&at, &count);
    if (!space) return 2;
    memset(space, 0xee, 64 * 62);
    xb_vecN_2x32v *p = (xb_vecN_2x32v *)(space + at);
    for (int32_t i = 0; i < count; i++) {
      xb_vecN_2x32v v;
      take(v.s, 64);
      IVP_SVN_2X32_IP(v, p, 64);
    }
    if ((unsigned char *)p != space + at + 64 * count) return 3; /* the pointer advanced by 64 a store */
    give(space, 64 * ((size_t)count + 2));
  } else if (!strcmp(op, "dsel")) { /* hi, lo i32 -> hi_out, lo_out of 8B_DEINTERLEAVE_1 */
    xb_vecN_2x32v hi, lo, ho, lo_out;
    take(hi.s, 64);
    take(lo.s, 64);
    IVP_DSELN_2X32I(ho, lo_out, hi, lo, IVP_DSELI_8B_DEINTERLEAVE_1);
    give(ho.s, 64);
    give(lo_out.s, 64);
  } else if (!strcmp(op, "dsel_bad")) {
    xb_vecN_2x32v z = IVP_ADDN_2X32(0, 0), a, b;
    IVP_DSELN_2X32I(a, b, z, z, 0x7f);
    give(a.s, 64);
  } else if (!strcmp(op, "lv")) { /* at, count, 64 * (count + 1) bytes -> the count vectors loaded */
    int32_t at, count;
    unsigned char *space = aligned_space(&at, &count);
    if (!space) return 2;
    take(space, 64 * ((size_t)count + 1));
    xb_vecN_2x32v const *p = (xb_vecN_2x32v const *)(space + at);
    for (int32_t i = 0; i < count; i++) {
      xb_vecN_2x32v v;
      IVP_LVN_2X32_IP(v, p, 64);
      give(v.s, 64);
    }
    if ((unsigned char const *)p != space + at + 64 * count) return 3; /* the pointer advanced by 64 a load */
  } else {
    fprintf(stderr, "ivp_driver: no op %s\n", op);
    return 2;
  }
  return 0;
}
