/* vdsp_ddr.c: see vdsp_ddr.h. The names, modes and rules are those of PROTOCOL.md §6 and
 * vdsp_board/memory/ddr.py; tests/integration/test_capi_native.py checks them against a live SoC. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "vdsp_ddr.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define CLAIM_TRIES 1000   /* ids tried before giving up, as ddr._claim_owner_id */
#define CREATE_TRIES 64    /* offsets tried past stale files of a dead owner with our id */
#define RESERVE_WAIT_MS 1000   /* an allocation waits this long for its user's reserve lock at most */

typedef struct {
  uint64_t offset;
  uint32_t size;
  void *addr;
} live_segment;

struct vdsp_ddr_owner {
  char dir[PATH_MAX];
  uint32_t id;
  int lock_fd;           /* holds LOCK_EX on vdsp-{id}.lock while the owner is open */
  pid_t pid;             /* the process that claimed it: only it unlinks the files */
  uint64_t next;         /* the next free offset */
  uint64_t held;         /* bytes of the live segments */
  live_segment *live;    /* invariant: every segment made and not freed, in offset order */
  size_t count, cap;
};

static int path_of(char *out, const char *dir, const char *name) {
  int n = snprintf(out, PATH_MAX, "%s/%s", dir, name);
  return n > 0 && n < PATH_MAX;
}

static void unlink_in(const vdsp_ddr_owner *o, const char *name) {
  char path[PATH_MAX];
  if (path_of(path, o->dir, name)) (void)unlink(path);
}

static uint32_t random_id(void) {
  uint32_t r = 0;
  while (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) {
    /* EINTR only: getrandom never fails otherwise for 4 bytes once the pool is ready */
  }
  return 1u + r % (VDSP_DDR_MAX_OWNER - 1u);
}

/* §6.3 step 1; 0 with o->id and o->lock_fd set. */
static int claim(vdsp_ddr_owner *o, vdsp_err *err) {
  for (int i = 0; i < CLAIM_TRIES; i++) {
    uint32_t id = random_id();
    char final[PATH_MAX], tmp[PATH_MAX];
    char name[64];
    snprintf(name, sizeof name, "vdsp-%06x.lock", id);
    if (!path_of(final, o->dir, name) || snprintf(tmp, PATH_MAX, "%s.tmp%ld", final, (long)o->pid) >= PATH_MAX)
      return vdsp_fail(err, VDSP_E_SYS_OUT_OF_MEMORY, "DDR directory path %s is too long", o->dir);
    int fd = open(tmp, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
      if (errno == EEXIST) {   /* left by a dead process that had our pid */
        (void)unlink(tmp);
        continue;
      }
      return vdsp_fail(err, VDSP_E_SYS_OUT_OF_MEMORY, "cannot create DDR owner lock %s: %s", tmp, strerror(errno));
    }
    if (fchmod(fd, 0600) != 0 || flock(fd, LOCK_EX | LOCK_NB) != 0 || link(tmp, final) != 0) {
      int e = errno;
      close(fd);
      (void)unlink(tmp);
      if (e == EEXIST || e == ENOENT || e == EWOULDBLOCK) continue;   /* taken, or reaped meanwhile */
      return vdsp_fail(err, VDSP_E_SYS_OUT_OF_MEMORY, "cannot create DDR owner lock %s: %s", final, strerror(e));
    }
    (void)unlink(tmp);
    o->id = id;
    o->lock_fd = fd;
    return 0;
  }
  return vdsp_fail(err, VDSP_E_SYS_OUT_OF_MEMORY, "no free DDR owner id in %s", o->dir);
}

int vdsp_ddr_open(const char *directory, vdsp_ddr_owner **out, vdsp_err *err) {
  *out = NULL;
  if (directory == NULL || !*directory) directory = getenv("VDSP_SHM_DIR");
  if (directory == NULL || !*directory) directory = "/dev/shm";
  if (strlen(directory) >= PATH_MAX - 64)
    return vdsp_fail(err, VDSP_E_SYS_OUT_OF_MEMORY, "DDR directory path %.200s... is too long", directory);
  vdsp_ddr_owner *o = calloc(1, sizeof *o);
  if (o == NULL) return vdsp_fail(err, VDSP_E_OUT_OF_MEMORY, "out of memory");
  strcpy(o->dir, directory);
  o->pid = getpid();
  o->next = VDSP_DDR_FIRST_OFFSET;
  o->lock_fd = -1;
  int rc = claim(o, err);
  if (rc != 0) {
    free(o);
    return rc;
  }
  *out = o;
  return 0;
}

