/*
 * hb_sys.h: system memory of the simulated SoC (vdsp-sim), with the hbSys* names, structs
 * and codes of the BPU SDK API manual. Link with libvdsp_hb (pkg-config vdsp-hb).
 *
 * Every int32_t function returns 0 or a negative code; hbDNNGetErrorDesc(code) says what it
 * means. docs/capi.md maps each function to its behaviour here.
 */
#ifndef VDSP_HB_SYS_H_
#define VDSP_HB_SYS_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes of the hbSys* functions (the manual's values). */
#define HB_SYS_SUCCESS 0
#define HB_SYS_INVALID_ARGUMENT (-6000129)
#define HB_SYS_OUT_OF_MEMORY (-6000130)
#define HB_SYS_REGISTER_MEM_FAILED (-6000131)
/* strict cache mode (VDSP_STRICT_CACHE=1): a buffer written without the flush it needed */
#define HB_SYS_CACHE_NOT_FLUSHED (-6000132)

/* The simulator's own codes (any function that talks to the SoC may return them). */
#define HB_DSP_PROTOCOL_ERROR (-6000257)
#define HB_DSP_BAD_MAGIC (-6000258)
#define HB_DSP_MESSAGE_TOO_LARGE (-6000259)
#define HB_DSP_UNKNOWN_OPERATOR (-6000260)
#define HB_DSP_INVALID_CORE (-6000261)
#define HB_DSP_UNKNOWN_COMMAND (-6000262)
#define HB_DSP_OPERATOR_FAILED (-6000270)
#define HB_DSP_TASK_CANCELLED (-6000271)
#define HB_DSP_TCM_OVER_BUDGET (-6000272)
#define HB_DSP_DMA_NOT_WAITED (-6000273)
#define HB_DSP_KERNEL_MEMORY_FAULT (-6000274)
#define HB_DSP_UNKNOWN_HANDLE (-6000280)
#define HB_DSP_FREED_HANDLE (-6000281)
#define HB_DSP_HANDLE_OUT_OF_BOUNDS (-6000282)
#define HB_DSP_FOREIGN_HANDLE (-6000283)
#define HB_DSP_CLAIM_REFUSED (-6000284)
#define HB_DSP_CORE_OFFLINE (-6000290)
#define HB_DSP_CORE_CRASHED (-6000291)
#define HB_DSP_CORE_DEAD (-6000292)
#define HB_DSP_BUSY (-6000293)
/* no SoC answers: start one with 'vdsp up -d' */
#define HB_DSP_RELAY_UNAVAILABLE (-6000300)
#define HB_DSP_KEY_REFUSED (-6000301)

/* A buffer of the SoC's DDR. phyAddr is meaningful in every process of the SoC; virAddr
 * points at the memory as this process's CPU sees it: the DDR itself for hbSysAllocMem, a
 * private CPU cache for hbSysAllocCachedMem and hbSysRegisterMem (flush it). */
typedef struct {
  uint64_t phyAddr;
  void *virAddr;
  uint32_t memSize;
} hbSysMem;

typedef enum {
  HB_SYS_MEM_CACHE_INVALIDATE = 1, /* DDR -> CPU cache: before the CPU reads what a device wrote */
  HB_SYS_MEM_CACHE_CLEAN = 2       /* CPU cache -> DDR: after the CPU wrote, before a device reads */
} hbSysMemFlushFlag;

int32_t hbSysAllocMem(hbSysMem *mem, uint32_t size);
int32_t hbSysAllocCachedMem(hbSysMem *mem, uint32_t size);
int32_t hbSysFlushMem(hbSysMem *mem, int32_t flag);
int32_t hbSysFreeMem(hbSysMem *mem);
int32_t hbSysWriteMem(hbSysMem *dest, char *src, uint32_t size);
int32_t hbSysReadMem(char *dest, hbSysMem *src, uint32_t size);
int32_t hbSysRegisterMem(hbSysMem *mem);
int32_t hbSysUnregisterMem(hbSysMem *mem);

#ifdef __cplusplus
}
#endif

#endif /* VDSP_HB_SYS_H_ */
