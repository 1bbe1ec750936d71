/*
 * The runtime of vdsp_kernel.h, linked into every image's kernel library with the kernels.
 *
 * Invariants:
 * - one task at a time per process (the firmware's compute thread): the state below is the
 *   running task's, reset by vdsp_rt_run before and after the kernel;
 * - a trap (a broken board rule) records its kind and message and siglongjmps back into
 *   vdsp_rt_run, which returns the kind: the kernel's code after the trapping call never runs;
 * - a transfer's bytes move only when it is waited for (or when the kernel returns): until
 *   then its destination holds what it held before (stale bytes, as on the board);
 * - in strict mode every allocation starts on a page of its own and the pages of a pending
 *   transfer's TCM destination are PROT_NONE, so touching them before the wait faults; the
 *   SIGSEGV handler turns a fault there into a trap naming the allocation, and hands any
 *   other fault to the handler that was installed before (a crash of the firmware);
 * - guard pages (vdsp_rt_guard): while a kernel runs, the TCM outside its allocations is
 *   inaccessible to it (PROT_NONE, or a bank's protection key not allowed: below), and on
 *   request its inputs' pages are PROT_READ (unless one shares a page with an output), restored
 *   when it returns or traps. Outside strict mode a bank's allocations are opened lazily, all
 *   those made so far at once: when they reach the extent the last task's had, before the
 *   runtime performs a transfer, or when the kernel first faults in an allocated page not yet
 *   opened (the fault is then retried); a kernel cannot tell this from pages opened at the
 *   allocation. Where the host has memory protection keys, a bank's pages opened stay
 *   read-write between tasks under the bank's key, which the thread allows only while they are
 *   exactly the task's allocations (pkey_set: no system call); else they are closed after each
 *   task (guard_disarm). The firmware maps every DDR segment with a
 *   PROT_NONE page after it (dsp_side.ddr_resolver). A fault within a page of a task's buffer
 *   or in a TCM bank is a trap naming the kernel and the nearest buffer (VDSP_RT_MEMORY_FAULT);
 * - bank conflicts: at each wait for a transfer whose TCM side is allocation B of bank b, a
 *   transfer still in flight whose TCM side is another allocation A of bank b is a conflict
 *   (the kernel computes on B while the IDMA moves A through the same bank): counted per
 *   task, the first one named (vdsp_rt_bank_conflicts).
 */
#define _GNU_SOURCE
#include "vdsp_kernel.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#define VDSP_RT_MAX_DMA 256 /* transfers issued and not yet performed (a ring: transfer id is at (id - 1) % this) */
#define VDSP_RT_PAGE 4096u
/* Backing of a bank: room for the budget with every allocation page-aligned (strict mode). */
#define VDSP_RT_BANK_SPAN (VDSP_TCM_BANK_BYTES + VDSP_TCM_MAX_ALLOCS * VDSP_RT_PAGE)

enum { VDSP_RT_OK = 0, VDSP_RT_TCM_OVER_BUDGET = 1, VDSP_RT_DMA_NOT_WAITED = 2, VDSP_RT_BAD_CALL = 3,
       VDSP_RT_MEMORY_FAULT = 4 };

typedef void (*vdsp_rt_log_fn)(int level, char const *file, int line, char const *message);

struct alloc {
  uint8_t *start;
  uint32_t bytes;
  char name[48];
};

struct bank {
  uint8_t *base;          /* VDSP_RT_BANK_SPAN bytes, mapped once, kept between tasks (TCM keeps its bytes);
                             bank i + 1's span follows bank i's (one mapping) */
  uint32_t used;          /* bytes of the budget held (requested sizes, rounded to VDSP_TCM_ALIGN) */
  uint32_t next;          /* offset of the next allocation in base */
  /* guarded TCM outside strict mode (guard pages, below): */
  uint32_t rw;            /* [base, base + rw) is PROT_READ | PROT_WRITE (a page multiple), the rest PROT_NONE */
  int keyed;              /* those pages carry the bank's protection key (kept between tasks), else key 0 */
  int opened;             /* the running thread has the bank's key allowed (this task: rw == page_up(next)) */
  uint32_t extent;        /* page_up(next) when the last guarded task ended */
  int count;
  struct alloc allocs[VDSP_TCM_MAX_ALLOCS];
};

struct dma {
  uint8_t *dst;
  uint8_t const *src;
  uint32_t row_bytes, rows, dst_pitch, src_pitch;
  struct alloc const *tcm_dst; /* the allocation written, NULL for a transfer into DDR */
  struct alloc const *tcm;     /* its TCM side: the allocation written or read */
};

static struct {
  vdsp_task_t const *task;
  int strict;
  struct bank banks[VDSP_TCM_BANKS];
  struct dma queue[VDSP_RT_MAX_DMA];
  int issued, done;       /* transfers issued and performed in this task; ids are 1..issued */
  int trap;
  char message[512];
  sigjmp_buf env;
  struct sigaction previous;
  vdsp_rt_log_fn log;
  int results;            /* names set by vdsp_result in this task */
  struct {
    char name[VDSP_RESULT_NAME_MAX + 1];
    int64_t value;
  } result[VDSP_MAX_RESULTS];
} rt;

