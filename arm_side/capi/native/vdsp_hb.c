/*
 * vdsp_hb.c: the hbSys and hbDSP functions of hb_sys.h and hb_dsp.h, and hbDNNGetErrorDesc, in C
 * on the native client core (vdsp_client.h), with no Python in the process (issue 42). What
 * arm_side/capi/bridge.py does for the embedded library, the same codes, limits and semantics:
 *
 * - One client per process, opened by the first call that needs the SoC (relay mode over ipc or
 *   tcp with CURVE, or direct mode: vdsp_client.h); its DDR owner allocates every buffer. Nothing runs before that call: no thread, no signal handler
 *   (the program's signals stay its own: SIGINT ends it as it would without the library).
 * - Memory: a table of this process's live buffers, each known by (phyAddr, virAddr); virAddr is
 *   the DDR mapping for uncached memory, the private CPU cache (a copy the library allocates) for
 *   cached and registered memory. A struct naming a range inside a live buffer is that range;
 *   other owners' memory goes to the SoC as (phyAddr, memSize), which checks it.
 *   VDSP_STRICT_CACHE=1 (1, true, yes) reports a CLEAN forgotten before a task and a read of
 *   cached memory the DSP wrote without an INVALIDATE (HB_SYS_CACHE_NOT_FLUSHED).
 * - Tasks: handles are numbers from 0x10010 up in steps of 16, handed out once; parameters of
 *   a struct of hb_dsp_ops.h become the operator's msgpack map by the table generated from the
 *   contract (vdsp_hb_tables.h: arm_side.capi.opsgen.param_table), as the bridge maps them.
 * - Threads: one mutex guards the state. A thread waiting for a task reads the link for every
 *   waiter (vdsp_client_pump) while the others sleep on a condition; a thread that needs the
 *   client while one reads wakes it through an eventfd, so a submission never waits for a reply.
 * - fork(): a child of a process that used the library gets HB_DNN_MULTI_PROGRESS_USE_ERROR from
 *   every call, at once (its sockets and DDR owner are the parent's).
 * - Exit: an atexit handler frees this process's buffers and closes the client (DISCONNECT, the
 *   DDR owner's files unlinked); SIGKILL leaves nothing either (the SoC reclaims a dead owner).
 *
 * Not here (libvdsp_hb's front gives those processes the embedded SDK): relay autostart (relay
 * mode over ipc, when no relay answers the first HELLO).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hb_dnn.h"
#include "hb_dsp.h"
#include "hb_sys.h"
#include "vdsp_client.h"
#include "vdsp_hb.h"
#include "vdsp_json.h"

struct vdsp_error_text {
  int32_t code;
  const char *text;
};
struct vdsp_param_member {
  int32_t cmd;
  size_t size;          /* sizeof the struct */
  const char *strct;    /* its name */
  const char *op;       /* the operator's name */
  const char *param;    /* the parameter's name */
  const char *cname;    /* the member's name */
  int kind;             /* arm_side.capi.opsgen.PARAM_KINDS */
  size_t offset;
  int length;           /* a fixed list's length (0: a pointer list, with a count) */
  size_t count_offset;  /* a pointer list's int32_t count */
};
struct vdsp_op_buffers {  /* an operator with a struct: its most inputs and outputs (the contract's) */
  int32_t cmd;
  int in_max, out_max;
};
struct vdsp_name {
  int value;
  const char *name;
};
enum { K_INT = 1, K_FLOAT, K_BOOL, K_INT_LIST, K_FLOAT_LIST, K_STR, K_IMAGE, K_TENSOR };
#include "vdsp_hb_tables.h"

#define MULTI_PROGRESS (-6000016)   /* HB_DNN_MULTI_PROGRESS_USE_ERROR */
#define MAX_BUFFERS 64              /* buffers of one task */
#define MAX_TASKS (1 << 16)         /* live task handles */
#define MAX_TEXT (1 << 16)          /* bytes of a string parameter or a value's name */
#define MAX_LIST (1 << 20)          /* values of a list parameter */
#define MAX_JSON (1 << 20)          /* bytes of JSON parameters */
#define MAX_QUANT (1 << 16)         /* quantisation values of one tensor descriptor */
#define TEXTS_KEPT 1024             /* error descriptions returned that stay valid */
#define CANCEL_WAIT_MS 5000         /* for a CANCEL's answer, as the Python SDK */
#define FIRST_HANDLE 0x10010u
#define PACKED_ALIGN 64             /* HB_DSP_PACKED_ALIGN (arm_side/capi/packing.py) */
#define PACKED_MAX 8                /* HB_DSP_PACKED_MAX_BUFFERS */
#define PACKED_TABLE (8 + 8 * PACKED_MAX)  /* sizeof(hbDSPPackedBuffers) */

/* --- state --------------------------------------------------------------------------------- */

typedef struct {
  uint64_t phys;
  uint32_t size;
  void *vir;             /* what the program sees: cache, else ddr */
  uint8_t *ddr;          /* the DDR bytes */
  uint8_t *cache;        /* the private CPU cache (cached, registered); NULL: uncached */
  int registered;
  int device_written;    /* strict mode: the DSP wrote the DDR since the last whole INVALIDATE */
  vdsp_ddr_segment seg;  /* allocated memory's segment */
  void *map;             /* registered memory's own mapping of the segment, and its length */
  size_t map_len;
} buffer;

typedef struct {
  uintptr_t number;
  uint64_t msg_id;
  int done, code;
  char message[VDSP_ERR_MAX];
  vdsp_wire_body *body;               /* a RESULT's */
  size_t n_out;
  uint64_t out_phys[MAX_BUFFERS];     /* whole buffers written (strict mode: then device_written) */
  void *out_vir[MAX_BUFFERS];
} task;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t read_done = PTHREAD_COND_INITIALIZER;
static vdsp_client *client;            /* guarded by lock */
static pid_t client_pid;
static int strict, reading, wake_fd = -1, exit_set;
static int pending;                    /* threads waiting for the lock while one reads (atomic) */
static int open_failed;                /* vdsp_hb_native_open's failure, the next call's answer (once) */
static int open_late;                  /* the last open's failure came from a relay that did not answer in time */
static buffer **buffers;
static size_t n_buffers, cap_buffers;
static task **tasks;
static size_t n_tasks, cap_tasks;
static uintptr_t next_handle = FIRST_HANDLE;
static char *texts[TEXTS_KEPT];
static size_t next_text;

static __thread int last_code;
static __thread char last_message[VDSP_ERR_MAX];

static int fail(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static int fail(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_message, sizeof last_message, fmt, ap);
  va_end(ap);
  last_code = code;
  return code;
}

static int fail_err(const vdsp_err *e) { return fail(e->code, "%s", e->message); }

static void enter(void) {
  if (pthread_mutex_trylock(&lock) == 0) return;
  __atomic_add_fetch(&pending, 1, __ATOMIC_SEQ_CST);
  if (wake_fd >= 0) eventfd_write(wake_fd, 1);   /* the reader returns and lets us in */
  pthread_mutex_lock(&lock);
  __atomic_sub_fetch(&pending, 1, __ATOMIC_SEQ_CST);
}

static int leave(int rc) {
  pthread_mutex_unlock(&lock);
  return rc;
}

static void before_fork(void) { pthread_mutex_lock(&lock); }
static void after_fork(void) { pthread_mutex_unlock(&lock); }

static void on_exit_close(void);

static int strict_setting(void) {
  const char *v = getenv("VDSP_STRICT_CACHE");
  if (v == NULL) return 0;
  while (*v == ' ' || *v == '\t') v++;
  char word[8] = {0};
  size_t n = 0;
  while (v[n] && v[n] != ' ' && v[n] != '\t' && v[n] != '\n' && n < sizeof word - 1) {
    word[n] = (char)(v[n] >= 'A' && v[n] <= 'Z' ? v[n] + 32 : v[n]);
    n++;
  }
  return strcmp(word, "1") == 0 || strcmp(word, "true") == 0 || strcmp(word, "yes") == 0;
}

static void at_exit_once(void) {   /* under lock */
  if (exit_set) return;
  exit_set = 1;
  pthread_atfork(before_fork, after_fork, after_fork);
  atexit(on_exit_close);
}

/* The client, opened by the first call that needs it (under lock). */
static int connected(void) {
  if (client != NULL) {
    if (client_pid == getpid()) return 0;
    return fail(MULTI_PROGRESS, "libvdsp_hb was used by process %ld, whose child made by fork() this process is: "
                "its connection and DDR owner are the parent's (call the library only in the parent, or exec a "
                "program in the child)", (long)client_pid);
  }
  at_exit_once();
  if (open_failed != 0) {   /* the front's open just failed (its message is this thread's): not again at once */
    int code = open_failed;
    open_failed = 0;
    return code;
  }
  vdsp_err e;
  if (vdsp_client_open(NULL, &client, &e) != 0) {
    open_late = e.late;
    return fail_err(&e);
  }
  client_pid = getpid();
  strict = strict_setting();
  if (wake_fd < 0) wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  return 0;
}

static uint32_t my_owner(void) { return vdsp_ddr_owner_id(vdsp_client_ddr(client)); }