uint32_t vdsp_ddr_owner_id(const vdsp_ddr_owner *o) { return o->id; }
int vdsp_ddr_lock_fd(const vdsp_ddr_owner *o) { return o->lock_fd; }
const char *vdsp_ddr_directory(const vdsp_ddr_owner *o) { return o->dir; }
uint64_t vdsp_ddr_held(const vdsp_ddr_owner *o) { return o->held; }

/* A setting of bytes as ddr._bytes_setting reads it: "268435456", "256M", "2GiB", "25%"
 * (case-insensitive, blanks around); *out in bytes of the file system of `dir` for a share. */
static int bytes_setting(const char *env, int default_share, const char *dir, uint64_t *out, vdsp_err *err) {
  const char *text = getenv(env);
  char buf[64];
  if (text == NULL) text = "";
  while (isspace((unsigned char)*text)) text++;
  if (!*text) {
    snprintf(buf, sizeof buf, "%d%%", default_share);
    text = buf;
  }
  const char *p = text;
  if (!isdigit((unsigned char)*p)) goto malformed;
  errno = 0;
  char *end;
  unsigned long long whole = strtoull(p, &end, 10);
  if (errno) goto malformed;
  p = end;
  double share = -1;
  if (*p == '.') {   /* only a share may have a fraction */
    p++;
    if (!isdigit((unsigned char)*p)) goto malformed;
    share = strtod(text, &end);
    p = end;
  }
  while (isspace((unsigned char)*p)) p++;
  if (*p == '%') {
    if (share < 0) share = (double)whole;
    p++;
  } else {
    if (share >= 0) goto malformed;
    uint64_t unit = 1;
    switch (toupper((unsigned char)*p)) {
      case 'K': unit = 1ull << 10; p++; break;
      case 'M': unit = 1ull << 20; p++; break;
      case 'G': unit = 1ull << 30; p++; break;
      default: break;
    }
    if (toupper((unsigned char)*p) == 'I' && toupper((unsigned char)p[1]) == 'B') p += 2;
    else if (toupper((unsigned char)*p) == 'B') p++;
    if (whole > UINT64_MAX / unit) goto malformed;
    *out = whole * unit;
  }
  while (isspace((unsigned char)*p)) p++;
  if (*p) goto malformed;
  if (share >= 0) {
    if (!(share > 0 && share <= 100))
      return vdsp_fail(err, VDSP_E_SYS_INVALID_ARGUMENT, "%s='%.64s': a share must be in (0, 100] %%", env, text);
    struct statvfs st;
    if (statvfs(dir, &st) != 0)
      return vdsp_fail(err, VDSP_E_SYS_OUT_OF_MEMORY, "DDR directory %s: %s", dir, strerror(errno));
    *out = (uint64_t)((double)st.f_blocks * (double)st.f_frsize * share / 100.0);
  }
  return 0;
malformed:
  return vdsp_fail(err, VDSP_E_SYS_INVALID_ARGUMENT,
                   "%s='%.64s': give bytes (e.g. 268435456, 256M, 2G) or a share of the DDR file system (e.g. 25%%)",
                   env, text);
}

/* ddr.reserve_allows: leave `keep` free, or once less is free, half of held + free. */
static int reserve_allows(uint64_t free_, uint64_t held, uint64_t size, uint64_t keep) {
  uint64_t half = (free_ + held) / 2;
  uint64_t need = keep < half ? keep : half;
  return free_ >= size && free_ - size >= need;
}

