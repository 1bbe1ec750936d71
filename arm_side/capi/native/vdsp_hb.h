/*
 * vdsp_hb.h: how vdsp_hb.c names its functions, and what it offers libvdsp_hb's front
 * (arm_side/capi/front.c) and, through the front, the embedded SDK of the hbDNN functions.
 *
 * Built alone (libvdsp_client.so) the hbSys/hbDSP functions have their own names; built into
 * libvdsp_hb (VDSP_HB_PREFIXED defined) they are vdsp_native_<name>, which the front calls.
 */
#ifndef VDSP_HB_H_
#define VDSP_HB_H_

#include <stddef.h>
#include <stdint.h>

#ifdef VDSP_HB_PREFIXED
#define VDSP_HB(name) vdsp_native_##name
#else
#define VDSP_HB(name) name
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* A live buffer of the native side (its table's entry holding a range). */
typedef struct {
  uint64_t phys;       /* the buffer's */
  uint32_t size;       /* the buffer's */
  uint32_t offset;     /* of the range asked in the buffer */
  void *ddr;           /* the DDR bytes (the shared mapping) */
  void *cache;         /* the private CPU cache; NULL: uncached */
  void *vir;           /* the buffer's virAddr */
  int32_t registered;
} vdsp_hb_native_buffer;

/* What the front hands the embedded SDK (libvdsp_hb_python's vdsp_embedded_attach). */
typedef struct {
  int (*owner)(uint32_t *id, int *lock_fd, char *dir, size_t len);
  int (*find)(uint64_t phys, void *vir, uint32_t size, const char *what, vdsp_hb_native_buffer *out);
  int (*last)(char *message, size_t len);
} vdsp_hb_native_api;

/* Open the process's client (the first call's connection): 0 or the code (its text: vdsp_hb_native_last),
 * which the next call that needs the client returns once instead of connecting again. `late` (may be
 * NULL): 1 when the code is HB_DSP_RELAY_UNAVAILABLE from a relay that is there (connected) but did
 * not answer HELLO within the connect timeout, 0 otherwise (nothing serves the relay's endpoint ...). */
int vdsp_hb_native_open(int *late);
/* The open client's DDR owner: 0 with its id, lock fd and directory; -1 if none is open here. */
int vdsp_hb_native_owner(uint32_t *id, int *lock_fd, char *dir, size_t len);
/* The live buffer holding (phys, memSize size) named by vir: 0 with *out; 1 for another owner's
 * memory; a negative code (HB_SYS_INVALID_ARGUMENT: memory of this process that is not live). */
int vdsp_hb_native_find(uint64_t phys, void *vir, uint32_t size, const char *what, vdsp_hb_native_buffer *out);
/* What a submission with these parameters sends as `params` (JSON text, or the struct `param` of
 * `size` bytes of operator `cmd`): 0 with the encoded msgpack map (*len bytes, 0: none) in `out`,
 * else the code (its text: vdsp_hb_native_last). For tests of the mapping (tests/integration/test_capi_hb_native.py). */
int vdsp_hb_native_params(int32_t cmd, const void *param, uint32_t size, const char *json, void *out, size_t cap,
                          size_t *len);
/* Make `code` with `message` this thread's last failure; returns `code`. */
int vdsp_hb_native_say(int code, const char *message);
/* This thread's last failure on the native side: its code (0: none) and message. */
int vdsp_hb_native_last(char *message, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* VDSP_HB_H_ */