static void drop_task(task *t) {
  vdsp_wire_body_free(t->body);
  free(t);
}

static void free_buffer(buffer *b) {
  free(b->cache);
  if (b->map != NULL) munmap(b->map, b->map_len);
  free(b);
}

static void on_exit_close(void) {
  pthread_mutex_lock(&lock);
  if (client != NULL && client_pid == getpid()) {
    for (size_t i = 0; i < n_tasks; i++) drop_task(tasks[i]);
    for (size_t i = 0; i < n_buffers; i++) free_buffer(buffers[i]);   /* segments: closing the owner */
    n_tasks = n_buffers = 0;
    vdsp_client_close(client);
    client = NULL;
  }
  free(tasks), free(buffers);
  tasks = NULL, buffers = NULL, cap_tasks = cap_buffers = 0;
  for (size_t i = 0; i < TEXTS_KEPT; i++) free(texts[i]), texts[i] = NULL;
  if (wake_fd >= 0) close(wake_fd), wake_fd = -1;
  pthread_mutex_unlock(&lock);
}

static int grow(void ***array, size_t *cap, size_t n) {
  if (n < *cap) return 0;
  size_t want = *cap ? *cap * 2 : 16;
  void **p = realloc(*array, want * sizeof *p);
  if (p == NULL) return -1;
  *array = p;
  *cap = want;
  return 0;
}

/* --- memory -------------------------------------------------------------------------------- */

static buffer *exact(uint64_t phys, void *vir) {
  for (size_t i = 0; i < n_buffers; i++)
    if (buffers[i]->phys == phys && buffers[i]->vir == vir) return buffers[i];
  return NULL;
}

/* The live buffer of this process holding the struct's range (*b NULL: another owner's), the
 * range's offset in it; SYS_INVALID_ARGUMENT for memory of this process that is not live. */
static int lookup(const hbSysMem *m, const char *what, buffer **out, uint32_t *offset) {
  uint64_t phys = m->phyAddr, size = m->memSize;
  buffer *b = exact(phys, m->virAddr);
  *offset = 0;
  if (b != NULL && size <= b->size) {
    *out = b;
    return 0;
  }
  buffer *best = NULL, *around = NULL;
  int best_rank = 4;
  for (size_t i = 0; i < n_buffers; i++) {
    buffer *c = buffers[i];
    if (c->phys <= phys && phys < c->phys + c->size) around = c;
    if (!(c->phys <= phys && phys + size <= c->phys + c->size)) continue;
    int rank = 2 * c->registered + ((uint8_t *)c->vir + (phys - c->phys) != (uint8_t *)m->virAddr);
    if (rank < best_rank) best = c, best_rank = rank;
  }
  if (best != NULL) {
    *out = best;
    *offset = (uint32_t)(phys - best->phys);
    return 0;
  }
  *out = NULL;
  if ((phys >> VDSP_DDR_OFFSET_BITS) != my_owner()) return 0;
  if (around != NULL)
    return fail(HB_SYS_INVALID_ARGUMENT, "%s (hbSysMem at 0x%llx, %llu bytes) runs past the end of its buffer "
                "(0x%llx, %u bytes): its memSize is too large", what, (unsigned long long)phys,
                (unsigned long long)size, (unsigned long long)around->phys, around->size);
  return fail(HB_SYS_INVALID_ARGUMENT, "%s (hbSysMem at 0x%llx, %llu bytes) is not allocated or registered in this "
              "process (or was freed)", what, (unsigned long long)phys, (unsigned long long)size);
}

static int live(const hbSysMem *m, const char *what, buffer **b, uint32_t *offset) {
  if (m == NULL) return fail(HB_SYS_INVALID_ARGUMENT, "%s is NULL", what);
  int rc = lookup(m, what, b, offset);
  if (rc == 0 && *b == NULL)
    return fail(HB_SYS_INVALID_ARGUMENT, "%s (hbSysMem at 0x%llx) is not memory of this process: register it first "
                "(hbSysRegisterMem)", what, (unsigned long long)m->phyAddr);
  return rc;
}

static int track(buffer *b, hbSysMem *m) {
  if (grow((void ***)&buffers, &cap_buffers, n_buffers) != 0) return -1;
  buffers[n_buffers++] = b;
  m->phyAddr = b->phys;
  m->virAddr = b->vir;
  m->memSize = b->size;
  return 0;
}

static int alloc(hbSysMem *mem, uint32_t size, int cached) {
  if (mem == NULL) return fail(HB_SYS_INVALID_ARGUMENT, "mem is NULL");
  enter();
  int rc = connected();
  if (rc != 0) return leave(rc);
  buffer *b = calloc(1, sizeof *b);
  vdsp_err e;
  if (b == NULL) return leave(fail(HB_SYS_OUT_OF_MEMORY, "out of memory"));
  rc = vdsp_ddr_alloc(vdsp_client_ddr(client), size, &b->seg, &e);
  if (rc != 0) {
    free(b);
    return leave(fail_err(&e));
  }
  b->phys = b->seg.phys;
  b->size = size;
  b->ddr = b->seg.addr;
  if (cached && (b->cache = calloc(1, size)) == NULL) rc = fail(HB_SYS_OUT_OF_MEMORY, "out of memory for the cache");
  b->vir = cached ? (void *)b->cache : (void *)b->ddr;
  if (rc == 0 && track(b, mem) != 0) rc = fail(HB_SYS_OUT_OF_MEMORY, "out of memory");
  if (rc != 0) {
    vdsp_ddr_free(vdsp_client_ddr(client), &b->seg, NULL);
    free_buffer(b);
  }
  return leave(rc);
}

int32_t VDSP_HB(hbSysAllocMem)(hbSysMem *mem, uint32_t size) { return alloc(mem, size, 0); }
int32_t VDSP_HB(hbSysAllocCachedMem)(hbSysMem *mem, uint32_t size) { return alloc(mem, size, 1); }

int32_t VDSP_HB(hbSysFlushMem)(hbSysMem *mem, int32_t flag) {
  enter();
  int rc = connected();
  buffer *b;
  uint32_t off;
  if (rc == 0) rc = live(mem, "mem", &b, &off);
  if (rc != 0) return leave(rc);
  if (flag != HB_SYS_MEM_CACHE_INVALIDATE && flag != HB_SYS_MEM_CACHE_CLEAN)
    return leave(fail(HB_SYS_INVALID_ARGUMENT, "flag %d must be HB_SYS_MEM_CACHE_INVALIDATE (1) or "
                      "HB_SYS_MEM_CACHE_CLEAN (2)", (int)flag));
  uint32_t size = mem->memSize;
  if (b->cache != NULL) {
    if (flag == HB_SYS_MEM_CACHE_CLEAN) {
      memcpy(b->ddr + off, b->cache + off, size);
    } else {
      memcpy(b->cache + off, b->ddr + off, size);
      if (off == 0 && size == b->size) b->device_written = 0;
    }
  }
  return leave(0);
}

static void untrack(buffer *b) {
  for (size_t i = 0; i < n_buffers; i++)
    if (buffers[i] == b) {
      buffers[i] = buffers[--n_buffers];
      return;
    }
}

static int release_mem(hbSysMem *mem, int registered) {
  if (mem == NULL) return fail(HB_SYS_INVALID_ARGUMENT, "mem is NULL");
  enter();
  int rc = connected();
  if (rc != 0) return leave(rc);
  buffer *b = exact(mem->phyAddr, mem->virAddr);
  if (b == NULL)
    return leave(fail(HB_SYS_INVALID_ARGUMENT, "hbSysMem at 0x%llx is not a buffer this process allocated or "
                      "registered (freed already, or a copy naming part of one)", (unsigned long long)mem->phyAddr));
  if (registered && !b->registered)
    return leave(fail(HB_SYS_INVALID_ARGUMENT, "memory 0x%llx was allocated, not registered: free it "
                      "(hbSysFreeMem)", (unsigned long long)b->phys));
  untrack(b);
  if (!b->registered) vdsp_ddr_free(vdsp_client_ddr(client), &b->seg, NULL);
  free_buffer(b);
  mem->virAddr = NULL;
  return leave(0);
}

int32_t VDSP_HB(hbSysFreeMem)(hbSysMem *mem) { return release_mem(mem, 0); }
int32_t VDSP_HB(hbSysUnregisterMem)(hbSysMem *mem) { return release_mem(mem, 1); }

/* hbSysWriteMem (into 1) / hbSysReadMem: `size` bytes between `ptr` and `m`'s range, through the CPU's view. */
static int cpu_copy(hbSysMem *m, const char *m_name, char *ptr, const char *ptr_name, uint32_t size, int into) {
  enter();
  int rc = connected();
  buffer *b;
  uint32_t off;
  if (rc == 0) rc = live(m, m_name, &b, &off);
  if (rc != 0) return leave(rc);
  if (ptr == NULL) return leave(fail(HB_SYS_INVALID_ARGUMENT, "%s is NULL", ptr_name));
  if (size > m->memSize)
    return leave(fail(HB_SYS_INVALID_ARGUMENT, "size %u is larger than %s's memSize %u", size, m_name, m->memSize));
  if (!into && strict && b->device_written)
    return leave(fail(HB_SYS_CACHE_NOT_FLUSHED, "memory 0x%llx (%u bytes) was written by the DSP; call "
                      "hbSysFlushMem(HB_SYS_MEM_CACHE_INVALIDATE) before reading", (unsigned long long)b->phys,
                      b->size));
  if (into) memcpy((uint8_t *)b->vir + off, ptr, size);
  else memcpy(ptr, (uint8_t *)b->vir + off, size);
  return leave(0);
}

