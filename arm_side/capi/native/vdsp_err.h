/*
 * vdsp_err.h: how the native client core (vdsp_ddr, vdsp_link, vdsp_client) says what failed:
 * a negative code of protocol/errors.py (tests/integration/test_capi_native.py compares the values) and a
 * message saying what is wrong and what to do. Every function that can fail returns 0 or such
 * a code and, given an error struct, fills it.
 */
#ifndef VDSP_ERR_H_
#define VDSP_ERR_H_

#include "vdsp_wire.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VDSP_E_INVALID_ARGUMENT (-6000001)      /* InvalidArgument */
#define VDSP_E_OUT_OF_MEMORY (-6000007)         /* OutOfMemory: malloc failed */
#define VDSP_E_TASK_TIMEOUT (-6000008)          /* TaskTimeout: no reply within the wait */
#define VDSP_E_TASK_NUM_EXCEED_LIMIT (-6000009) /* TaskNumExceedLimit: 32 requests in flight */
#define VDSP_E_RUN_TASK_FAILED (-6000012)       /* RunTaskFailed: an unknown code from a server */
#define VDSP_E_API_USE_ERROR (-6000015)         /* ApiUseError: a client used from a fork() child */
#define VDSP_E_SYS_INVALID_ARGUMENT (-6000129)  /* SysInvalidArgument: a size out of range */
#define VDSP_E_SYS_OUT_OF_MEMORY (-6000130)     /* SysOutOfMemory: DDR file, quota, reserve */
#define VDSP_E_SYS_REGISTER_MEM_FAILED (-6000131)   /* SysRegisterMemFailed: an access list not written */
#define VDSP_E_PROTOCOL_ERROR VDSP_WIRE_E_PROTOCOL_ERROR   /* a malformed reply */
#define VDSP_E_CLAIM_REFUSED (-6000284)         /* ClaimRefused: the server refused our owner */
#define VDSP_E_INVALID_CORE (-6000261)          /* InvalidCore: no such core (direct mode) */
#define VDSP_E_CORE_OFFLINE (-6000290)          /* CoreOffline: no core answers, or it runs no firmware */
#define VDSP_E_CORE_CRASHED (-6000291)          /* CoreCrashed: its firmware crashed */
#define VDSP_E_CORE_DEAD (-6000292)             /* CoreDead: its process exited, or it hung */
#define VDSP_E_CORE_BUSY (-6000293)             /* CoreBusy: HELLO answered BUSY past the timeout */
#define VDSP_E_RELAY_UNAVAILABLE (-6000300)     /* RelayUnavailable: no relay, or it went away */
#define VDSP_E_KEY_REFUSED (-6000301)           /* KeyRefused: a tcp server did not accept our key */
#define VDSP_E_FILE_NOT_FOUND (-6000006)        /* FileNotFound: a key file that does not exist */

#define VDSP_ERR_MAX 640   /* bytes of a message, NUL included */

typedef struct {
  int code;                    /* 0 or a negative code above (or a server's) */
  char message[VDSP_ERR_MAX];  /* NUL-terminated; "" when code is 0 */
  int late;                    /* RELAY_UNAVAILABLE from a relay that is there but did not answer
                                  HELLO in time (not: nothing serves its endpoint); else 0 */
} vdsp_err;

/* Fill `err` (may be NULL) with `code` and the formatted message, `late` 0; returns `code`. */
int vdsp_fail(vdsp_err *err, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Copy a wire error into `err`; returns its code. */
int vdsp_fail_wire(vdsp_err *err, const vdsp_wire_error *wire);

#ifdef __cplusplus
}
#endif

#endif /* VDSP_ERR_H_ */