static int check_limits(vdsp_ddr_owner *o, uint64_t size, vdsp_err *err) {
  uint64_t quota, keep;
  int rc = bytes_setting("VDSP_DDR_QUOTA", VDSP_DDR_DEFAULT_QUOTA_SHARE, o->dir, &quota, err);
  if (rc == 0) rc = bytes_setting("VDSP_DDR_RESERVE", VDSP_DDR_DEFAULT_RESERVE_SHARE, o->dir, &keep, err);
  if (rc != 0) return rc;
  if (o->held + size > quota)
    return vdsp_fail(err, VDSP_E_SYS_OUT_OF_MEMORY,
                     "DDR owner 0x%06x holds %llu bytes; %llu more would exceed its quota of %llu bytes "
                     "(VDSP_DDR_QUOTA; free buffers first)",
                     o->id, (unsigned long long)o->held, (unsigned long long)size, (unsigned long long)quota);
  struct statvfs st;
  if (statvfs(o->dir, &st) != 0)
    return vdsp_fail(err, VDSP_E_SYS_OUT_OF_MEMORY, "DDR directory %s: %s", o->dir, strerror(errno));
  uint64_t free_ = (uint64_t)st.f_bavail * st.f_frsize;
  if (!reserve_allows(free_, o->held, size, keep))
    return vdsp_fail(err, VDSP_E_SYS_OUT_OF_MEMORY,
                     "DDR has %llu bytes free; %llu more for this owner (holding %llu) would leave less than the "
                     "next client's share (the reserve of %llu bytes, VDSP_DDR_RESERVE, or half of what is left): "
                     "free buffers first",
                     (unsigned long long)free_, (unsigned long long)size, (unsigned long long)o->held,
                     (unsigned long long)keep);
  return 0;
}

static void segment_name(char *out, size_t cap, uint32_t id, uint64_t offset) {
  snprintf(out, cap, "vdsp-%06x-%010llx", id, (unsigned long long)offset);
}

/* ddr._open_reserve_lock: an fd of the reserve lock file `path`, a regular file of this user
 * that nobody else may open (mode 0600), created if missing, never through a symlink; an entry of
 * this user that is anything else is removed and made again. -1 if the name is another user's. */
static int open_reserve_lock(const char *path) {
  for (int i = 0; i < 8; i++) {
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    struct stat st;
    int known = fd >= 0 ? fstat(fd, &st) == 0 : lstat(path, &st) == 0;
    if (!known && fd < 0 && errno == ENOENT) continue;   /* removed meanwhile by its holder */
    if (known && st.st_uid == geteuid() && S_ISREG(st.st_mode) && !(st.st_mode & 077) && fd >= 0) return fd;
    if (fd >= 0) close(fd);
    if (!known || st.st_uid != geteuid()) return -1;
    if (unlink(path) != 0 && errno != ENOENT) return -1;   /* a directory of ours, say */
  }
  return -1;
}

/* ddr._reserve_lock: an fd holding flock(LOCK_EX) on this user's reserve lock, still the file at
 * `path`; tried without blocking for at most RESERVE_WAIT_MS, then -1 (the check runs without it). */
static int reserve_lock(const char *path) {
  struct timespec pause = {0, 500000}, start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    int fd = open_reserve_lock(path);
    if (fd < 0) return -1;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {   /* held by another process of this user */
      close(fd);
      clock_gettime(CLOCK_MONOTONIC, &now);
      if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 >= RESERVE_WAIT_MS) return -1;
      nanosleep(&pause, NULL);
      pause.tv_nsec = pause.tv_nsec * 2 < 10000000 ? pause.tv_nsec * 2 : 10000000;
      continue;
    }
    struct stat held, there;
    if (fstat(fd, &held) == 0 && lstat(path, &there) == 0 && held.st_ino == there.st_ino &&
        held.st_dev == there.st_dev)
      return fd;
    close(fd);   /* unlinked by the holder we waited for: the name again */
  }
}

static int make_segment(vdsp_ddr_owner *o, uint64_t size, vdsp_ddr_segment *out, vdsp_err *err);