int32_t VDSP_HB(hbSysWriteMem)(hbSysMem *dest, char *src, uint32_t size) {
  return cpu_copy(dest, "dest", src, "src", size, 1);
}
int32_t VDSP_HB(hbSysReadMem)(char *dest, hbSysMem *src, uint32_t size) {
  return cpu_copy(src, "src", dest, "dest", size, 0);
}

/* --- another owner's memory: its grants (PROTOCOL.md §6.4, vdsp_board/memory/acl.py) ---------------- */

#define MAX_ACL_BYTES (16 << 10)
#define ANY_OWNER 0

/* 1 if the lock file at `path` is inode `inode` and held (its owner lives), else 0. */
static int lock_alive(const char *path, uint64_t inode) {
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return 0;
  struct stat st;
  int alive = 0;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_ino == inode)
    alive = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;   /* held exclusively */
  close(fd);
  return alive;
}

/* 1 if `owner`'s access list in `dir` grants [offset, offset + size) to `me` (or to any owner). */
static int granted(const char *dir, uint32_t owner, uint32_t me, uint64_t offset, uint64_t size) {
  char path[4096];
  snprintf(path, sizeof path, "%s/vdsp-%06x.acl", dir, owner);
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return 0;
  struct stat st;
  uint8_t data[MAX_ACL_BYTES + 1];
  ssize_t n = -1;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid()) n = read(fd, data, sizeof data);
  close(fd);
  vdsp_wire_body *body = NULL;
  vdsp_wire_error werr;
  if (n <= 0 || n > MAX_ACL_BYTES || vdsp_wire_body_decode(data, (size_t)n, &body, &werr) != 0) return 0;
  const vdsp_wire_value *root = vdsp_wire_body_root(body), *grants = vdsp_wire_map_get(root, "grants");
  int64_t lock = -1;
  int ok = 0;
  snprintf(path, sizeof path, "%s/vdsp-%06x.lock", dir, owner);
  if (vdsp_wire_get_int(vdsp_wire_map_get(root, "lock"), &lock) && lock >= 0 && grants != NULL &&
      grants->kind == VDSP_WIRE_ARRAY && lock_alive(path, (uint64_t)lock)) {
    for (uint32_t i = 0; i < grants->len && !ok; i++) {
      const vdsp_wire_value *g = &grants->v.items[i];
      int64_t f[3];
      if (g->kind != VDSP_WIRE_ARRAY || g->len != 3) break;   /* a malformed list grants nothing */
      int good = 1;
      for (int k = 0; k < 3; k++) good &= vdsp_wire_get_int(&g->v.items[k], &f[k]);
      if (!good || f[0] <= 0 || f[1] <= 0 || f[2] < 0) break;
      ok = (f[2] == ANY_OWNER || f[2] == me) && (uint64_t)f[0] <= offset && offset + size <= (uint64_t)(f[0] + f[1]);
    }
  }
  vdsp_wire_body_free(body);
  return ok;
}

/* The base offset of `owner`'s segment with the largest base <= `offset` (it may not hold it:
 * the caller checks its size); 0 if there is one. */
static int find_segment(const char *dir, uint32_t owner, uint64_t offset, uint64_t *base) {
  DIR *d = opendir(dir);
  if (d == NULL) return -1;
  char prefix[16];
  snprintf(prefix, sizeof prefix, "vdsp-%06x-", owner);
  struct dirent *e;
  int found = -1;
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, prefix, 12) != 0 || strlen(e->d_name) != 22) continue;
    char *end;
    unsigned long long b = strtoull(e->d_name + 12, &end, 16);
    if (*end != '\0' || b > offset || (found == 0 && b <= *base)) continue;
    *base = b;
    found = 0;
  }
  closedir(d);
  return found;
}

/* The segment holding the range (this process's, or another owner's within a grant to this
 * process's owner) mapped again; its cache a copy of the DDR. */
int32_t VDSP_HB(hbSysRegisterMem)(hbSysMem *mem) {
  if (mem == NULL) return fail(HB_SYS_INVALID_ARGUMENT, "mem is NULL");
  enter();
  int rc = connected();
  if (rc != 0) return leave(rc);
  uint64_t phys = mem->phyAddr, size = mem->memSize, offset = phys & (((uint64_t)1 << VDSP_DDR_OFFSET_BITS) - 1);
  uint32_t me = my_owner(), owner = (uint32_t)(phys >> VDSP_DDR_OFFSET_BITS);
  const char *dir = vdsp_ddr_directory(vdsp_client_ddr(client));
  if (size == 0) return leave(fail(HB_SYS_INVALID_ARGUMENT, "memSize 0: a size must be in 1..4294967295"));
  if (owner == 0 || owner >= VDSP_DDR_MAX_OWNER || offset == 0)
    return leave(fail(HB_SYS_INVALID_ARGUMENT, "phyAddr 0x%llx is not a DDR address", (unsigned long long)phys));
  if (owner != me && !granted(dir, owner, me, offset, size))
    return leave(fail(HB_SYS_REGISTER_MEM_FAILED, "0x%llx size %llu: memory of owner 0x%06x is not granted to this "
                      "process's owner 0x%06x (its owner must grant it first)", (unsigned long long)phys,
                      (unsigned long long)size, owner, me));
  uint64_t base = 0;
  if (find_segment(dir, owner, offset, &base) != 0)
    return leave(fail(HB_SYS_REGISTER_MEM_FAILED, "no DDR at 0x%llx size %llu", (unsigned long long)phys,
                      (unsigned long long)size));
  char path[4096];
  snprintf(path, sizeof path, "%s/vdsp-%06x-%010llx", dir, owner, (unsigned long long)base);
  int fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
    if (fd >= 0) close(fd);
    return leave(fail(HB_SYS_REGISTER_MEM_FAILED, "no DDR at 0x%llx size %llu", (unsigned long long)phys,
                      (unsigned long long)size));
  }
  if (offset + size > base + (uint64_t)st.st_size) {
    close(fd);
    return leave(fail(HB_SYS_REGISTER_MEM_FAILED, "0x%llx size %llu exceeds segment 0x%llx of %lld bytes",
                      (unsigned long long)phys, (unsigned long long)size,
                      (unsigned long long)(((uint64_t)owner << VDSP_DDR_OFFSET_BITS) | base), (long long)st.st_size));
  }
  size_t len = (size_t)st.st_size;
  void *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int saved = errno;
  close(fd);
  if (map == MAP_FAILED)
    return leave(fail(HB_SYS_REGISTER_MEM_FAILED, "cannot map DDR at 0x%llx size %llu: %s", (unsigned long long)phys,
                      (unsigned long long)size, strerror(saved)));
  buffer *b = calloc(1, sizeof *b);
  if (b == NULL) {
    munmap(map, len);
    return leave(fail(HB_SYS_OUT_OF_MEMORY, "out of memory"));
  }
  b->map = map;
  b->map_len = len;
  b->phys = phys;
  b->size = (uint32_t)size;
  b->registered = 1;
  b->ddr = (uint8_t *)map + (offset - base);
  b->cache = malloc(size);
  if (b->cache == NULL || (memcpy(b->cache, b->ddr, size), b->vir = b->cache, track(b, mem)) != 0) {
    free_buffer(b);
    return leave(fail(HB_SYS_OUT_OF_MEMORY, "out of memory"));
  }
  return leave(0);
}

/* --- parameters ---------------------------------------------------------------------------- */

/* 1 if the member is sent (a NULL pointer, an image of format 0 and a tensor of no dimensions are not). */
static int sent(const struct vdsp_param_member *m, const uint8_t *p) {
  if (m->kind == K_STR || ((m->kind == K_INT_LIST || m->kind == K_FLOAT_LIST) && m->length == 0)) {
    const void *ptr;
    memcpy(&ptr, p + m->offset, sizeof ptr);
    return ptr != NULL;
  }
  if (m->kind == K_IMAGE) return ((const hbDSPImage *)(const void *)(p + m->offset))->format != 0;
  if (m->kind == K_TENSOR)
    return ((const hbDNNTensorProperties *)(const void *)(p + m->offset))->validShape.numDimensions != 0;
  return 1;
}

static const char *name_of(const struct vdsp_name *table, size_t n, int value) {
  for (size_t i = 0; i < n; i++)
    if (table[i].value == value) return table[i].name;
  return NULL;
}
#define NAME_OF(table, value) name_of(table, sizeof table / sizeof *table, value)

