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
 *   other fault to the handler that was installed before (a crash of the firmware).
 */
#define _GNU_SOURCE
#include "vdsp_kernel.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define VDSP_RT_MAX_DMA 256 /* transfers issued and not yet performed (a ring: transfer id is at (id - 1) % this) */
#define VDSP_RT_PAGE 4096u
/* Backing of a bank: room for the budget with every allocation page-aligned (strict mode). */
#define VDSP_RT_BANK_SPAN (VDSP_TCM_BANK_BYTES + VDSP_TCM_MAX_ALLOCS * VDSP_RT_PAGE)

enum { VDSP_RT_OK = 0, VDSP_RT_TCM_OVER_BUDGET = 1, VDSP_RT_DMA_NOT_WAITED = 2, VDSP_RT_BAD_CALL = 3 };

typedef void (*vdsp_rt_log_fn)(int level, char const *file, int line, char const *message);

struct alloc {
  uint8_t *start;
  uint32_t bytes;
  char name[48];
};

struct bank {
  uint8_t *base;          /* VDSP_RT_BANK_SPAN bytes, mapped once, kept between tasks (TCM keeps its bytes) */
  uint32_t used;          /* bytes of the budget held (requested sizes, rounded to VDSP_TCM_ALIGN) */
  uint32_t next;          /* offset of the next allocation in base */
  int count;
  struct alloc allocs[VDSP_TCM_MAX_ALLOCS];
};

struct dma {
  uint8_t *dst;
  uint8_t const *src;
  uint32_t row_bytes, rows, dst_pitch, src_pitch;
  struct alloc const *tcm_dst; /* the allocation written, NULL for a transfer into DDR */
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

static void perform_until(int id) {
  if (rt.strict) set_guard(0);
  for (; rt.done < id; rt.done++) {
    struct dma const *d = &rt.queue[rt.done % VDSP_RT_MAX_DMA];
    for (uint32_t r = 0; r < d->rows; r++)
      memmove(d->dst + (uint64_t)r * d->dst_pitch, d->src + (uint64_t)r * d->src_pitch, d->row_bytes);
  }
  if (rt.strict) set_guard(1);
}

vdsp_dma_t vdsp_idma_copy_2d(void *dst, void const *src, uint32_t row_bytes, uint32_t rows,
                             uint32_t dst_pitch, uint32_t src_pitch) {
  if (!rt.task) trap(VDSP_RT_BAD_CALL, "IDMA used outside a task");
  uint8_t *d = (uint8_t *)dst;
  uint8_t const *s = (uint8_t const *)src;
  if (rows > 1 && (dst_pitch < row_bytes || src_pitch < row_bytes))
    trap(VDSP_RT_BAD_CALL, "kernel %s: IDMA 2-D copy with a pitch (%u, %u) below its row of %u bytes", kernel_name(),
         dst_pitch, src_pitch, row_bytes);
  uint64_t dext = rows ? (uint64_t)(rows - 1) * dst_pitch + row_bytes : 0;
  uint64_t sext = rows ? (uint64_t)(rows - 1) * src_pitch + row_bytes : 0;
  struct alloc const *tcm_dst = NULL;
  if (in_tcm(d)) {
    tcm_dst = tcm_alloc_at(d, dext);
    if (!tcm_dst || !in_ddr(s, sext, 0))
      trap(VDSP_RT_BAD_CALL, "kernel %s: IDMA into TCM needs its destination inside one TCM allocation and its "
           "source inside a buffer of the task (%llu bytes)", kernel_name(), (unsigned long long)dext);
  } else if (!tcm_alloc_at(s, sext) || !in_ddr(d, dext, 1)) {
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
}

void vdsp_idma_wait_all(void) {
  if (rt.issued > rt.done) perform_until(rt.issued);
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

/* --- the task ------------------------------------------------------------------------------- */
/* The fault it catches is synchronous, raised by the kernel's own load or store (never inside
 * the runtime's calls, which do not touch guarded pages), so formatting the message here does
 * not re-enter a half-done libc call of the interrupted code. */
static void on_segv(int sig, siginfo_t *info, void *uctx) {
  (void)uctx;
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
  /* not ours: the handler before us (or the default: the process dies of the signal) */
  sigaction(sig, &rt.previous, NULL);
}

int vdsp_rt_init(vdsp_rt_log_fn log) {
  rt.log = log;
  for (int i = 0; i < VDSP_TCM_BANKS; i++) {
    if (rt.banks[i].base) continue;
    void *m = mmap(NULL, VDSP_RT_BANK_SPAN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return -1;
    rt.banks[i].base = (uint8_t *)m;
  }
  return 0;
}

static void release(void) {
  if (rt.strict) set_guard(0);
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
  if (strict) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &rt.previous);
  }
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
  if (strict) sigaction(SIGSEGV, &rt.previous, NULL);
  release();
  return rt.trap;
}

char const *vdsp_rt_message(void) { return rt.message; }