int vdsp_ddr_alloc(vdsp_ddr_owner *o, uint64_t size, vdsp_ddr_segment *out, vdsp_err *err) {
  memset(out, 0, sizeof *out);
  if (size < 1 || size > VDSP_DDR_MAX_ALLOC)
    return vdsp_fail(err, VDSP_E_SYS_INVALID_ARGUMENT, "memory size %llu must be an integer in [1, %u]",
                     (unsigned long long)size, VDSP_DDR_MAX_ALLOC);
  if (o->pid != getpid())
    return vdsp_fail(err, VDSP_E_SYS_OUT_OF_MEMORY, "DDR owner 0x%06x belongs to process %ld, not to this one "
                     "(a child made by fork() must not use its parent's owner)", o->id, (long)o->pid);
  char lock_path[PATH_MAX], name[64];
  snprintf(name, sizeof name, "vdsp-reserve-%ld.lock", (long)geteuid());
  int lock = path_of(lock_path, o->dir, name) ? reserve_lock(lock_path) : -1;
  /* held while the reserve is checked and the file made: the user's next check sees it */
  int rc = check_limits(o, size, err);
  if (rc == 0) rc = make_segment(o, size, out, err);
  if (lock >= 0) {
    (void)unlink(lock_path);   /* before letting go: whoever waits on this file tries the name again */
    close(lock);
  }
  return rc;
}

static int make_segment(vdsp_ddr_owner *o, uint64_t size, vdsp_ddr_segment *out, vdsp_err *err) {
  if (o->count == o->cap) {
    size_t cap = o->cap ? 2 * o->cap : 16;
    live_segment *grown = realloc(o->live, cap * sizeof *grown);
    if (grown == NULL) return vdsp_fail(err, VDSP_E_OUT_OF_MEMORY, "out of memory");
    o->live = grown;
    o->cap = cap;
  }
  uint64_t rounded = (size + VDSP_DDR_PAGE - 1) / VDSP_DDR_PAGE * VDSP_DDR_PAGE;
  char name[64], path[PATH_MAX];
  int fd = -1;
  uint64_t offset = 0;
  for (int i = 0; i < CREATE_TRIES && fd < 0; i++) {
    offset = o->next;
    if (offset + rounded > (1ull << VDSP_DDR_OFFSET_BITS))
      return vdsp_fail(err, VDSP_E_SYS_OUT_OF_MEMORY, "address space of DDR owner 0x%06x is exhausted", o->id);
    o->next = offset + rounded;
    segment_name(name, sizeof name, o->id, offset);
    if (!path_of(path, o->dir, name))
      return vdsp_fail(err, VDSP_E_SYS_OUT_OF_MEMORY, "DDR directory path %s is too long", o->dir);
    fd = open(path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 && errno != EEXIST)   /* EEXIST: a leftover of a dead owner that had our id */
      return vdsp_fail(err, VDSP_E_SYS_OUT_OF_MEMORY, "cannot allocate %llu bytes of DDR at %s: %s",
                       (unsigned long long)size, path, strerror(errno));
  }
  if (fd < 0)
    return vdsp_fail(err, VDSP_E_SYS_OUT_OF_MEMORY, "cannot allocate %llu bytes of DDR: stale files of owner 0x%06x",
                     (unsigned long long)size, o->id);
  int e = 0;
  void *addr = MAP_FAILED;
  if (fchmod(fd, 0600) != 0 || ftruncate(fd, (off_t)size) != 0) e = errno;
  if (!e) e = posix_fallocate(fd, 0, (off_t)size);   /* reserve now: a full tmpfs must not SIGBUS later */
  if (!e) {
    addr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) e = errno;
  }
  close(fd);   /* the mapping keeps no fd */
  if (e) {
    (void)unlink(path);
    return vdsp_fail(err, VDSP_E_SYS_OUT_OF_MEMORY, "cannot allocate %llu bytes of DDR at %s: %s",
                     (unsigned long long)size, path, strerror(e));
  }
  o->live[o->count++] = (live_segment){offset, (uint32_t)size, addr};
  o->held += size;
  out->phys = ((uint64_t)o->id << VDSP_DDR_OFFSET_BITS) | offset;
  out->offset = offset;
  out->size = (uint32_t)size;
  out->addr = addr;
  return 0;
}