static int quant_array(const struct vdsp_param_member *m, const char *what, const void *data, int32_t count) {
  if (count < 0 || count > MAX_QUANT)
    return fail(HB_DNN_INVALID_ARGUMENT, "%s.%s.%s length %d must be in 0..%d", m->strct, m->cname, what, (int)count,
                MAX_QUANT);
  if (count && data == NULL)
    return fail(HB_DNN_INVALID_ARGUMENT, "%s.%s.%s data is NULL but its length is %d", m->strct, m->cname, what,
                (int)count);
  return 0;
}

/* A tensor descriptor as arm_side.nn.tensor.TensorProperties.to_wire (an image input's as
 * arm_side.dnn.props.ImageProperties's) writes it; the firmware checks the rest. */
static int put_tensor(vdsp_wire_writer *w, const struct vdsp_param_member *m, const hbDNNTensorProperties *cp) {
  int32_t n = cp->validShape.numDimensions, na = cp->alignedShape.numDimensions;
  if (n < 1 || n > VDSP_MAX_DIMS)
    return fail(HB_DNN_INVALID_ARGUMENT, "%s.%s.validShape.numDimensions %d must be in 1..%d", m->strct, m->cname,
                (int)n, VDSP_MAX_DIMS);
  if (na != n)
    return fail(HB_DNN_INVALID_ARGUMENT, "%s.%s.alignedShape.numDimensions %d differs from validShape's %d", m->strct,
                m->cname, (int)na, (int)n);
  const char *layout = NAME_OF(vdsp_layouts, cp->tensorLayout);
  if (layout == NULL)
    return fail(HB_DNN_INVALID_ARGUMENT, "%s.%s: %d is not a valid Layout", m->strct, m->cname, (int)cp->tensorLayout);
  int image = cp->tensorType >= 0 && cp->tensorType <= VDSP_MAX_IMAGE_TYPE;
  const char *dtype = image ? NAME_OF(vdsp_image_types, cp->tensorType) : NAME_OF(vdsp_data_types, cp->tensorType);
  if (dtype == NULL)
    return fail(HB_DNN_INVALID_ARGUMENT, "%s.%s: %d is not a valid DataType", m->strct, m->cname, (int)cp->tensorType);
  if (image && n < 4)
    return fail(HB_DNN_INVALID_ARGUMENT, "%s.%s: an image descriptor has 4 dimensions (NCHW), not %d", m->strct,
                m->cname, (int)n);
  int quant = image ? 0 : (int)cp->quantiType;
  if (quant < 0 || quant > 2)
    return fail(HB_DNN_INVALID_ARGUMENT, "%s.%s: %d is not a valid QuantiType", m->strct, m->cname, quant);
  int rc = quant == 1 ? quant_array(m, "shift", cp->shift.shiftData, cp->shift.shiftLen) : 0;
  if (rc == 0 && quant == 2) rc = quant_array(m, "scale", cp->scale.scaleData, cp->scale.scaleLen);
  if (rc == 0 && quant == 2) rc = quant_array(m, "scale.zeroPoint", cp->scale.zeroPointData, cp->scale.zeroPointLen);
  if (rc != 0) return rc;
  const int32_t *shapes[3] = {cp->validShape.dimensionSize, cp->alignedShape.dimensionSize, cp->stride};
  const char *keys[3] = {"valid_shape", "aligned_shape", "stride"};
  vdsp_wire_put_map(w, 7);
  vdsp_wire_put_cstr(w, "dtype");
  vdsp_wire_put_cstr(w, dtype);
  vdsp_wire_put_cstr(w, "layout");
  vdsp_wire_put_cstr(w, layout);
  for (int k = 0; k < 3; k++) {
    vdsp_wire_put_cstr(w, keys[k]);
    vdsp_wire_put_array(w, (uint32_t)n);
    for (int32_t i = 0; i < n; i++) vdsp_wire_put_int(w, shapes[k][i]);
  }
  vdsp_wire_put_cstr(w, "aligned_byte_size");
  vdsp_wire_put_int(w, image ? (int64_t)cp->alignedShape.dimensionSize[3] * cp->validShape.dimensionSize[2] * 3 / 2
                             : (int64_t)cp->stride[0] * cp->alignedShape.dimensionSize[0]);
  vdsp_wire_put_cstr(w, "quant");
  vdsp_wire_put_map(w, quant == 0 ? 1 : quant == 1 ? 3 : 4);
  vdsp_wire_put_cstr(w, "type");
  vdsp_wire_put_cstr(w, quant == 0 ? "NONE" : quant == 1 ? "SHIFT" : "SCALE");
  if (quant == 1) {
    vdsp_wire_put_cstr(w, "shift");
    vdsp_wire_put_array(w, (uint32_t)cp->shift.shiftLen);
    for (int32_t i = 0; i < cp->shift.shiftLen; i++) vdsp_wire_put_int(w, cp->shift.shiftData[i]);
  } else if (quant == 2) {
    int32_t count = cp->scale.scaleLen;
    vdsp_wire_put_cstr(w, "scale");
    vdsp_wire_put_array(w, (uint32_t)count);
    for (int32_t i = 0; i < count; i++) vdsp_wire_put_double(w, cp->scale.scaleData[i]);
    vdsp_wire_put_cstr(w, "zero_point");   /* none given: zeros, one per scale */
    int32_t zp = cp->scale.zeroPointLen ? cp->scale.zeroPointLen : count;
    vdsp_wire_put_array(w, (uint32_t)zp);
    for (int32_t i = 0; i < zp; i++) vdsp_wire_put_int(w, cp->scale.zeroPointLen ? cp->scale.zeroPointData[i] : 0);
  }
  if (quant != 0) {
    vdsp_wire_put_cstr(w, "axis");
    vdsp_wire_put_int(w, cp->quantizeAxis);
  }
  return 0;
}

static int put_member(vdsp_wire_writer *w, const struct vdsp_param_member *m, const uint8_t *p) {
  const uint8_t *at = p + m->offset;
  int64_t i64;
  double f64;
  int32_t i32;
  vdsp_wire_put_cstr(w, m->param);
  switch (m->kind) {
    case K_INT:
      memcpy(&i64, at, sizeof i64);
      return vdsp_wire_put_int(w, i64);
    case K_FLOAT:
      memcpy(&f64, at, sizeof f64);
      return vdsp_wire_put_double(w, f64);
    case K_BOOL:
      memcpy(&i32, at, sizeof i32);
      return vdsp_wire_put_bool(w, i32 != 0);
    case K_STR: {
      const char *s;
      memcpy(&s, at, sizeof s);
      size_t n = strnlen(s, MAX_TEXT + 1);
      if (n > MAX_TEXT)
        return fail(HB_DNN_INVALID_ARGUMENT, "%s.%s is longer than %d bytes (or not NUL-terminated)", m->strct,
                    m->cname, MAX_TEXT);
      return vdsp_wire_put_str(w, s, n);
    }
    case K_INT_LIST:
    case K_FLOAT_LIST: {
      const uint8_t *values = at;
      int32_t count = m->length;
      if (m->length == 0) {
        memcpy(&values, at, sizeof values);
        memcpy(&count, p + m->count_offset, sizeof count);
        if (count < 0 || count > MAX_LIST)
          return fail(HB_DNN_INVALID_ARGUMENT, "%s.%s_count %d must be in 0..%d", m->strct, m->cname, (int)count,
                      MAX_LIST);
      }
      vdsp_wire_put_array(w, (uint32_t)count);
      for (int32_t i = 0; i < count; i++) {
        if (m->kind == K_INT_LIST) {
          memcpy(&i64, values + 8 * (size_t)i, sizeof i64);
          vdsp_wire_put_int(w, i64);
        } else {
          memcpy(&f64, values + 8 * (size_t)i, sizeof f64);
          vdsp_wire_put_double(w, f64);
        }
      }
      return 0;
    }
    case K_IMAGE: {
      hbDSPImage img;
      memcpy(&img, at, sizeof img);
      int n_formats = (int)(sizeof vdsp_image_formats / sizeof *vdsp_image_formats);
      if (img.format < 1 || img.format >= n_formats)
        return fail(HB_DNN_INVALID_ARGUMENT, "%s.%s.format %d is not an hbDSPImageFormat", m->strct, m->cname,
                    (int)img.format);
      vdsp_wire_put_map(w, 3u + (img.stride != 0) + (img.hasRoi != 0));
      vdsp_wire_put_cstr(w, "format");
      vdsp_wire_put_cstr(w, vdsp_image_formats[img.format]);
      vdsp_wire_put_cstr(w, "width");
      vdsp_wire_put_int(w, img.width);
      vdsp_wire_put_cstr(w, "height");
      vdsp_wire_put_int(w, img.height);
      if (img.stride) {
        vdsp_wire_put_cstr(w, "stride");
        vdsp_wire_put_int(w, img.stride);
      }
      if (img.hasRoi) {
        vdsp_wire_put_cstr(w, "roi");
        vdsp_wire_put_array(w, 4);
        vdsp_wire_put_int(w, img.roi.left);
        vdsp_wire_put_int(w, img.roi.top);
        vdsp_wire_put_int(w, img.roi.right);
        vdsp_wire_put_int(w, img.roi.bottom);
      }
      return 0;
    }
    default: {
      hbDNNTensorProperties props;
      memcpy(&props, at, sizeof props);
      return put_tensor(w, m, &props);
    }
  }
}