static void trap(int kind, char const *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
static void trap(int kind, char const *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(rt.message, sizeof rt.message, fmt, ap);
  va_end(ap);
  rt.trap = kind;
  siglongjmp(rt.env, 1);
}

static char const *kernel_name(void) { return rt.task && rt.task->kernel ? rt.task->kernel : "?"; }

/* the sections below the IDMA one (guard pages, bank conflicts) */
static void guard_alloc(struct alloc const *a);
static void bank_conflict_check(int id);

/* --- TCM ---------------------------------------------------------------------------------- */
static struct bank *bank_of(int bank) {
  if (!rt.task) trap(VDSP_RT_BAD_CALL, "TCM used outside a task");
  if (bank < 0 || bank >= VDSP_TCM_BANKS)
    trap(VDSP_RT_BAD_CALL, "kernel %s: TCM bank %d does not exist (banks 0..%d)", kernel_name(), bank,
         VDSP_TCM_BANKS - 1);
  return &rt.banks[bank];
}

void *vdsp_tcm_alloc(int bank, uint32_t bytes, char const *name) {
  struct bank *b = bank_of(bank);
  uint64_t held = ((uint64_t)bytes + VDSP_TCM_ALIGN - 1) / VDSP_TCM_ALIGN * VDSP_TCM_ALIGN;
  if (b->used + held > VDSP_TCM_OPERATOR_BYTES)
    trap(VDSP_RT_TCM_OVER_BUDGET,
         "kernel %s: TCM bank %d: allocating %u bytes for %s takes %llu, %u of the operator's %u bytes are free",
         kernel_name(), bank, bytes, name ? name : "?", (unsigned long long)held,
         VDSP_TCM_OPERATOR_BYTES - b->used, VDSP_TCM_OPERATOR_BYTES);
  if (b->count == VDSP_TCM_MAX_ALLOCS)
    trap(VDSP_RT_TCM_OVER_BUDGET, "kernel %s: TCM bank %d: more than %d allocations", kernel_name(), bank,
         VDSP_TCM_MAX_ALLOCS);
  uint32_t align = rt.strict ? VDSP_RT_PAGE : VDSP_TCM_ALIGN;
  uint32_t at = (b->next + align - 1) / align * align;
  struct alloc *a = &b->allocs[b->count++];
  a->start = b->base + at;
  a->bytes = bytes;
  snprintf(a->name, sizeof a->name, "%s", name ? name : "?");
  b->next = at + (uint32_t)held;
  b->used += (uint32_t)held;
  guard_alloc(a);
  return a->start;
}

TileBuffer vdsp_tcm_tile(int bank, uint32_t bytes, char const *name) {
  TileBuffer t;
  t.tile_buffer = vdsp_tcm_alloc(bank, bytes, name);
  t.data_size = bytes;
  return t;
}

uint32_t vdsp_tcm_free(int bank) { return VDSP_TCM_OPERATOR_BYTES - bank_of(bank)->used; }

static struct alloc const *tcm_alloc_at(uint8_t const *p, uint64_t extent) {
  for (int i = 0; i < VDSP_TCM_BANKS; i++)
    for (int j = 0; j < rt.banks[i].count; j++) {
      struct alloc const *a = &rt.banks[i].allocs[j];
      if (p >= a->start && p < a->start + a->bytes)
        return (uint64_t)(p - a->start) + extent <= a->bytes ? a : NULL;
    }
  return NULL;
}

static int in_tcm(uint8_t const *p) {
  for (int i = 0; i < VDSP_TCM_BANKS; i++)
    if (p >= rt.banks[i].base && p < rt.banks[i].base + VDSP_RT_BANK_SPAN) return 1;
  return 0;
}

#include "vdsp_board.c" /* the board-time counters: vdsp_board_* */

static int in_ddr(uint8_t const *p, uint64_t extent, int writable) {
  int n = writable ? rt.task->num_outputs : rt.task->num_inputs + rt.task->num_outputs;
  for (int i = 0; i < n; i++) {
    TileBuffer const *t = i < rt.task->num_outputs ? &rt.task->outputs[i] : &rt.task->inputs[i - rt.task->num_outputs];
    uint8_t const *s = (uint8_t const *)t->tile_buffer;
    if (p >= s && (uint64_t)(p - s) + extent <= t->data_size) return 1;
  }
  return 0;
}

/* --- IDMA --------------------------------------------------------------------------------- */
static void set_guard(int prot_none) {
  for (int i = rt.done; i < rt.issued; i++) {
    struct dma const *d = &rt.queue[i % VDSP_RT_MAX_DMA];
    if (!d->tcm_dst) continue;
    uintptr_t lo = (uintptr_t)d->tcm_dst->start & ~(uintptr_t)(VDSP_RT_PAGE - 1);
    uintptr_t hi = ((uintptr_t)d->tcm_dst->start + d->tcm_dst->bytes + VDSP_RT_PAGE - 1) & ~(uintptr_t)(VDSP_RT_PAGE - 1);
    mprotect((void *)lo, hi - lo, prot_none ? PROT_NONE : PROT_READ | PROT_WRITE);
  }
}

/* How a transfer's rows move on the host. On x86-64 by the vector copy below. Elsewhere (or
 * built with -DVDSP_RT_NO_VECTOR_COPY) by memmove: performing a 2-D transfer of short rows (a
 * drain into rows of a large output, rows far apart), the destination lines of the row
 * VDSP_RT_ROWS_AHEAD on are prefetched for writing while this row is copied: the host's own
 * prefetcher does not follow rows that far apart (a prefetch never faults and changes no byte;
 * CenterPoint's stage 2, whose drains are 512-byte rows 40 000 bytes apart, took about a tenth
 * less on a Xeon host); and a row into DDR is copied in pieces of at most VDSP_RT_PIECE bytes
 * (the same bytes, in order: the pieces of one row do not overlap): above a size glibc's
 * memmove switches to `rep movsb`, which on the development VM writes lines not in the cache
 * about a quarter slower than its vector loop does (a replay of PointPillars' zeros, 2.8 MB in
 * 13 kB rows: 0.51 ms in whole rows, 0.40 in 4 kB pieces). Everywhere, a transfer into DDR
 * that repeats one row of one byte (source pitch 0) into contiguous rows is one memset of them:
 * the same bytes (the zeros of the point-cloud stage 2: PointPillars' takes about 8 % less,
 * CenterPoint's 3 %; rows apart stay copies: 4 kB memsets 40 000 bytes apart were slower than
 * the prefetched copies). */
#define VDSP_RT_ROWS_AHEAD 2
#define VDSP_RT_PREFETCH_ROW 4096u /* rows up to this long; longer ones stream by themselves */
#define VDSP_RT_PIECE 4096u
/* A prefetch of the line at p for writing: `prefetchw` on x86-64 (the line fetched exclusive,
 * ready for the store; a NOP on a CPU without it), where __builtin_prefetch(p, 1, 3) is a
 * prefetcht0 unless the compiler targets such a CPU. */
static inline void prefetch_write(void const *p) {
#if defined(__x86_64__)
  __asm__ volatile("prefetchw %0" : : "m"(*(char const *)p));
#else
  __builtin_prefetch(p, 1, 3);
#endif
}

/* The byte each of the n bytes at p holds, else -1. */
static int repeated_byte(uint8_t const *p, uint32_t n) {
  return n && (n == 1 || (p[0] == p[n - 1] && !memcmp(p, p + 1, n - 1))) ? p[0] : -1;
}

/* On x86-64 a transfer's row moves by a loop of the build's widest vectors (64-byte lines: one
 * AVX-512 load and store, two AVX2 or four SSE2 ones): into TCM by plain
 * stores (TCM's lines stay in the cache, as the kernel reads them next), into DDR by
 * non-temporal stores, as the board's engine writes DDR: around the CPU's caches, the
 * destination's lines not read first (fenced at the end of each wait, before anyone reads
 * them). Against glibc's memmove (`rep movsb` at these sizes on the development VM), each timed
 * on its second task in a row: the point clouds' stage 1 and CenterPoint's stage 2 took 3-8 %
 * less, PointPillars' stage 2 the same (benchmarks README). Elsewhere, or built with
 * -DVDSP_RT_NO_VECTOR_COPY, rows move by memmove (above). */
#if defined(__x86_64__) && defined(__SSE2__) && !defined(VDSP_RT_NO_VECTOR_COPY)
#if defined(__AVX__)
#include <immintrin.h>
#else
#include <emmintrin.h> /* SSE2's alone: what <immintrin.h> adds is read, not used (<xtensa/tie/xt_ivpn.h>) */
#endif
#define VDSP_RT_VECTOR_COPY 1
#if defined(__AVX512F__)
typedef __m512i rt_vec;
#define RT_LOAD(p) _mm512_loadu_si512((void const *)(p))
#define RT_STORE(p, v) _mm512_storeu_si512((void *)(p), v)
#define RT_STREAM(p, v) _mm512_stream_si512((void *)(p), v)
#elif defined(__AVX__)
typedef __m256i rt_vec;
#define RT_LOAD(p) _mm256_loadu_si256((__m256i const *)(p))
#define RT_STORE(p, v) _mm256_storeu_si256((__m256i *)(p), v)
#define RT_STREAM(p, v) _mm256_stream_si256((__m256i *)(p), v)
#else
typedef __m128i rt_vec;
#define RT_LOAD(p) _mm_loadu_si128((__m128i const *)(p))
#define RT_STORE(p, v) _mm_storeu_si128((__m128i *)(p), v)
#define RT_STREAM(p, v) _mm_stream_si128((__m128i *)(p), v)
#endif
/* one 64-byte line (`stream`: `to` 64-byte aligned) */
__attribute__((always_inline)) static inline void copy_line(uint8_t *to, uint8_t const *from, int stream) {
  for (unsigned k = 0; k < 64u; k += (unsigned)sizeof(rt_vec)) {
    rt_vec const v = RT_LOAD(from + k);
    if (stream)
      RT_STREAM(to + k, v);
    else
      RT_STORE(to + k, v);
  }
}

/* n bytes from `from` to `to` (no overlap: one side is TCM, the other DDR); `stream`: the whole
 * 64-byte lines of `to` by non-temporal stores (the caller fences: rt_copy_fence). */
__attribute__((always_inline)) static inline void copy_lines(uint8_t *to, uint8_t const *from, uint32_t n, int stream) {
  if (stream) { /* non-temporal stores: to 64-byte boundaries */
    uint32_t const head = (uint32_t)((64u - ((uintptr_t)to & 63u)) & 63u);
    if (n < head + 64u) {
      memcpy(to, from, n);
      return;
    }
    memcpy(to, from, head);
    to += head, from += head, n -= head;
  }
  uint32_t k = 0;
  for (; k + 64u <= n; k += 64u) copy_line(to + k, from + k, stream);
  memcpy(to + k, from + k, n - k);
}
static void copy_row(uint8_t *to, uint8_t const *from, uint32_t n, int into_tcm) {
  if (into_tcm)
    copy_lines(to, from, n, 0);
  else
    copy_lines(to, from, n, 1);
}
static void rt_copy_fence(void) { _mm_sfence(); }
#else
#define VDSP_RT_VECTOR_COPY 0
static void copy_row(uint8_t *to, uint8_t const *from, uint32_t n, int into_tcm) {
  (void)to, (void)from, (void)n, (void)into_tcm;
}
static void rt_copy_fence(void) {}
#endif

/* The IDMA engine's stream (xt_ivpn.h, vdsp_ivp_stream_line): the source of a transfer into TCM
 * not yet performed. A transfer issued while the engine is idle streams at once; after a wait,
 * the first such transfer still pending (from its start: lines already in the cache cost the
 * host little), else none. Transfers whose source rows are apart are not streamed. */
extern uintptr_t vdsp_ivp_stream[2];
static int stream(struct dma const *d) {
  if (!d->tcm_dst || (d->rows > 1 && d->src_pitch != d->row_bytes)) return 0;
  vdsp_ivp_stream[0] = (uintptr_t)d->src & ~(uintptr_t)63u;
  vdsp_ivp_stream[1] = (uintptr_t)d->src + (uintptr_t)d->row_bytes * d->rows;
  return 1;
}
static void stream_next(void) {
  for (int i = rt.done; i < rt.issued; i++)
    if (stream(&rt.queue[i % VDSP_RT_MAX_DMA])) return;
  vdsp_ivp_stream[1] = vdsp_ivp_stream[0]; /* idle */
}

static void guard_open_all(void);
static void perform_until(int id) {
  vdsp_board_dma_waited(id);
  if (rt.strict) set_guard(0);
  guard_open_all(); /* the runtime's copies touch only opened pages */
  for (; rt.done < id; rt.done++) {
    struct dma const *d = &rt.queue[rt.done % VDSP_RT_MAX_DMA];
    uint32_t const piece = d->tcm_dst ? d->row_bytes : VDSP_RT_PIECE;
    if (d->src_pitch == 0 && d->rows > 1 && d->dst_pitch == d->row_bytes && !d->tcm_dst) {
      int const fill = repeated_byte(d->src, d->row_bytes); /* one row of one byte, into contiguous rows */
      if (fill >= 0) {
        memset(d->dst, fill, (uint64_t)d->rows * d->row_bytes);
        continue;
      }
    }
    for (uint32_t r = 0; r < d->rows; r++) {
      uint8_t *to = d->dst + (uint64_t)r * d->dst_pitch;
      uint8_t const *from = d->src + (uint64_t)r * d->src_pitch; /* src_pitch 0: the one row again */
      if (VDSP_RT_VECTOR_COPY) {
        copy_row(to, from, d->row_bytes, d->tcm_dst != NULL);
        continue;
      }
      if (r + VDSP_RT_ROWS_AHEAD < d->rows && d->row_bytes <= VDSP_RT_PREFETCH_ROW)
        for (uint32_t o = 0; o < d->row_bytes; o += 64)
          prefetch_write(to + VDSP_RT_ROWS_AHEAD * (uint64_t)d->dst_pitch + o);
      for (uint32_t o = 0; o < d->row_bytes; o += piece)
        memmove(to + o, from + o, d->row_bytes - o < piece ? d->row_bytes - o : piece);
    }
  }
  rt_copy_fence();
  stream_next();
  if (rt.strict) set_guard(1);
}

vdsp_dma_t vdsp_idma_copy_2d(void *dst, void const *src, uint32_t row_bytes, uint32_t rows,
                             uint32_t dst_pitch, uint32_t src_pitch) {
  if (!rt.task) trap(VDSP_RT_BAD_CALL, "IDMA used outside a task");
  uint8_t *d = (uint8_t *)dst;
  uint8_t const *s = (uint8_t const *)src;
  if (rows > 1 && (dst_pitch < row_bytes || (src_pitch < row_bytes && src_pitch != 0)))
    trap(VDSP_RT_BAD_CALL, "kernel %s: IDMA 2-D copy with a pitch (%u, %u) below its row of %u bytes (a source "
         "pitch of 0 repeats one row)", kernel_name(), dst_pitch, src_pitch, row_bytes);
  uint64_t dext = rows ? (uint64_t)(rows - 1) * dst_pitch + row_bytes : 0;
  uint64_t sext = rows ? (uint64_t)(rows - 1) * src_pitch + row_bytes : 0;
  struct alloc const *tcm_dst = NULL, *tcm_side = NULL;
  if (in_tcm(d)) {
    tcm_dst = tcm_alloc_at(d, dext);
    if (!tcm_dst || !in_ddr(s, sext, 0))
      trap(VDSP_RT_BAD_CALL, "kernel %s: IDMA into TCM needs its destination inside one TCM allocation and its "
           "source inside a buffer of the task (%llu bytes)", kernel_name(), (unsigned long long)dext);
  } else if (!(tcm_side = tcm_alloc_at(s, sext)) || !in_ddr(d, dext, 1)) {
    trap(VDSP_RT_BAD_CALL, "kernel %s: IDMA copies between TCM and the task's buffers: a source inside one TCM "
         "allocation and a destination inside an output buffer, or the reverse (%llu bytes)", kernel_name(),
         (unsigned long long)dext);
  }
  if (rt.issued - rt.done == VDSP_RT_MAX_DMA)
    trap(VDSP_RT_BAD_CALL, "kernel %s: more than %d IDMA transfers issued and not waited for", kernel_name(),
         VDSP_RT_MAX_DMA);
  struct dma *q = &rt.queue[rt.issued++ % VDSP_RT_MAX_DMA];
  q->dst = d;
  q->src = s;
  q->row_bytes = row_bytes;
  q->rows = rows;
  q->dst_pitch = dst_pitch;
  q->src_pitch = src_pitch;
  q->tcm_dst = tcm_dst;
  q->tcm = tcm_dst ? tcm_dst : tcm_side;
  vdsp_board_dma_issued(rt.issued - 1, row_bytes, rows);
  if (vdsp_ivp_stream[0] >= vdsp_ivp_stream[1]) stream(q); /* the engine was idle */
  if (rt.strict) set_guard(1);
  return rt.issued;
}

vdsp_dma_t vdsp_idma_copy(void *dst, void const *src, uint32_t bytes) {
  return vdsp_idma_copy_2d(dst, src, bytes, 1, bytes, bytes);
}

void vdsp_idma_wait(vdsp_dma_t id) {
  if (!rt.task) trap(VDSP_RT_BAD_CALL, "IDMA used outside a task");
  if (id < 1 || id > rt.issued) trap(VDSP_RT_BAD_CALL, "kernel %s: no IDMA transfer %d", kernel_name(), id);
  if (id > rt.done) perform_until(id);
  bank_conflict_check(id);
}

void vdsp_idma_wait_all(void) {
  if (rt.issued > rt.done) perform_until(rt.issued);
}

/* --- the task's result ------------------------------------------------------------------ */
static int ident_char(char c, int first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!first && c >= '0' && c <= '9');
}

