/*
 * vdsp_kernel.h: what a C kernel of a vdsp-sim firmware image sees of the DSP (docs/dsp_kernels.md).
 *
 * A kernel is a plain C (or C++) function
 *
 *     VDSP_KERNEL(my_kernel) { ... return 0; }        int my_kernel(vdsp_task_t const *task)
 *
 * bound to its operator's contract entry in the image's firmware.py. It gets the task's buffers
 * in DDR (shared memory) as TileBuffers, its parameters as the operator's hbDSP<Name>Param struct
 * (generated from the same entry as the ARM side's struct: "vdsp_kernel_params.h"), and the
 * board's local memory: two TCM banks, of which an operator may use VDSP_TCM_OPERATOR_BYTES each,
 * filled and drained by IDMA transfers that complete only at their wait.
 *
 * Traps: a call that breaks the board's rules (TCM over budget, a transfer outside the task's
 * buffers and its TCM, and, in strict mode, touching a transfer's TCM destination before its
 * wait) ends the task at once with a coded error; the kernel's code after it does not run.
 * One task runs at a time in a firmware process; TCM is released when the kernel returns.
 */
#ifndef VDSP_KERNEL_H_
#define VDSP_KERNEL_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A buffer as the J5 sample's kernels take it: its first byte and its size in bytes. */
typedef struct TileBuffer {
  void *tile_buffer;
  uint32_t data_size;
} TileBuffer;

/* One task: its buffers (DDR, inputs read-only) and the operator's parameter struct. */
typedef struct vdsp_task {
  char const *kernel;          /* the kernel's name (its symbol) */
  int32_t num_inputs;
  int32_t num_outputs;
  TileBuffer const *inputs;    /* num_inputs buffers; do not write through these */
  TileBuffer const *outputs;   /* num_outputs buffers */
  void const *param;           /* the hbDSP<Name>Param of the operator, NULL when it has no parameters */
  uint32_t param_size;         /* sizeof that struct */
} vdsp_task_t;

#ifdef __cplusplus
#define VDSP_KERNEL(name) extern "C" int name(vdsp_task_t const *task) /* found by its plain name */
#else
#define VDSP_KERNEL(name) int name(vdsp_task_t const *task)
#endif

/* A compile-time check, in C and in C++ (the parameter header checks its layouts with it). */
#ifdef __cplusplus
#define VDSP_STATIC_ASSERT static_assert
#else
#define VDSP_STATIC_ASSERT _Static_assert
#endif

/* The operator's parameters as their struct: VDSP_PARAM(task, hbDSPScaleParam)->gain. */
#define VDSP_PARAM(task, type) ((type const *)(task)->param)

/* --- TCM: two banks of 128 kB; an operator may hold VDSP_TCM_OPERATOR_BYTES of each --- */
#define VDSP_TCM_BANKS 2
#define VDSP_TCM_BANK_BYTES (128u * 1024u)
#define VDSP_TCM_OPERATOR_BYTES (103u * 1024u) /* the J5 sample's figure for an operator */
#define VDSP_TCM_ALIGN 64u                     /* every allocation starts on this boundary */
#define VDSP_TCM_MAX_ALLOCS 64                 /* allocations per bank per task */

/* `bytes` of TCM in `bank` (0 or 1), named for the error messages. Traps when the bank's
 * operator budget would be exceeded (HB_DSP_TCM_OVER_BUDGET naming kernel, bank and bytes). */
void *vdsp_tcm_alloc(int bank, uint32_t bytes, char const *name);
/* The same as a TileBuffer (tile_buffer, data_size = bytes). */
TileBuffer vdsp_tcm_tile(int bank, uint32_t bytes, char const *name);
/* Bytes of the operator's budget still free in `bank`. */
uint32_t vdsp_tcm_free(int bank);

/* --- IDMA: copies between the task's DDR buffers and TCM, complete only at their wait --- */
typedef int32_t vdsp_dma_t;
/* Copy `bytes` from src to dst (one of them in TCM, the other in the task's buffers). */
vdsp_dma_t vdsp_idma_copy(void *dst, void const *src, uint32_t bytes);
/* Copy `rows` rows of `row_bytes`, rows `dst_pitch` / `src_pitch` bytes apart (neither below
 * row_bytes when rows > 1, but a src_pitch of 0: every row is the one source row, as a 2-D DMA
 * fills a region from one zeroed or patterned row). */
vdsp_dma_t vdsp_idma_copy_2d(void *dst, void const *src, uint32_t row_bytes, uint32_t rows,
                             uint32_t dst_pitch, uint32_t src_pitch);
/* Wait for transfer `id` (and, transfers being in order, every one before it). */
void vdsp_idma_wait(vdsp_dma_t id);
/* Wait for every transfer issued. */
void vdsp_idma_wait_all(void);

/* --- The task's result: named integers its reply carries beside the outputs --- */
#define VDSP_MAX_RESULTS 8       /* names per task */
#define VDSP_RESULT_NAME_MAX 31  /* characters of a name: a C identifier */
/* Set result `name` of the running task to `value` (the operator's reply carries
 * {"name": value}: Python's call returns it, C reads it by hbDSPGetTaskValueInt). A name set again takes
 * the new value. Traps (HB_DSP_OPERATOR_FAILED naming the kernel) on a name that is not a C
 * identifier of 1..VDSP_RESULT_NAME_MAX characters, on a ninth name, and outside a task. A task
 * that traps or returns non-zero has no result. */
void vdsp_result(char const *name, int64_t value);

/* --- Logging, in the DSP log format: [I][DSP][file.c:42][[mm-dd][hh:mm:ss:ms:us]] message --- */
void vdsp_log(char level, char const *file, int line, char const *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
#define VDSP_LOGE(...) vdsp_log('E', __FILE__, __LINE__, __VA_ARGS__)
#define VDSP_LOGW(...) vdsp_log('W', __FILE__, __LINE__, __VA_ARGS__)
#define VDSP_LOGI(...) vdsp_log('I', __FILE__, __LINE__, __VA_ARGS__)
#define VDSP_LOGD(...) vdsp_log('D', __FILE__, __LINE__, __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif /* VDSP_KERNEL_H_ */