/* The parameters of `param` (a struct of `cmd`) into `w`, an encoded msgpack map. */
static int struct_params(vdsp_wire_writer *w, int32_t cmd, const void *param, uint32_t size) {
  const struct vdsp_param_member *first = NULL;
  size_t n = 0;
  for (size_t i = 0; i < sizeof vdsp_param_members / sizeof *vdsp_param_members; i++)
    if (vdsp_param_members[i].cmd == cmd) {
      if (first == NULL) first = &vdsp_param_members[i];
      n++;
    }
  if (first == NULL)
    return fail(HB_DNN_INVALID_ARGUMENT, "operator 0x%04x has no parameter struct in hb_dsp_ops.h: pass its "
                "parameters with hbDSPRpcV2Json", (unsigned)cmd & 0xffffffffu);
  if (size != first->size)
    return fail(HB_DNN_INVALID_ARGUMENT, "paramSize %u is not sizeof(%s) = %zu: pass the struct of operator 0x%04x "
                "(%s)", size, first->strct, first->size, (unsigned)cmd, first->op);
  const uint8_t *p = param;
  uint32_t count = 0;
  for (size_t i = 0; i < n; i++) count += (uint32_t)sent(&first[i], p);
  vdsp_wire_put_map(w, count);
  for (size_t i = 0; i < n; i++) {
    if (!sent(&first[i], p)) continue;
    int rc = put_member(w, &first[i], p);
    if (rc != 0) return rc;
  }
  return 0;
}

/* The parameters of a submission (JSON text, or a struct of `cmd`, or none) into `w`: 0 with
 * *params (NULL: none) and *len, else the code. */
static int encode_params(vdsp_wire_writer *w, int32_t cmd, const void *param, uint32_t size, const char *json,
                         const uint8_t **params, size_t *len) {
  vdsp_wire_error werr;
  char why[VDSP_ERR_MAX];
  *params = NULL;
  *len = 0;
  if (json != NULL) {
    size_t n = strnlen(json, MAX_JSON + 1);
    if (n > MAX_JSON) return fail(HB_DNN_INVALID_ARGUMENT, "paramJson is longer than %d bytes", MAX_JSON);
    if (vdsp_json_to_msgpack(json, n, w, why, sizeof why) != 0) return fail(HB_DNN_INVALID_ARGUMENT, "%s", why);
  } else if (param != NULL) {
    int rc = struct_params(w, cmd, param, size);
    if (rc != 0) return rc;
  } else {
    return 0;
  }
  return vdsp_wire_writer_finish(w, params, len, &werr) != 0 ? fail(werr.code, "%s", werr.message) : 0;
}

int vdsp_hb_native_params(int32_t cmd, const void *param, uint32_t size, const char *json, void *out, size_t cap,
                          size_t *len) {
  vdsp_wire_writer *w = vdsp_wire_writer_new();
  const uint8_t *params;
  int rc = w != NULL ? encode_params(w, cmd, param, size, json, &params, len) : HB_DNN_OUT_OF_MEMORY;
  if (rc == 0 && *len > cap) rc = fail(HB_DNN_INVALID_ARGUMENT, "%zu bytes do not fit in %zu", *len, cap);
  if (rc == 0 && *len) memcpy(out, params, *len);
  vdsp_wire_writer_free(w);
  return rc;
}

/* --- tasks --------------------------------------------------------------------------------- */

static task *find_task(uintptr_t number) {
  for (size_t i = 0; i < n_tasks; i++)
    if (tasks[i]->number == number) return tasks[i];
  return NULL;
}

static int not_a_task(uintptr_t number, const char *when) {
  if (number == 0)
    return fail(HB_DNN_INVALID_TASK_HANDLE, "NULL is not a live DSP task handle of this process (never handed out, "
                "or released%s)", when);
  return fail(HB_DNN_INVALID_TASK_HANDLE, "handle 0x%lx is not a live DSP task handle of this process (never handed "
              "out, or released%s)", (unsigned long)number, when);
}

/* Strict mode: a cached buffer the CPU wrote since its last CLEAN is refused as a task's input. */
static int unflushed(const buffer *b) {
  if (strict && b->cache != NULL && !b->device_written && memcmp(b->cache, b->ddr, b->size) != 0)
    return fail(HB_SYS_CACHE_NOT_FLUSHED, "memory 0x%llx (%u bytes) was written by the CPU but not cleaned: call "
                "hbSysFlushMem(HB_SYS_MEM_CACHE_CLEAN) before the task", (unsigned long long)b->phys, b->size);
  return 0;
}

static int task_handles(const hbSysMem *array, int32_t count, const char *what, vdsp_handle *out, task *t,
                        int outputs) {
  if (count < 0 || count > MAX_BUFFERS)
    return fail(HB_DNN_INVALID_ARGUMENT, "%sCount %d must be in 0..%d", what, (int)count, MAX_BUFFERS);
  if (count && array == NULL)
    return fail(HB_DNN_INVALID_ARGUMENT, "%ss is NULL but %sCount is %d", what, what, (int)count);
  for (int32_t i = 0; i < count; i++) {
    char name[32];
    snprintf(name, sizeof name, "%s[%d]", what, (int)i);
    buffer *b;
    uint32_t off;
    int rc = lookup(&array[i], name, &b, &off);
    if (rc != 0) return rc;
    out[i].phys = array[i].phyAddr;
    out[i].size = array[i].memSize;
    out[i].flags = 0;
    if (b == NULL || off != 0 || array[i].memSize != b->size) continue;
    out[i].flags = (uint64_t)b->registered;
    rc = unflushed(b);
    if (rc != 0) return rc;
    if (outputs && b->cache != NULL) {
      t->out_phys[t->n_out] = b->phys;
      t->out_vir[t->n_out++] = b->vir;
    }
  }
  return 0;
}

/* --- parameters packed into the input (hbDSPRpcV2; the layout: arm_side/capi/packing.py) ------ */

typedef struct {
  const struct vdsp_param_member *m;     /* the struct's first member row (its size, names) */
  const struct vdsp_op_buffers *c;
  size_t header, data, least;            /* bytes before the data; where it starts; the smallest input */
  char what[320];
} packed_layout;

static size_t packed_align(size_t n) { return (n + PACKED_ALIGN - 1) / PACKED_ALIGN * PACKED_ALIGN; }

/* The packed layout of `cmd`: 1 for an operator with a struct, 0 for one without (plain buffers). */
static int packed_of(int32_t cmd, packed_layout *p) {
  p->m = NULL;
  p->c = NULL;
  for (size_t i = 0; i < sizeof vdsp_param_members / sizeof *vdsp_param_members && p->m == NULL; i++)
    if (vdsp_param_members[i].cmd == cmd) p->m = &vdsp_param_members[i];
  for (size_t i = 0; i < sizeof vdsp_op_buffers / sizeof *vdsp_op_buffers; i++)
    if (vdsp_op_buffers[i].cmd == cmd) p->c = &vdsp_op_buffers[i];
  if (p->m == NULL || p->c == NULL) return 0;
  int table = p->c->in_max > 1 || p->c->out_max > 1;
  char at[96] = "";
  if (table) snprintf(at, sizeof at, ", hbDSPPackedBuffers (%d bytes) at byte %zu,", PACKED_TABLE, p->m->size);
  p->header = p->m->size + (table ? PACKED_TABLE : 0);
  p->data = packed_align(p->header);
  p->least = p->c->in_max ? p->data + 1 : p->header;
  snprintf(p->what, sizeof p->what, "hbDSPRpcV2: operator 0x%04x (%s) takes its parameters packed in its input: %s "
           "(%zu bytes)%s then its data from byte %zu", (unsigned)cmd, p->m->op, p->m->strct, p->m->size, at, p->data);
  return 1;
}

/* `n` buffers of `sizes` from byte `base` of `whole` (`total` bytes), each from an aligned byte. */
static int packed_place(const packed_layout *p, const char *side, const hbSysMem *whole, size_t base, size_t total,
                        uint32_t n, const uint32_t *sizes, hbSysMem *out) {
  size_t at = base;
  for (uint32_t i = 0; i < n; i++) {
    if (sizes[i] == 0) return fail(HB_DNN_INVALID_ARGUMENT, "%s: hbDSPPackedBuffers.%sSize[%u] is 0", p->what, side, i);
    out[i].phyAddr = whole->phyAddr + at;
    out[i].virAddr = whole->virAddr != NULL ? (uint8_t *)whole->virAddr + at : NULL;
    out[i].memSize = sizes[i];
    at = i + 1 < n ? packed_align(at + sizes[i]) : at + sizes[i];
  }
  if (at > total)
    return fail(HB_DNN_INVALID_ARGUMENT, "%s: the %u %ss of hbDSPPackedBuffers.%sSize end at byte %zu, the %s has %zu "
                "bytes", p->what, n, side, side, at, side, total);
  return 0;
}