static int result_name_ok(char const *name) {
  if (!name) return 0;
  int n = 0;
  for (; name[n] && n <= VDSP_RESULT_NAME_MAX; n++)
    if (!ident_char(name[n], n == 0)) return 0;
  return n >= 1 && n <= VDSP_RESULT_NAME_MAX;
}

void vdsp_result(char const *name, int64_t value) {
  if (!rt.task) trap(VDSP_RT_BAD_CALL, "vdsp_result used outside a task");
  if (!result_name_ok(name))
    trap(VDSP_RT_BAD_CALL, "kernel %s: vdsp_result: a result's name is a C identifier of 1 to %d characters",
         kernel_name(), VDSP_RESULT_NAME_MAX);
  int i = 0;
  while (i < rt.results && strcmp(rt.result[i].name, name) != 0) i++;
  if (i == rt.results) {
    if (i == VDSP_MAX_RESULTS)
      trap(VDSP_RT_BAD_CALL, "kernel %s: vdsp_result: more than %d results (%s)", kernel_name(), VDSP_MAX_RESULTS,
           name);
    snprintf(rt.result[i].name, sizeof rt.result[i].name, "%s", name);
    rt.results++;
  }
  rt.result[i].value = value;
}

/* Result i (0 <= i < the outcome's results) of the last task: its name into `name` (size bytes)
 * and its value; -1 for no such result. */
