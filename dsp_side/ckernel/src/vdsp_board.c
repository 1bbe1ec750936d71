/*
 * Part of the kernel runtime (included by vdsp_rt.c: one translation unit, so that it sees the
 * runtime's TCM banks): what a task spends on the board, counted while it runs
 * (docs/dsp_kernels.md, "Board time"). The prices are not here: dsp_side/ckernel/board_model.py
 * holds them (each with its source) and hands them over with vdsp_board_set_prices.
 *
 * Invariants:
 * - the counters are the running task's: vdsp_board_begin zeroes them before the kernel runs;
 *   one task at a time per process (the runtime's rule), so plain increments suffice;
 * - the kernel's basic blocks are counted by __sanitizer_cov_trace_pc, which GCC and Clang call
 *   on entering each block of code compiled with -fsanitize-coverage=trace-pc (the image's
 *   kernel sources; not the runtime; the IVP intrinsics' emulation adds no block of its own:
 *   <xtensa/tie/xt_ivpn.h>, "how the intrinsics run on the host");
 * - the IDMA engine is one in-order queue: a transfer starts when it is issued or when the one
 *   before it ends, whichever is later, and takes setup + bytes / bandwidth cycles; a wait
 *   stalls the core until the transfer it waits for has ended. "Now", for the core, is the
 *   priced work counted so far plus the stalls so far.
 */
#include <xtensa/tie/xt_ivpn.h>

uint64_t vdsp_ivp_count[VDSP_IVP_IDS];
uint64_t vdsp_ivp_outside[VDSP_IVP_IDS];
uintptr_t vdsp_ivp_tcm[2]; /* set by vdsp_rt_init */
uintptr_t vdsp_ivp_tcm_bytes;
uintptr_t vdsp_ivp_stream[2]; /* kept by the runtime (vdsp_rt.c, stream_next) */
_Static_assert(VDSP_TCM_BANKS == 2, "vdsp_ivp_tcm has a slot per bank");
char const *const vdsp_ivp_names[VDSP_IVP_IDS] = {
#define VDSP_BOARD_NAME(name) "IVP_" #name,
    VDSP_IVP_INTRINSICS(VDSP_BOARD_NAME)
#undef VDSP_BOARD_NAME
};
int const vdsp_ivp_ids = VDSP_IVP_IDS;

/* The prices board_model.py sets (cycles), read by the DMA timeline. */
struct vdsp_board_prices {
  double ivp[VDSP_IVP_IDS];         /* one use of each intrinsic */
  double ivp_outside[VDSP_IVP_IDS]; /* more, when its memory is outside TCM */
  double block;                     /* one basic block of the kernel's own code */
  double dma_setup;                 /* one IDMA transfer, before its bytes */
  double dma_row;                   /* each row of a transfer after its first */
  double dma_bytes_per_cycle;       /* DDR <-> TCM */
};

/* What a task spent, read by kernel.py after the task (its layout is mirrored there). */
struct vdsp_board_counts {
  uint64_t ivp[VDSP_IVP_IDS];
  uint64_t ivp_outside[VDSP_IVP_IDS];
  uint64_t blocks;
  uint64_t dma_transfers, dma_rows, dma_bytes;
  double dma_busy;  /* cycles the engine worked */
  double dma_stall; /* cycles the core waited for it */
};

static struct vdsp_board_prices prices;
static struct {
  uint64_t blocks, dma_transfers, dma_rows, dma_bytes;
  double dma_busy, stall, engine_free;
  double end[VDSP_RT_MAX_DMA]; /* when each pending transfer ends (a ring, as the runtime's queue) */
} board;

/* hidden: the kernels' calls bind to this one, directly (no PLT; not an ASan runtime's, either) */
VDSP_IVP_HIDDEN void __sanitizer_cov_trace_pc(void) { board.blocks++; }

void vdsp_board_set_prices(struct vdsp_board_prices const *p) { prices = *p; }

static void vdsp_board_begin(void) {
  memset(vdsp_ivp_count, 0, sizeof vdsp_ivp_count);
  memset(vdsp_ivp_outside, 0, sizeof vdsp_ivp_outside);
  memset(&board, 0, sizeof board);
}

static double vdsp_board_now(void) {
  double t = (double)board.blocks * prices.block + board.stall;
  for (int i = 0; i < VDSP_IVP_IDS; i++)
    t += (double)vdsp_ivp_count[i] * prices.ivp[i] + (double)vdsp_ivp_outside[i] * prices.ivp_outside[i];
  return t;
}

/* Transfer `index` (0-based, in issue order) of `rows` rows of `row_bytes` was issued now. */
static void vdsp_board_dma_issued(int index, uint32_t row_bytes, uint32_t rows) {
  double now = vdsp_board_now(), start = now > board.engine_free ? now : board.engine_free;
  uint64_t bytes = (uint64_t)row_bytes * rows;
  double busy = prices.dma_setup + (rows > 1 ? (rows - 1) * prices.dma_row : 0.0) +
                (prices.dma_bytes_per_cycle > 0 ? (double)bytes / prices.dma_bytes_per_cycle : 0.0);
  board.engine_free = board.end[index % VDSP_RT_MAX_DMA] = start + busy;
  board.dma_busy += busy;
  board.dma_transfers++;
  board.dma_rows += rows;
  board.dma_bytes += bytes;
}

/* The core waits for transfers 1..id (the runtime performs them now). */
static void vdsp_board_dma_waited(int id) {
  double now = vdsp_board_now();
  /* called for a pending transfer only (perform_until): its slot is still its own */
  if (id >= 1 && board.end[(id - 1) % VDSP_RT_MAX_DMA] > now) board.stall += board.end[(id - 1) % VDSP_RT_MAX_DMA] - now;
}

void vdsp_board_counts(struct vdsp_board_counts *out) {
  memcpy(out->ivp, vdsp_ivp_count, sizeof out->ivp);
  memcpy(out->ivp_outside, vdsp_ivp_outside, sizeof out->ivp_outside);
  out->blocks = board.blocks;
  out->dma_transfers = board.dma_transfers;
  out->dma_rows = board.dma_rows;
  out->dma_bytes = board.dma_bytes;
  out->dma_busy = board.dma_busy;
  out->dma_stall = board.stall;
}

/* The last task's counts priced, for the estimate after every task (counters.py): out[0] the
 * intrinsics' cycles, out[1] their extra cycles outside TCM, out[2] the basic blocks, out[3]
 * the IDMA engine's busy cycles, out[4] the core's stalls on it. */
void vdsp_board_summary(double out[5]) {
  double vector = 0.0, outside = 0.0;
  for (int i = 0; i < VDSP_IVP_IDS; i++) {
    vector += (double)vdsp_ivp_count[i] * prices.ivp[i];
    outside += (double)vdsp_ivp_outside[i] * prices.ivp_outside[i];
  }
  out[0] = vector;
  out[1] = outside;
  out[2] = (double)board.blocks;
  out[3] = board.dma_busy;
  out[4] = board.stall;
}