/* hbDSPRpcV2's packed input (under lock): the struct's bytes as the DSP would read them (the
 * DDR) copied into *param, the data's ranges into ins, the output's into outs. */
static int unpack(const packed_layout *p, const hbSysMem *input, const hbSysMem *output, hbSysMem *ins,
                  int32_t *n_in, hbSysMem *outs, int32_t *n_out, uint8_t **param) {
  if (input == NULL) return fail(HB_DNN_INVALID_ARGUMENT, "%s: the input is NULL", p->what);
  if (input->memSize < p->least)
    return fail(HB_DNN_INVALID_ARGUMENT, "%s: the input has %u bytes, at least %zu needed", p->what, input->memSize,
                p->least);
  buffer *b;
  uint32_t off;
  int rc = live(input, "input", &b, &off);
  if (rc == 0 && off == 0 && input->memSize == b->size) rc = unflushed(b);   /* the data goes as a range */
  if (rc != 0) return rc;
  const uint8_t *src = b->ddr + off;
  uint32_t counts[2] = {0, 0}, sizes[2][PACKED_MAX];
  if (p->header > p->m->size) {
    memcpy(counts, src + p->m->size, sizeof counts);
    memcpy(sizes, src + p->m->size + sizeof counts, sizeof sizes);
    const char *side[2] = {"input", "output"};
    int max[2] = {p->c->in_max, p->c->out_max};
    for (int i = 0; i < 2; i++)
      if (counts[i] > (uint32_t)max[i])
        return fail(HB_DNN_INVALID_ARGUMENT, "%s: hbDSPPackedBuffers.%sCount %u must be in 0..%d", p->what, side[i],
                    counts[i], max[i]);
  }
  *n_in = *n_out = 0;
  if (p->c->in_max && counts[0] == 0) {
    ins[0] = *input;
    ins[0].phyAddr += p->data;
    ins[0].virAddr = input->virAddr != NULL ? (uint8_t *)input->virAddr + p->data : NULL;
    ins[0].memSize = (uint32_t)(input->memSize - p->data);
    *n_in = 1;
  } else if (p->c->in_max) {
    rc = packed_place(p, "input", input, p->data, input->memSize, counts[0], sizes[0], ins);
    if (rc != 0) return rc;
    *n_in = (int32_t)counts[0];
  }
  if (counts[1] == 0 && output != NULL) {
    outs[0] = *output;
    *n_out = 1;
  } else if (counts[1] != 0) {
    if (output == NULL)
      return fail(HB_DNN_INVALID_ARGUMENT, "%s: hbDSPPackedBuffers.outputCount is %u but the output is NULL", p->what,
                  counts[1]);
    rc = packed_place(p, "output", output, 0, output->memSize, counts[1], sizes[1], outs);
    if (rc != 0) return rc;
    *n_out = (int32_t)counts[1];
  }
  *param = malloc(p->m->size);
  if (*param == NULL) return fail(HB_DNN_OUT_OF_MEMORY, "out of memory");
  memcpy(*param, src, p->m->size);
  return 0;
}

/* A submission; `packed` (hbDSPRpcV2 of an operator with a struct): the parameters and the
 * buffers are unpacked from inputs[0] and outputs[0] under the lock. */
static int rpc(hbDSPTask_t *handle, hbSysMem *inputs, int32_t n_in, hbSysMem *outputs, int32_t n_out, int32_t cmd,
               const void *param, uint32_t size, const char *json, const hbDSPRpcCtrlParam *ctrl,
               const packed_layout *packed) {
  if (handle == NULL) return fail(HB_DNN_INVALID_ARGUMENT, "task is NULL: pass the address of an hbDSPTask_t");
  if (cmd < 0 || cmd > 0xfffe)
    return fail(HB_DNN_INVALID_ARGUMENT, "rpcCmd 0x%x must be an operator id in 0x0000..0xfffe", (unsigned)cmd);
  if (ctrl != NULL && (ctrl->dspCoreId < 0 || ctrl->dspCoreId > 2))
    return fail(HB_DSP_INVALID_CORE, "dspCoreId %d must be HB_DSP_CORE_ANY (0), HB_DSP_CORE_0 (1) or HB_DSP_CORE_1 "
                "(2)", (int)ctrl->dspCoreId);
  if (ctrl != NULL && (ctrl->priority < 0 || ctrl->priority > 255))
    return fail(HB_DNN_INVALID_ARGUMENT, "priority %d must be in 0..255", (int)ctrl->priority);
  enter();
  int rc = connected();
  if (rc != 0) return leave(rc);
  task *t = calloc(1, sizeof *t);
  vdsp_wire_writer *w = vdsp_wire_writer_new();
  vdsp_handle ins[MAX_BUFFERS], outs[MAX_BUFFERS];
  if (t == NULL || w == NULL) rc = fail(HB_DNN_OUT_OF_MEMORY, "out of memory");
  hbSysMem packed_in[PACKED_MAX], packed_out[PACKED_MAX];
  uint8_t *unpacked = NULL;
  if (rc == 0 && packed != NULL && (rc = unpack(packed, inputs, outputs, packed_in, &n_in, packed_out, &n_out,
                                               &unpacked)) == 0) {
    inputs = packed_in, outputs = packed_out, param = unpacked, size = (uint32_t)packed->m->size;
  }
  if (rc == 0) rc = task_handles(inputs, n_in, "input", ins, t, 0);
  if (rc == 0) rc = task_handles(outputs, n_out, "output", outs, t, 1);
  const uint8_t *params = NULL;
  size_t params_len = 0;
  if (rc == 0) rc = encode_params(w, cmd, param, size, json, &params, &params_len);
  if (rc == 0 && n_tasks >= MAX_TASKS)
    rc = fail(HB_DNN_TASK_NUM_EXCEED_LIMIT, "%d DSP task handles are alive: release some", MAX_TASKS);
  if (rc == 0 && grow((void ***)&tasks, &cap_tasks, n_tasks) != 0) rc = fail(HB_DNN_OUT_OF_MEMORY, "out of memory");
  if (rc == 0) {
    vdsp_task vt = {(uint16_t)cmd, ctrl ? (uint8_t)ctrl->priority : 0, ctrl ? (uint8_t)ctrl->dspCoreId : 0,
                    ctrl ? ctrl->customId : 0, ins, (size_t)n_in, outs, (size_t)n_out, params, params_len};
    vdsp_err e;
    if (vdsp_client_submit(client, &vt, &t->msg_id, &e) != 0) rc = fail_err(&e);
  }
  vdsp_wire_writer_free(w);
  free(unpacked);
  if (rc != 0) {
    free(t);
    return leave(rc);
  }
  t->number = next_handle;
  next_handle += 16;
  tasks[n_tasks++] = t;
  *handle = (hbDSPTask_t)t->number;
  return leave(0);
}

int32_t VDSP_HB(hbDSPRpcV2)(hbDSPTask_t *task, hbSysMem *input, hbSysMem *output, int32_t rpcCmd,
                            hbDSPRpcCtrlParam *ctrl) {
  packed_layout packed;
  int has_struct = packed_of(rpcCmd, &packed);
  return rpc(task, input, input != NULL, output, output != NULL, rpcCmd, NULL, 0, NULL, ctrl,
             has_struct ? &packed : NULL);
}
int32_t VDSP_HB(hbDSPRpcV2Param)(hbDSPTask_t *task, hbSysMem *inputs, int32_t inputCount, hbSysMem *outputs,
                        int32_t outputCount, int32_t rpcCmd, void const *param, uint32_t paramSize,
                        hbDSPRpcCtrlParam *ctrl) {
  return rpc(task, inputs, inputCount, outputs, outputCount, rpcCmd, param, paramSize, NULL, ctrl, NULL);
}
int32_t VDSP_HB(hbDSPRpcV2Json)(hbDSPTask_t *task, hbSysMem *inputs, int32_t inputCount, hbSysMem *outputs,
                       int32_t outputCount, int32_t rpcCmd, char const *paramJson, hbDSPRpcCtrlParam *ctrl) {
  return rpc(task, inputs, inputCount, outputs, outputCount, rpcCmd, NULL, 0, paramJson, ctrl, NULL);   /* NULL: none */
}

/* Take the outcome of a task whose reply is in (vdsp_client_done 1). */
static void finish(task *t) {
  vdsp_reply reply;
  vdsp_err e;
  t->code = vdsp_client_wait(client, t->msg_id, 0, &reply, &e);
  t->done = 1;
  if (t->code != 0) {
    snprintf(t->message, sizeof t->message, "%s", e.message);
    return;
  }
  t->body = reply.body;
  for (size_t i = 0; strict && i < t->n_out; i++) {
    buffer *b = exact(t->out_phys[i], t->out_vir[i]);
    if (b != NULL) b->device_written = 1;
  }
}