int vdsp_rt_result(int i, char *name, int size, long long *value) {
  if (i < 0 || i >= rt.results || !name || size < 1) return -1;
  snprintf(name, (size_t)size, "%s", rt.result[i].name);
  *value = (long long)rt.result[i].value;
  return 0;
}

/* --- IVP intrinsics (xtensa/tie/xt_ivpn.h) ------------------------------------------------ */
/* An intrinsic used against its rules (a gather/scatter offset beyond its 64 kB window, ...):
 * a trap of the running task naming kernel and intrinsic; outside a task (a test program of
 * the header) a message on stderr and abort(). */
void vdsp_ivp_fault(char const *intrinsic, char const *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
void vdsp_ivp_fault(char const *intrinsic, char const *fmt, ...) {
  char what[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (rt.task) trap(VDSP_RT_BAD_CALL, "kernel %s: %s: %s", kernel_name(), intrinsic, what);
  fprintf(stderr, "vdsp: %s: %s\n", intrinsic, what);
  abort();
}

static void check_offset(char const *name, int lane, uint32_t offset, uint32_t size) {
  if (offset > VDSP_IVP_WINDOW_BYTES - size)
    vdsp_ivp_fault(name, "lane %d: byte offset %u (%u bytes) is beyond the %u-byte gather/scatter window of its base",
                   lane, offset, size, VDSP_IVP_WINDOW_BYTES);
  if (offset % size)
    vdsp_ivp_fault(name, "lane %d: byte offset %u is not a multiple of the element's %u bytes", lane, offset, size);
}

void vdsp_ivp_refused(int what, void const *a, uint32_t b, uint32_t c) {
  if (what == VDSP_IVP_BAD_FRACTION) vdsp_ivp_fault("IVP_TRUNCN_2XF32", "fraction bits %d outside 0..31", (int)b);
  if (what == VDSP_IVP_BAD_SELECTOR) vdsp_ivp_fault("IVP_SELN_2X32I", "selector 0x%x is not in the subset", b);
  if (what == VDSP_IVP_BAD_DSELECTOR) vdsp_ivp_fault("IVP_DSELN_2X32I", "selector 0x%x is not in the subset", b);
  char const *name = c < VDSP_IVP_IDS ? vdsp_ivp_names[c] : "IVP_?";
  uint32_t lanes[VDSP_IVP_N_2];
  memcpy(lanes, a, sizeof lanes);
  for (int i = 0; what == VDSP_IVP_BAD_WINDOW && i < VDSP_IVP_N_2; i++) check_offset(name, i, lanes[i], b);
  vdsp_ivp_fault(name, "an operand refused (%d)", what); /* (not reached: a lane is bad) */
}

uint32_t vdsp_ivp_refused_lanes[VDSP_IVP_N_2];

void vdsp_ivp_refuse_if(uint32_t bad, int what, void const *a, uint32_t b, uint32_t c) {
  if (bad) vdsp_ivp_refused(what, a, b, c);
}

#if defined(__x86_64__)
/* Where VDSP_IVP_REQUIRE's code for a refused operand jumps (the arguments in the registers of a
 * call to vdsp_ivp_refused, which never returns): below the jumping code's red zone, on a 16-byte
 * aligned stack, the call. */
__asm__(".text\n"
        ".globl vdsp_ivp_refuse_jump\n"
        ".hidden vdsp_ivp_refuse_jump\n"
        ".type vdsp_ivp_refuse_jump, @function\n"
        "vdsp_ivp_refuse_jump:\n"
        "\tlea -128(%rsp), %rsp\n"
        "\tand $-16, %rsp\n"
        "\tcall vdsp_ivp_refused@PLT\n"
        "\tud2\n"
        ".size vdsp_ivp_refuse_jump, .-vdsp_ivp_refuse_jump\n");
#endif

/* --- logging -------------------------------------------------------------------------------- */
void vdsp_log(char level, char const *file, int line, char const *fmt, ...) {
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  char const *base = strrchr(file, '/');
  if (rt.log) rt.log(level, base ? base + 1 : file, line, text);
}

/* --- bank conflicts ------------------------------------------------------------------------ */
/* The J5 sample (§10.4.5.3.3): ping-pong buffers belong in different TCM banks, else the DMA
 * and the core contend for one bank ("data bank conflict"). Checked at each wait: the kernel
 * is about to compute on the waited transfer's TCM allocation B; a transfer still in flight
 * whose TCM side is another allocation A of B's bank moves bytes through that bank meanwhile.
 * One conflict per such wait; the first is named. */
static struct {
  int count;
  char first[256];
} conflicts;

static int bank_index(uint8_t const *p) {
  for (int i = 0; i < VDSP_TCM_BANKS; i++)
    if (p >= rt.banks[i].base && p < rt.banks[i].base + VDSP_RT_BANK_SPAN) return i;
  return -1;
}

static void bank_conflict_check(int id) {
  if (rt.issued - (id - 1) > VDSP_RT_MAX_DMA) return; /* its ring slot holds a later transfer now */
  struct alloc const *b = rt.queue[(id - 1) % VDSP_RT_MAX_DMA].tcm;
  if (!b) return;
  int bank = bank_index(b->start);
  for (int i = id > rt.done ? id : rt.done; i < rt.issued; i++) {     /* the transfers still pending */
    struct alloc const *a = rt.queue[i % VDSP_RT_MAX_DMA].tcm;
    if (!a || a == b || bank_index(a->start) != bank) continue;
    if (conflicts.count++ == 0)
      snprintf(conflicts.first, sizeof conflicts.first,
               "TCM bank %d: IDMA transfer %d moves %s while the kernel computes on %s (transfer %d waited)", bank,
               i + 1, a->name, b->name, id);
    return;
  }
}

/* Conflicts of the last task run, and the first one's description in buf (size bytes). */
int vdsp_rt_bank_conflicts(char *buf, int size) {
  if (buf && size > 0) snprintf(buf, (size_t)size, "%s", conflicts.count ? conflicts.first : "");
  return conflicts.count;
}

/* --- guard pages ---------------------------------------------------------------------------- */
/* Armed around the kernel's run only, when the caller (kernel.py) asked (vdsp_rt_guard). */
#define VDSP_RT_MAX_RANGES 64   /* inputs made read-only per task; more stay writable */

static struct {
  int tcm, inputs;              /* guards requested for the runs to come: TCM, inputs read-only */
  int armed;                    /* guards in place now */
  int tcm_none;                 /* the banks' spans are PROT_NONE but for their pages [0, rw) (struct bank):
                                   kept so between guarded runs (nothing touches TCM between tasks) */
  pthread_t thread;             /* the thread running the guarded kernel */
  int ranges;                   /* DDR ranges made read-only, restored to read-write after the run */
  uintptr_t lo[VDSP_RT_MAX_RANGES], hi[VDSP_RT_MAX_RANGES];
} guard;

static uintptr_t page_down(uintptr_t p) { return p & ~(uintptr_t)(VDSP_RT_PAGE - 1); }
static uintptr_t page_up(uintptr_t p) { return (p + VDSP_RT_PAGE - 1) & ~(uintptr_t)(VDSP_RT_PAGE - 1); }

/* Buffer i of the task (inputs first): whether an output, its index among its kind. */
static TileBuffer const *task_buffer(int i, int *output, int *index) {
  *output = i >= rt.task->num_inputs;
  *index = *output ? i - rt.task->num_inputs : i;
  return *output ? &rt.task->outputs[*index] : &rt.task->inputs[*index];
}

static int task_buffers(void) { return rt.task->num_inputs + rt.task->num_outputs; }

/* Whether an output of the task has bytes in the pages [lo, hi). */
static int pages_hold_output(uintptr_t lo, uintptr_t hi) {
  for (int i = 0; i < rt.task->num_outputs; i++) {
    uintptr_t s = (uintptr_t)rt.task->outputs[i].tile_buffer;
    if (s && rt.task->outputs[i].data_size && page_down(s) < hi && page_up(s + rt.task->outputs[i].data_size) > lo)
      return 1;
  }
  return 0;
}

/* Memory protection keys (Linux, glibc >= 2.27, a CPU with PKU): one per bank, or -1 (none:
 * the host has no keys; the banks' pages are then opened and closed by mprotect each task). */
#if defined(PKEY_DISABLE_ACCESS)
#define VDSP_RT_PKEYS 1
static int bank_key[VDSP_TCM_BANKS] = {-1, -1};
static void keys_init(void) {
  if (bank_key[0] >= 0) return;
  for (int b = 0; b < VDSP_TCM_BANKS; b++) {
    bank_key[b] = pkey_alloc(0, PKEY_DISABLE_ACCESS);
    if (bank_key[b] >= 0) continue;
    while (b-- > 0) pkey_free(bank_key[b]), bank_key[b] = -1;
    return;
  }
}
/* The running thread's access to the banks' keys: all allowed, or all denied. */
static void keys_allow(int allow) {
  for (int b = 0; b < VDSP_TCM_BANKS; b++) {
    if (bank_key[b] >= 0) pkey_set(bank_key[b], allow ? 0 : PKEY_DISABLE_ACCESS);
    rt.banks[b].opened = allow;
  }
}
/* Pages read-write with key 0 (not a bank's: accessible whatever the thread allows). */
static void prot_plain(uint8_t *p, size_t n) {
  if (bank_key[0] >= 0) pkey_mprotect(p, n, PROT_READ | PROT_WRITE, 0);
  else mprotect(p, n, PROT_READ | PROT_WRITE);
}
#else
static int const bank_key[VDSP_TCM_BANKS] = {-1, -1};
static void keys_init(void) {}
static void keys_allow(int allow) {
  for (int b = 0; b < VDSP_TCM_BANKS; b++) rt.banks[b].opened = allow;
}
static void prot_plain(uint8_t *p, size_t n) { mprotect(p, n, PROT_READ | PROT_WRITE); }
#endif

/* Arm guards around the runs from now on: `tcm`, the TCM outside the allocations; `inputs`, the
 * inputs' pages read-only (only for buffers that own their pages: the firmware's DDR mappings). */
void vdsp_rt_guard(int tcm, int inputs) {
  guard.tcm = tcm;
  guard.inputs = inputs;
}

static void guard_arm(void) {
  guard.ranges = 0;
  guard.armed = 0;
  if (guard.tcm != guard.tcm_none) {   /* switched on or off since the last run */
    mprotect(rt.banks[0].base, (size_t)VDSP_TCM_BANKS * VDSP_RT_BANK_SPAN, guard.tcm ? PROT_NONE : PROT_READ | PROT_WRITE);
    guard.tcm_none = guard.tcm;
    for (int b = 0; b < VDSP_TCM_BANKS; b++) rt.banks[b].rw = 0;
  }
  if (guard.tcm && rt.strict) {        /* strict: page by page, as the allocations come (the keys allowed) */
    for (int b = 0; b < VDSP_TCM_BANKS; b++)
      if (rt.banks[b].rw) mprotect(rt.banks[b].base, rt.banks[b].rw, PROT_NONE), rt.banks[b].rw = 0;
  }
  keys_allow(!guard.tcm || rt.strict); /* guarded outside strict mode: a bank's key once opened */
  if (!guard.tcm && !guard.inputs) return;
  guard.thread = pthread_self();
  for (int i = 0; guard.inputs && i < rt.task->num_inputs && guard.ranges < VDSP_RT_MAX_RANGES; i++) {
    TileBuffer const *t = &rt.task->inputs[i];
    uintptr_t s = (uintptr_t)t->tile_buffer, lo = page_down(s), hi = page_up(s + t->data_size);
    if (!s || !t->data_size || pages_hold_output(lo, hi)) continue;
    if (mprotect((void *)lo, hi - lo, PROT_READ) != 0) continue;
    guard.lo[guard.ranges] = lo;
    guard.hi[guard.ranges++] = hi;
  }
  guard.armed = 1 + guard.tcm;    /* 2: TCM guarded too */
}

/* Bank b opened under its key (not in a signal handler: the thread's key rights set there are
 * undone by the return): its pages past the allocations closed, those of allocations made
 * since opened, the key allowed. */
static void guard_open_keyed(int b) {
  struct bank *k = &rt.banks[b];
  uint32_t need = (uint32_t)page_up(k->next);
  if (k->rw > need) mprotect(k->base + need, k->rw - need, PROT_NONE);
#ifdef VDSP_RT_PKEYS
  else if (k->rw < need) pkey_mprotect(k->base + k->rw, need - k->rw, PROT_READ | PROT_WRITE, bank_key[b]);
  if (!k->opened) pkey_set(bank_key[b], 0);
#endif
  k->rw = need;
  k->opened = 1;
}

/* Bank b's allocations opened with key 0 (async-signal-safe: on_segv calls it), for the rest of
 * the task: pages under the bank's key are given key 0 (else a handler could not open them). */
static void guard_open_plain(int b) {
  struct bank *k = &rt.banks[b];
  uint32_t need = (uint32_t)page_up(k->next);
  if (k->keyed) {
    if (k->rw > need) mprotect(k->base + need, k->rw - need, PROT_NONE);
    k->rw = 0;
    k->keyed = 0;
  }
  if (need > k->rw) prot_plain(k->base + k->rw, need - k->rw);
  k->rw = need;
}

/* Outside strict mode, the allocations of bank b not yet opened become accessible: `now`, as
 * the runtime is about to touch them; else (at an allocation) once they reach the extent the
 * last task's had (a task allocating as the last one did opens each bank once, at its last
 * allocation, and no page of the last task's is opened before this one allocates it). */
static void guard_open(int b, int now) {
  struct bank *k = &rt.banks[b];
  if (guard.armed != 2 || rt.strict) return;
  if (k->keyed) {
    if (now || k->opened || page_up(k->next) >= k->rw) guard_open_keyed(b);
  } else if (now || page_up(k->next) >= k->extent) {
    guard_open_plain(b);
  }
}

static void guard_open_all(void) {
  for (int b = 0; b < VDSP_TCM_BANKS; b++)
    if (rt.banks[b].next) guard_open(b, 1);
}

/* A new TCM allocation becomes accessible: in strict mode now (its pages; a pending transfer's
 * destination is made inaccessible again by set_guard), else by guard_open. */
static void guard_alloc(struct alloc const *a) {
  if (guard.armed != 2 || !a->bytes) return;
  if (!rt.strict) {
    guard_open(bank_index(a->start), 0);
    return;
  }
  uintptr_t s = (uintptr_t)a->start;
  mprotect((void *)page_down(s), page_up(s + a->bytes) - page_down(s), PROT_READ | PROT_WRITE);
}

static void guard_disarm(void) {
  if (!guard.armed) return;
  if (guard.armed == 2) {       /* the pages opened with key 0 closed: one mprotect from bank 0 to the last */
    uintptr_t hi = 0;
    for (int b = 0; b < VDSP_TCM_BANKS; b++) {
      struct bank *k = &rt.banks[b];
      uint32_t opened = rt.strict ? (uint32_t)page_up(k->next) : k->keyed ? 0 : k->rw;
      if (opened) hi = (uintptr_t)k->base + opened;
    }
    if (hi) {
      mprotect(rt.banks[0].base, hi - (uintptr_t)rt.banks[0].base, PROT_NONE);
      for (int b = 0; b < VDSP_TCM_BANKS; b++)
        if ((uintptr_t)rt.banks[b].base < hi) rt.banks[b].rw = 0;
    }
    for (int b = 0; b < VDSP_TCM_BANKS; b++) {
      rt.banks[b].extent = (uint32_t)page_up(rt.banks[b].next);
      if (!rt.banks[b].rw) rt.banks[b].keyed = bank_key[b] >= 0;
    }
    keys_allow(0);
  }
  for (int i = 0; i < guard.ranges; i++)
    mprotect((void *)guard.lo[i], guard.hi[i] - guard.lo[i], PROT_READ | PROT_WRITE);
  guard.ranges = 0;
  guard.armed = 0;
}

static char const *access_kind(void const *uctx) {
#if defined(__x86_64__) && defined(REG_ERR)
  return (((ucontext_t const *)uctx)->uc_mcontext.gregs[REG_ERR] & 2) ? "wrote" : "read";
#else
  (void)uctx;
  return "touched";
#endif
}

/* A fault at p while guards are armed: 1 (rt.message set) if it is within a page of a buffer
 * of the task or in its TCM, else 0. */
static int guard_fault(uint8_t const *p, void const *uctx) {
  uintptr_t a = (uintptr_t)p;
  char const *did = access_kind(uctx);
  int bank = bank_index(p);
  if (bank >= 0) {
    struct bank const *b = &rt.banks[bank];
    struct alloc const *near = NULL;
    long long best = 0;
    for (int j = 0; j < b->count; j++) {
      struct alloc const *x = &b->allocs[j];
      uintptr_t s = (uintptr_t)x->start, e = s + x->bytes;
      long long dist = a >= e ? (long long)(a - e) : a < s ? (long long)(s - a) : 0;
      if (!near || dist < best) near = x, best = dist;
    }
    if (!near)
      snprintf(rt.message, sizeof rt.message, "kernel %s: %s TCM bank %d at +%llu, where it holds no allocation",
               kernel_name(), did, bank, (unsigned long long)(p - b->base));
    else
      snprintf(rt.message, sizeof rt.message,
               "kernel %s: %s TCM bank %d at %s %+lld, outside its TCM allocations (%s: %u bytes)",
               kernel_name(), did, bank, near->name, (long long)(p - near->start), near->name, near->bytes);
    return 1;
  }
  int found = -1;
  long long best = 0;
  for (int i = 0; i < task_buffers(); i++) {
    int output, index;
    TileBuffer const *t = task_buffer(i, &output, &index);
    uintptr_t s = (uintptr_t)t->tile_buffer, e = s + t->data_size;
    if (!s || a + VDSP_RT_PAGE < page_down(s) || a >= page_up(e) + VDSP_RT_PAGE) continue;
    long long dist = a >= e ? (long long)(a - e) : a < s ? (long long)(s - a) : -1;
    if (found < 0 || dist < best) found = i, best = dist;
  }
  if (found < 0) return 0;
  int output, index;
  TileBuffer const *t = task_buffer(found, &output, &index);
  long long off = (long long)(a - (uintptr_t)t->tile_buffer);
  if (best < 0)
    snprintf(rt.message, sizeof rt.message, "kernel %s: %s input %d at +%lld (a buffer of %u bytes): inputs are "
             "read-only", kernel_name(), did, index, off, t->data_size);
  else
    snprintf(rt.message, sizeof rt.message, "kernel %s: %s %s %d at %+lld, %s (a buffer of %u bytes)", kernel_name(),
             did, output ? "output" : "input", index, off, off < 0 ? "before its start" : "past its end", t->data_size);
  return 1;
}

/* --- AddressSanitizer ---------------------------------------------------------------------- */
/* In an image built with --sanitize=address, ASan's report ends the firmware; after it the
 * runtime names the kernel that was running on stderr (the core's log) and, when the firmware
 * gave it a crash file (vdsp_rt_crash_file), writes there the crash report the core passes on
 * (PROTOCOL.md §5.9: type, exception, task). */
#if defined(__SANITIZE_ADDRESS__)
#define VDSP_RT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VDSP_RT_ASAN 1
#endif
#endif

static struct {
  char path[1024];              /* the firmware's crash file, "" for none */
  char core[64];
  long long msg_id;             /* the running task's */
  int op;
  char name[64];                /* its operator's */
} crash;

/* `text` as the characters of a JSON string (no escapes needed: the others become '?'). */
static void json_safe(char *out, size_t size, char const *text) {
  size_t n = 0;
  for (; text && text[n] && n + 1 < size; n++)
    out[n] = (text[n] == '"' || text[n] == '\\' || (unsigned char)text[n] < 0x20) ? '?' : text[n];
  out[n] = 0;
}

/* Where to write a crash report, and the core's name (set once, at load). */
void vdsp_rt_crash_file(char const *path, char const *core) {
  snprintf(crash.path, sizeof crash.path, "%s", path ? path : "");
  json_safe(crash.core, sizeof crash.core, core);
}

/* The task about to run (its msg_id, its operator's id and name), for the crash report. */
void vdsp_rt_task_info(long long msg_id, int op, char const *name) {
  crash.msg_id = msg_id;
  crash.op = op;
  json_safe(crash.name, sizeof crash.name, name);
}

#ifdef VDSP_RT_ASAN
#include <fcntl.h>
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>

static void write_all(int fd, char const *s, int n) {
  if (n > 0 && write(fd, s, (size_t)n) < 0) return;
}

static void on_asan_death(void) {
  char line[512];
  char kernel[64];
  json_safe(kernel, sizeof kernel, rt.task ? kernel_name() : "(none running)");
  char const *what = __asan_get_report_description();
  write_all(2, line, snprintf(line, sizeof line, "vdsp: kernel %s: AddressSanitizer stopped it (the report above): "
                                                 "the firmware exits\n", kernel));
  if (!crash.path[0] || !rt.task) return;
  int fd = open(crash.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;
  write_all(fd, line, snprintf(line, sizeof line,
            "{\"type\": \"AddressSanitizer report\", \"exception\": \"AddressSanitizer: %s in kernel %s\", "
            "\"core\": \"%s\", \"task\": {\"msg_id\": %lld, \"op\": %d, \"name\": \"%s\"}}\n",
            what && what[0] ? what : "report", kernel, crash.core, crash.msg_id, crash.op, crash.name));
  close(fd);
}
#endif

/* 1 in a library built with AddressSanitizer, else 0. */
int vdsp_rt_asan(void) {
#ifdef VDSP_RT_ASAN
  return 1;
#else
  return 0;
#endif
}

static void asan_init(void) {
#ifdef VDSP_RT_ASAN
  __sanitizer_set_death_callback(on_asan_death);
#endif
}

/* --- the task ------------------------------------------------------------------------------- */
/* The fault it catches is synchronous, raised by the kernel's own load or store (never inside
 * the runtime's calls, which do not touch guarded pages: perform_until opens the banks first),
 * so formatting the message here does not re-enter a half-done libc call of the interrupted
 * code. A fault in an allocated page not yet opened is the lazy opening's: the pages opened
 * (guard_open_plain: system calls only), the handler returns and the access runs again. */
static void on_segv(int sig, siginfo_t *info, void *uctx) {
  uint8_t const *p = (uint8_t const *)info->si_addr;
  if (rt.task && rt.strict) {
    for (int i = rt.done; i < rt.issued; i++) {
      struct alloc const *a = rt.queue[i % VDSP_RT_MAX_DMA].tcm_dst;
      if (a && p >= (uint8_t const *)((uintptr_t)a->start & ~(uintptr_t)(VDSP_RT_PAGE - 1)) &&
          p < a->start + a->bytes + VDSP_RT_PAGE) {
        set_guard(0);
        snprintf(rt.message, sizeof rt.message,
                 "kernel %s: TCM buffer %s used before the wait of IDMA transfer %d that fills it", kernel_name(),
                 a->name, i + 1);
        rt.trap = VDSP_RT_DMA_NOT_WAITED;
        siglongjmp(rt.env, 1);
      }
    }
  }
  /* only on the thread that runs the kernel: its jump buffer is that thread's stack */
  int bank = bank_index(p);
  if (rt.task && guard.armed == 2 && !rt.strict && bank >= 0 && pthread_equal(pthread_self(), guard.thread) &&
      p < rt.banks[bank].base + page_up(rt.banks[bank].next) &&
      (rt.banks[bank].keyed || p >= rt.banks[bank].base + rt.banks[bank].rw)) {
    guard_open_plain(bank); /* an allocated page not yet opened: open, and the access runs again */
    return;
  }
  if (rt.task && guard.armed && pthread_equal(pthread_self(), guard.thread) && guard_fault(p, uctx)) {
    rt.trap = VDSP_RT_MEMORY_FAULT;
    siglongjmp(rt.env, 1);
  }
  /* not ours: the handler before us (or the default: the process dies of the signal) */
  sigaction(sig, &rt.previous, NULL);
}

int vdsp_rt_init(vdsp_rt_log_fn log) {
  rt.log = log;
  asan_init();
  keys_init();
  if (!rt.banks[0].base) { /* the banks one after the other, in one mapping (guard_disarm's one mprotect) */
    void *m = mmap(NULL, (size_t)VDSP_TCM_BANKS * VDSP_RT_BANK_SPAN, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return -1;
    for (int i = 0; i < VDSP_TCM_BANKS; i++) {
      rt.banks[i].base = (uint8_t *)m + (size_t)i * VDSP_RT_BANK_SPAN;
      vdsp_ivp_tcm[i] = (uintptr_t)rt.banks[i].base; /* the intrinsics' inside/outside TCM count */
    }
  }
  vdsp_ivp_tcm_bytes = (uintptr_t)VDSP_TCM_BANKS * VDSP_RT_BANK_SPAN; /* both banks: one span from bank 0's */
  return 0;
}

static void release(void) {
  if (rt.strict) set_guard(0);
  guard_disarm();     /* after: the pending destinations' pages are guarded as the rest */
  rt.issued = rt.done = 0;
  for (int i = 0; i < VDSP_TCM_BANKS; i++) rt.banks[i].used = rt.banks[i].next = rt.banks[i].count = 0;
  rt.task = NULL;
}

/* Run `kernel` on `task`: 0 and the kernel's return value in *rc, or the kind of the trap that
 * ended it (its message in vdsp_rt_message()). */
int vdsp_rt_run(int (*kernel)(vdsp_task_t const *), vdsp_task_t const *task, int strict, int *rc) {
  rt.task = task;
  rt.strict = strict;
  rt.trap = VDSP_RT_OK;
  rt.message[0] = 0;
  rt.issued = rt.done = 0;
  rt.results = 0;
  stream_next();
  vdsp_board_begin();
  conflicts.count = 0;
  int volatile handle = strict || guard.tcm || guard.inputs; /* read after the longjmp */
  if (handle) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &rt.previous);
  }
  guard_arm();
  if (sigsetjmp(rt.env, 1) == 0) {
    *rc = kernel(task);
    if (rt.issued > rt.done) {
      if (strict) {
        snprintf(rt.message, sizeof rt.message, "kernel %s: returned with %d IDMA transfers not waited for",
                 kernel_name(), rt.issued - rt.done);
        rt.trap = VDSP_RT_DMA_NOT_WAITED;
      } else {
        perform_until(rt.issued); /* the engine finishes them after the kernel, as on the board */
      }
    }
  }
  if (handle) sigaction(SIGSEGV, &rt.previous, NULL);
  release();
  return rt.trap;
}

char const *vdsp_rt_message(void) { return rt.message; }

/* What vdsp_rt_call reports of a task (mirrored by kernel.py's Outcome). */
struct vdsp_rt_outcome {
  int trap;         /* 0, or the kind of the trap that ended the task (its message: vdsp_rt_message) */
  int rc;           /* the kernel's return value (0 after a trap) */
  int conflicts;    /* the task's bank conflicts (the first one's description: vdsp_rt_bank_conflicts) */
  int results;      /* names the kernel set by vdsp_result (0 after a trap or a non-zero return) */
  double board[5];  /* the task's priced counts, as vdsp_board_summary gives them */
};

enum { VDSP_RT_CALL_STRICT = 1, VDSP_RT_CALL_GUARD_TCM = 2, VDSP_RT_CALL_GUARD_INPUTS = 4 };

/* A task in one call (kernel.py's, after each task): vdsp_rt_guard(flags' GUARD_TCM, GUARD_INPUTS),
 * vdsp_rt_run(kernel, task, flags' STRICT), then the bank conflicts and board summary of the run. */
void vdsp_rt_call(int (*kernel)(vdsp_task_t const *), vdsp_task_t const *task, int flags,
                  struct vdsp_rt_outcome *out) {
  vdsp_rt_guard(!!(flags & VDSP_RT_CALL_GUARD_TCM), !!(flags & VDSP_RT_CALL_GUARD_INPUTS));
  out->rc = 0;
  out->trap = vdsp_rt_run(kernel, task, flags & VDSP_RT_CALL_STRICT, &out->rc);
  out->conflicts = conflicts.count;
  if (out->trap || out->rc) rt.results = 0;
  out->results = rt.results;
  vdsp_board_summary(out->board);
}
