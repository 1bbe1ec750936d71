/*
 * vdsp_ddr.h: the shared "DDR" of PROTOCOL.md §6, as a client uses it, in C with nothing but
 * libc (what vdsp_board/memory/ddr.py does for the Python SDK):
 *
 * - an owner (§6.3 step 1): a random id in [1, 2^22) claimed by the lock file
 *   vdsp-{id:06x}.lock in the DDR directory ($VDSP_SHM_DIR, else /dev/shm), made under a
 *   temporary name vdsp-{id:06x}.lock.tmp{pid} (O_CREAT|O_EXCL|O_CLOEXEC|O_NOFOLLOW, mode 0600),
 *   locked with flock(LOCK_EX) and hard-linked to the final name, so the final name never exists
 *   unlocked; an id taken (EEXIST) is given up for another. The fd holding the lock stays open
 *   (close-on-exec) for the owner's life: it is the `lock_fd` of HELLO (§5.2);
 * - segments (§6.1, §6.3 step 2): one file vdsp-{id:06x}-{offset:010x} per allocation, made
 *   exclusively (O_NOFOLLOW, mode 0600), sized to exactly the size asked (1 .. 2^32-1), its pages
 *   reserved (posix_fallocate: a full tmpfs fails the allocation, never a later write with SIGBUS)
 *   and mapped shared; its physical address is (id << 40) | offset. Offsets start at 0x1000 and
 *   advance by the size rounded up to 4096, never reused while the owner lives;
 * - the quota and the reserve of the reference SDK (§6.3, docs/commands.md): an owner holds at
 *   most VDSP_DDR_QUOTA bytes (bytes with an optional K/M/G suffix, or a share "25%" of the
 *   DDR file system; default 25 %), and an allocation must leave VDSP_DDR_RESERVE free (same
 *   forms, default 25 %) or, once less is free, at most half of what it holds and what is free.
 *   The check and the file's making hold the user's reserve lock (§6.3: flock on
 *   vdsp-reserve-{euid}.lock in the DDR directory, a regular file of ours with mode 0600, made with
 *   O_NOFOLLOW, checked to be still the file at the name once locked, unlinked before it is let
 *   go), tried for at most 1 s; past that, or when the name is another user's, without it;
 * - freeing is unlinking the file and unmapping; closing the owner unlinks its live segments,
 *   its access-list files (vdsp-{id:06x}.acl, .acl.tmp: the native core writes one only to name
 *   its CURVE key over tcp, vdsp_ddr_set_key) and then its lock file (§6.3 step 3), and closes the lock's fd. In a child made
 *   by fork() the owner is not ours: closing it there only closes the inherited fd.
 *
 * One owner is used by one thread at a time.
 */
#ifndef VDSP_DDR_H_
#define VDSP_DDR_H_

#include <stdint.h>

#include "vdsp_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VDSP_DDR_PAGE 4096u
#define VDSP_DDR_OFFSET_BITS 40
#define VDSP_DDR_MAX_OWNER (1u << 22)              /* ids are in [1, VDSP_DDR_MAX_OWNER) */
#define VDSP_DDR_FIRST_OFFSET 0x1000u
#define VDSP_DDR_MAX_ALLOC 0xffffffffu             /* hbSysAllocMem takes a uint32 size */
#define VDSP_DDR_DEFAULT_QUOTA_SHARE 25            /* percent of the DDR file system */
#define VDSP_DDR_DEFAULT_RESERVE_SHARE 25

typedef struct vdsp_ddr_owner vdsp_ddr_owner;

typedef struct {
  uint64_t phys;     /* (owner << 40) | offset */
  uint64_t offset;   /* of the segment file's name */
  uint32_t size;     /* bytes of the file and of the mapping */
  void *addr;        /* the shared mapping; NULL once freed */
} vdsp_ddr_segment;

/* Claim an owner in `directory` (NULL: $VDSP_SHM_DIR, else /dev/shm). SYS_OUT_OF_MEMORY if no
 * lock file can be made there (the message says why). */
int vdsp_ddr_open(const char *directory, vdsp_ddr_owner **out, vdsp_err *err);
uint32_t vdsp_ddr_owner_id(const vdsp_ddr_owner *owner);
int vdsp_ddr_lock_fd(const vdsp_ddr_owner *owner);

/* Name `key` (a Z85 CURVE public key) in this owner's access list (§6.7), the CURVE key that
 * speaks for it over tcp: vdsp-{id:06x}.acl written as {lock, grants: [], key} through .acl.tmp
 * (mode 0600, never through a symlink) renamed over it. 0, or SYS_REGISTER_MEM_FAILED. */
int vdsp_ddr_set_key(vdsp_ddr_owner *owner, const char *key, vdsp_err *err);
const char *vdsp_ddr_directory(const vdsp_ddr_owner *owner);

/* Allocate `size` zeroed bytes: SYS_INVALID_ARGUMENT for a size out of [1, 2^32-1] or a malformed
 * VDSP_DDR_QUOTA / VDSP_DDR_RESERVE, SYS_OUT_OF_MEMORY past the quota or the reserve or when the
 * file cannot be made, sized or mapped. */
int vdsp_ddr_alloc(vdsp_ddr_owner *owner, uint64_t size, vdsp_ddr_segment *out, vdsp_err *err);

/* Unlink and unmap a segment of this owner (then seg->addr is NULL); SYS_INVALID_ARGUMENT if it
 * is not a live segment of it. */
int vdsp_ddr_free(vdsp_ddr_owner *owner, vdsp_ddr_segment *seg, vdsp_err *err);

/* Bytes of the live segments. */
uint64_t vdsp_ddr_held(const vdsp_ddr_owner *owner);

/* Unlink every live segment and the lock (only in the process that claimed it), close the lock's
 * fd, free `owner` (NULL: nothing). Mappings the caller still uses are unmapped. */
void vdsp_ddr_close(vdsp_ddr_owner *owner);

#ifdef __cplusplus
}
#endif

#endif /* VDSP_DDR_H_ */