/* Whether the task has ended, taking its outcome if it is in (no waiting). */
static int ended(task *t) {
  if (!t->done && vdsp_client_done(client, t->msg_id) == 1) finish(t);
  return t->done;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int32_t VDSP_HB(hbDSPWaitTaskDone)(hbDSPTask_t handle, int32_t timeout_ms) {
  uintptr_t number = (uintptr_t)handle;
  int64_t deadline = timeout_ms > 0 ? now_ms() + timeout_ms : -1;
  enter();
  int rc = connected();
  if (rc != 0) return leave(rc);
  for (;;) {
    task *t = find_task(number);
    if (t == NULL) return leave(not_a_task(number, ""));
    if (ended(t)) return leave(t->code ? fail(t->code, "%s", t->message) : 0);
    int64_t now = now_ms();
    if (deadline >= 0 && now >= deadline)
      return leave(fail(HB_DNN_TIMEOUT, "the task did not end within %d ms (it goes on: wait again, or release it)",
                        (int)timeout_ms));
    if (reading) {   /* another thread reads for us: sleep until it has read something */
      struct timespec until;
      clock_gettime(CLOCK_REALTIME, &until);
      int64_t ms = deadline >= 0 ? deadline - now : 1000;
      until.tv_sec += (time_t)(ms / 1000);
      until.tv_nsec += (long)(ms % 1000) * 1000000L;
      if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
      pthread_cond_timedwait(&read_done, &lock, &until);
      continue;
    }
    reading = 1;
    vdsp_client_pump(client, deadline >= 0 ? (int)(deadline - now) : -1, wake_fd);
    reading = 0;
    pthread_cond_broadcast(&read_done);
    eventfd_t drained;
    eventfd_read(wake_fd, &drained);
    if (__atomic_load_n(&pending, __ATOMIC_SEQ_CST) > 0) {   /* let the thread that woke us in */
      pthread_mutex_unlock(&lock);
      while (__atomic_load_n(&pending, __ATOMIC_SEQ_CST) > 0) sched_yield();
      pthread_mutex_lock(&lock);
    }
  }
}

int32_t VDSP_HB(hbDSPReleaseTask)(hbDSPTask_t handle) {
  uintptr_t number = (uintptr_t)handle;
  enter();
  int rc = connected();
  if (rc != 0) return leave(rc);
  task *t = find_task(number);
  if (t == NULL) return leave(not_a_task(number, " before"));
  for (size_t i = 0; i < n_tasks; i++)
    if (tasks[i] == t) tasks[i] = tasks[--n_tasks];
  if (!t->done) {   /* a queued task never runs; a running one's result is dropped */
    vdsp_err e;
    vdsp_client_cancel(client, t->msg_id, CANCEL_WAIT_MS, &e);
  }
  drop_task(t);
  return leave(0);
}

/* The ended task of `number` that has values (under lock). */
static int with_values(uintptr_t number, const char *what, task **out) {
  int rc = connected();
  if (rc != 0) return rc;
  task *t = find_task(number);
  if (t == NULL) return not_a_task(number, "");
  if (!ended(t) || t->code != 0)
    return fail(HB_DNN_INVALID_ARGUMENT, "the task has no %s: it has not ended, or it failed (hbDSPWaitTaskDone "
                "returns its code)", what);
  *out = t;
  return 0;
}

static const vdsp_wire_value *values_of(const task *t) {
  const vdsp_wire_value *v = vdsp_wire_map_get(vdsp_wire_body_root(t->body), "values");
  return v != NULL && v->kind == VDSP_WIRE_MAP ? v : NULL;
}

/* The value `name` of an ended task's values, for a `dest` that must not be NULL. */
static int value_named(uintptr_t number, const char *name, const void *dest, const vdsp_wire_value **out) {
  task *t;
  int rc = with_values(number, "values", &t);
  if (rc != 0) return rc;
  if (dest == NULL) return fail(HB_DNN_INVALID_ARGUMENT, "value is NULL");
  if (name == NULL) return fail(HB_DNN_INVALID_ARGUMENT, "name is NULL");
  size_t len = strnlen(name, MAX_TEXT + 1);
  if (len > MAX_TEXT)
    return fail(HB_DNN_INVALID_ARGUMENT, "name is longer than %d bytes (or not NUL-terminated)", MAX_TEXT);
  const vdsp_wire_value *values = values_of(t);
  *out = values ? vdsp_wire_map_get_n(values, name, len) : NULL;
  if (*out == NULL) return fail(HB_DNN_INVALID_ARGUMENT, "the task has no value '%.200s'", name);
  return 0;
}

int32_t VDSP_HB(hbDSPGetTaskValueInt)(hbDSPTask_t task, char const *name, int64_t *value) {
  enter();
  const vdsp_wire_value *v;
  int rc = value_named((uintptr_t)task, name, value, &v);
  if (rc != 0) return leave(rc);
  if (v->kind == VDSP_WIRE_BOOL) *value = v->v.b != 0;   /* Python's int() of a bool, as the embedded SDK */
  else if (v->kind == VDSP_WIRE_INT) *value = v->v.i;
  else return leave(fail(HB_DNN_INVALID_ARGUMENT, "value '%.200s' is not a 64-bit integer", name));
  return leave(0);
}

int32_t VDSP_HB(hbDSPGetTaskValueDouble)(hbDSPTask_t task, char const *name, double *value) {
  enter();
  const vdsp_wire_value *v;
  int rc = value_named((uintptr_t)task, name, value, &v);
  if (rc != 0) return leave(rc);
  if (v->kind == VDSP_WIRE_INT) *value = (double)v->v.i;
  else if (v->kind == VDSP_WIRE_UINT) *value = (double)v->v.u;
  else if (v->kind == VDSP_WIRE_FLOAT) *value = v->v.f;
  else return leave(fail(HB_DNN_INVALID_ARGUMENT, "value '%.200s' is not a number", name));
  return leave(0);
}

/* --- values as JSON (json.dumps(values, sort_keys=True), bytes as hex) --------------------- */

typedef struct {
  char *buf;
  size_t cap, len;   /* len may pass cap: the bytes needed */
} text_out;

static void emit(text_out *o, const char *s, size_t n) {
  if (o->len < o->cap) memcpy(o->buf + o->len, s, o->len + n <= o->cap ? n : o->cap - o->len);
  o->len += n;
}

static void emitf(text_out *o, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void emitf(text_out *o, const char *fmt, ...) {
  char tmp[64];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  emit(o, tmp, n > 0 ? (size_t)n : 0);
}

/* A str (UTF-8, checked by the decoder) as json.dumps writes it: ASCII, the rest \\u-escaped. */
static void emit_string(text_out *o, const char *s, size_t n) {
  static const char named[] = "b\bf\fn\nr\rt\t";
  emit(o, "\"", 1);
  for (size_t i = 0; i < n;) {
    unsigned char ch = (unsigned char)s[i];
    uint32_t cp = ch;
    size_t extra = ch >= 0xf0 ? 3 : ch >= 0xe0 ? 2 : ch >= 0xc0 ? 1 : 0;
    if (extra) cp = ch & (0x3fu >> extra);
    for (size_t k = 1; k <= extra && i + k < n; k++) cp = (cp << 6) | ((unsigned char)s[i + k] & 0x3fu);
    i += 1 + extra;
    const char *name = cp < 0x20 ? strchr(named + 1, (int)cp) : NULL;
    if (cp == '"' || cp == '\\') {
      emitf(o, "\\%c", (char)cp);
    } else if (name != NULL && cp != 0 && (name - named) % 2 == 1) {
      emitf(o, "\\%c", name[-1]);
    } else if (cp < 0x20 || cp >= 0x7f) {
      if (cp > 0xffff) {   /* a surrogate pair */
        cp -= 0x10000;
        emitf(o, "\\u%04x\\u%04x", (unsigned)(0xd800 + (cp >> 10)), (unsigned)(0xdc00 + (cp & 0x3ff)));
      } else {
        emitf(o, "\\u%04x", (unsigned)cp);
      }
    } else {
      emit(o, (const char *)&ch, 1);
    }
  }
  emit(o, "\"", 1);
}

static void emit_double(text_out *o, double d) {
  if (isnan(d) || isinf(d)) {
    const char *word = isnan(d) ? "NaN" : d > 0 ? "Infinity" : "-Infinity";
    emit(o, word, strlen(word));
    return;
  }
  char tmp[40];
  for (int prec = 1; prec <= 17; prec++) {   /* the shortest text that reads back, as Python's repr */
    snprintf(tmp, sizeof tmp, "%.*g", prec, d);
    if (strtod(tmp, NULL) == d) break;
  }
  emit(o, tmp, strlen(tmp));
  if (strpbrk(tmp, ".en") == NULL) emit(o, ".0", 2);
}

static int key_less(const vdsp_wire_value *a, const vdsp_wire_value *b) {
  size_t la, lb;
  const char *sa = vdsp_wire_get_str(a, &la), *sb = vdsp_wire_get_str(b, &lb);
  if (sa == NULL || sb == NULL) return sa == NULL && sb != NULL;
  int c = memcmp(sa, sb, la < lb ? la : lb);
  return c < 0 || (c == 0 && la < lb);
}

/* Iterative over an explicit stack: no recursion on a peer's nesting (the decoder bounds it). */
static void emit_value(text_out *o, const vdsp_wire_value *root) {
  typedef struct {
    const vdsp_wire_value *v;
    size_t next;
    const vdsp_wire_value *last_key;
  } frame;
  frame stack[VDSP_WIRE_MAX_DEPTH + 2];
  size_t depth = 0;
  const vdsp_wire_value *v = root;
  for (;;) {
    if (v != NULL) {
      switch (v->kind) {
        case VDSP_WIRE_NIL: emit(o, "null", 4); break;
        case VDSP_WIRE_BOOL: v->v.b ? emit(o, "true", 4) : emit(o, "false", 5); break;
        case VDSP_WIRE_INT: emitf(o, "%lld", (long long)v->v.i); break;
        case VDSP_WIRE_UINT: emitf(o, "%llu", (unsigned long long)v->v.u); break;
        case VDSP_WIRE_FLOAT: emit_double(o, v->v.f); break;
        case VDSP_WIRE_STR: emit_string(o, v->v.s, v->len); break;
        case VDSP_WIRE_BIN:
          emit(o, "\"", 1);
          for (size_t i = 0; i < v->len; i++) emitf(o, "%02x", (unsigned char)v->v.s[i]);
          emit(o, "\"", 1);
          break;
        case VDSP_WIRE_ARRAY:
        case VDSP_WIRE_MAP:
          emit(o, v->kind == VDSP_WIRE_MAP ? "{" : "[", 1);
          if (depth < sizeof stack / sizeof *stack) stack[depth++] = (frame){v, 0, NULL};
          break;
      }
    }
    v = NULL;
    if (depth == 0) return;
    frame *f = &stack[depth - 1];
    if (f->v->kind == VDSP_WIRE_ARRAY) {
      if (f->next < f->v->len) {
        if (f->next) emit(o, ", ", 2);
        v = &f->v->v.items[f->next++];
        continue;
      }
      emit(o, "]", 1);
    } else {
      /* the next key in sorted order: the smallest greater than the last */
      const vdsp_wire_value *pick = NULL, *pick_value = NULL;
      for (size_t i = 0; i < f->v->len; i++) {
        const vdsp_wire_value *k = &f->v->v.items[2 * i];
        if (f->last_key != NULL && !key_less(f->last_key, k)) continue;
        if (pick == NULL || key_less(k, pick)) pick = k, pick_value = &f->v->v.items[2 * i + 1];
      }
      if (pick != NULL) {
        if (f->last_key != NULL) emit(o, ", ", 2);
        size_t n;
        const char *s = vdsp_wire_get_str(pick, &n);
        if (s != NULL) emit_string(o, s, n);
        else emit(o, "\"?\"", 3);
        emit(o, ": ", 2);
        f->last_key = pick;
        v = pick_value;
        continue;
      }
      emit(o, "}", 1);
    }
    depth--;
  }
}

int32_t VDSP_HB(hbDSPGetTaskValuesJson)(hbDSPTask_t handle, char *buf, uint32_t bufSize) {
  enter();
  task *t;
  int rc = with_values((uintptr_t)handle, "values", &t);
  if (rc != 0) return leave(rc);
  if (buf == NULL) return leave(fail(HB_DNN_INVALID_ARGUMENT, "buf is NULL"));
  text_out o = {buf, bufSize, 0};
  const vdsp_wire_value *values = values_of(t);
  if (values != NULL) emit_value(&o, values);
  else emit(&o, "{}", 2);
  if (o.len + 1 > bufSize)
    return leave(fail(HB_DNN_INVALID_ARGUMENT, "bufSize %u is too small: the values take %zu bytes", bufSize,
                      o.len + 1));
  buf[o.len] = '\0';
  return leave(0);
}

int32_t VDSP_HB(hbDSPGetTaskCore)(hbDSPTask_t handle, int32_t *dspCoreId) {
  enter();
  int rc = connected();
  if (rc != 0) return leave(rc);
  if (dspCoreId == NULL) return leave(fail(HB_DNN_INVALID_ARGUMENT, "dspCoreId is NULL"));
  task *t = find_task((uintptr_t)handle);
  if (t == NULL) return leave(not_a_task((uintptr_t)handle, ""));
  if (!ended(t)) return leave(fail(HB_DNN_INVALID_ARGUMENT, "the task has not ended: wait for it first"));
  const char *core = t->body ? vdsp_wire_get_str(vdsp_wire_map_get(vdsp_wire_body_root(t->body), "core"), NULL) : NULL;
  *dspCoreId = core == NULL                ? 0
               : strcmp(core, "vdsp0") == 0 ? HB_DSP_CORE_0
               : strcmp(core, "vdsp1") == 0 ? HB_DSP_CORE_1
                                            : 0;
  return leave(0);
}

int32_t VDSP_HB(hbDSPGetTaskBoardTime)(hbDSPTask_t handle, double *boardUs, int32_t *counted) {
  enter();
  if (boardUs == NULL) return leave(fail(HB_DNN_INVALID_ARGUMENT, "boardUs is NULL"));
  task *t;
  int rc = with_values((uintptr_t)handle, "board time", &t);
  if (rc != 0) return leave(rc);
  const vdsp_wire_value *root = vdsp_wire_body_root(t->body);
  const vdsp_wire_value *us = vdsp_wire_map_get(root, "board_us");
  const char *model = vdsp_wire_get_str(vdsp_wire_map_get(root, "board_model"), NULL);
  double value;
  if (us != NULL && us->kind == VDSP_WIRE_FLOAT) value = us->v.f;
  else if (us != NULL && us->kind == VDSP_WIRE_INT) value = (double)us->v.i;
  else if (us != NULL && us->kind == VDSP_WIRE_UINT) value = (double)us->v.u;
  else us = NULL;
  if (us == NULL || model == NULL || (strcmp(model, "cycles") != 0 && strcmp(model, "table") != 0))
    return leave(fail(HB_DNN_INVALID_ARGUMENT, "the task has no board-time estimate (its operator has no table "
                      "entry)"));
  *boardUs = value;
  if (counted != NULL) *counted = strcmp(model, "cycles") == 0;
  return leave(0);
}

/* --- for libvdsp_hb's front (vdsp_hb.h) ---------------------------------------------------- */

int vdsp_hb_native_open(int *late) {
  enter();
  open_late = 0;
  int rc = connected();
  open_failed = rc != 0 && client == NULL ? rc : 0;
  if (late != NULL) *late = open_late;
  return leave(rc);
}

int vdsp_hb_native_owner(uint32_t *id, int *lock_fd, char *dir, size_t len) {
  enter();
  int rc = client != NULL && client_pid == getpid() ? 0 : -1;
  if (rc == 0) {
    vdsp_ddr_owner *o = vdsp_client_ddr(client);
    *id = vdsp_ddr_owner_id(o);
    *lock_fd = vdsp_ddr_lock_fd(o);
    snprintf(dir, len, "%s", vdsp_ddr_directory(o));
  }
  return leave(rc);
}

int vdsp_hb_native_find(uint64_t phys, void *vir, uint32_t size, const char *what, vdsp_hb_native_buffer *out) {
  enter();
  int rc = connected();
  buffer *b = NULL;
  uint32_t off = 0;
  hbSysMem m = {phys, vir, size};
  if (rc == 0) rc = lookup(&m, what, &b, &off);
  if (rc == 0 && b == NULL) rc = 1;
  if (rc == 0) {
    out->phys = b->phys;
    out->size = b->size;
    out->offset = off;
    out->ddr = b->ddr;
    out->cache = b->cache;
    out->vir = b->vir;
    out->registered = b->registered;
  }
  return leave(rc);
}

int vdsp_hb_native_say(int code, const char *message) { return fail(code, "%s", message); }

int vdsp_hb_native_last(char *message, size_t len) {
  snprintf(message, len, "%s", last_message);
  return last_code;
}

/* --- texts --------------------------------------------------------------------------------- */

char const *VDSP_HB(hbDNNGetErrorDesc)(int32_t errorCode) {
  char text[VDSP_ERR_MAX + 256];
  const char *base = NULL;
  for (size_t i = 0; i < sizeof vdsp_error_texts / sizeof *vdsp_error_texts && base == NULL; i++)
    if (vdsp_error_texts[i].code == errorCode) base = vdsp_error_texts[i].text;
  if (base != NULL) snprintf(text, sizeof text, "%s", base);
  else snprintf(text, sizeof text, "unknown error code %d", (int)errorCode);
  if (last_code == errorCode && errorCode != 0 && last_message[0]) {
    size_t n = strlen(text);
    snprintf(text + n, sizeof text - n, " (%s)", last_message);
  }
  pthread_mutex_lock(&lock);   /* not enter(): no client is needed */
  at_exit_once();
  for (size_t i = 0; i < TEXTS_KEPT; i++)   /* the same text again: the same pointer */
    if (texts[i] != NULL && strcmp(texts[i], text) == 0) {
      char const *same = texts[i];
      pthread_mutex_unlock(&lock);
      return same;
    }
  char *kept = strdup(text);
  if (kept != NULL) {
    free(texts[next_text]);
    texts[next_text] = kept;
    next_text = (next_text + 1) % TEXTS_KEPT;
  }
  pthread_mutex_unlock(&lock);
  return kept != NULL ? kept : "out of memory";
}