int vdsp_ddr_free(vdsp_ddr_owner *o, vdsp_ddr_segment *seg, vdsp_err *err) {
  for (size_t i = 0; i < o->count; i++) {
    live_segment *s = &o->live[i];
    if (s->offset != seg->offset || s->addr != seg->addr || seg->addr == NULL) continue;
    char name[64];
    segment_name(name, sizeof name, o->id, s->offset);
    if (o->pid == getpid()) unlink_in(o, name);   /* the DSP then sees the address as freed */
    munmap(s->addr, s->size);
    o->held -= s->size;
    memmove(s, s + 1, (o->count - i - 1) * sizeof *s);
    o->count--;
    seg->addr = NULL;
    return 0;
  }
  return vdsp_fail(err, VDSP_E_SYS_INVALID_ARGUMENT, "memory at phys 0x%llx is not a live buffer of owner 0x%06x",
                   (unsigned long long)seg->phys, o->id);
}

int vdsp_ddr_set_key(vdsp_ddr_owner *o, const char *key, vdsp_err *err) {
  char path[PATH_MAX], tmp[PATH_MAX], name[64];
  struct stat st;
  snprintf(name, sizeof name, "vdsp-%06x.acl", o->id);
  if (!path_of(path, o->dir, name) || snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
    return vdsp_fail(err, VDSP_E_SYS_REGISTER_MEM_FAILED, "DDR directory path %s is too long", o->dir);
  if (fstat(o->lock_fd, &st) != 0)
    return vdsp_fail(err, VDSP_E_SYS_REGISTER_MEM_FAILED, "cannot write access list %s: %s", path, strerror(errno));
  vdsp_wire_writer *w = vdsp_wire_writer_new();
  if (w == NULL) return vdsp_fail(err, VDSP_E_OUT_OF_MEMORY, "out of memory");
  vdsp_wire_put_map(w, 3);
  vdsp_wire_put_cstr(w, "lock");
  vdsp_wire_put_uint(w, (uint64_t)st.st_ino);
  vdsp_wire_put_cstr(w, "grants");
  vdsp_wire_put_array(w, 0);
  vdsp_wire_put_cstr(w, "key");
  vdsp_wire_put_cstr(w, key);
  const uint8_t *data;
  size_t len;
  vdsp_wire_error werr;
  int rc = vdsp_wire_writer_finish(w, &data, &len, &werr);
  if (rc != 0) {
    vdsp_wire_writer_free(w);
    return vdsp_fail(err, VDSP_E_SYS_REGISTER_MEM_FAILED, "cannot write access list %s: %s", path, werr.message);
  }
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  int ok = fd >= 0 && fchmod(fd, 0600) == 0 && write(fd, data, len) == (ssize_t)len;
  int e = errno;
  if (fd >= 0) close(fd);
  ok = ok && rename(tmp, path) == 0;
  if (!ok) e = errno;
  vdsp_wire_writer_free(w);
  if (!ok) {
    (void)unlink(tmp);
    return vdsp_fail(err, VDSP_E_SYS_REGISTER_MEM_FAILED, "cannot write access list %s: %s", path, strerror(e));
  }
  return 0;
}

void vdsp_ddr_close(vdsp_ddr_owner *o) {
  if (o == NULL) return;
  int ours = o->pid == getpid();
  char name[64];
  for (size_t i = 0; i < o->count; i++) {
    if (ours) {
      segment_name(name, sizeof name, o->id, o->live[i].offset);
      unlink_in(o, name);
    }
    munmap(o->live[i].addr, o->live[i].size);
  }
  if (ours) {   /* segments first: a lock-less segment looks orphaned; then the sidecars, the lock */
    snprintf(name, sizeof name, "vdsp-%06x.acl", o->id);
    unlink_in(o, name);
    snprintf(name, sizeof name, "vdsp-%06x.acl.tmp", o->id);
    unlink_in(o, name);
    snprintf(name, sizeof name, "vdsp-%06x.lock", o->id);
    unlink_in(o, name);
  }
  close(o->lock_fd);
  free(o->live);
  free(o);
}
