/*
 * capi_native_check.c: a C program of the native client core alone (no Python in its process),
 * run by tests/integration/test_capi_native.py against a live SoC.
 *
 *   capi_native_check flow [SIZE]   HELLO, two buffers, memcpy through the relay, the bytes
 *                                   checked, a PING, the buffers freed; then that no libpython is
 *                                   mapped and how many threads ran before the first call
 *   capi_native_check open          only vdsp_client_open: prints its code, message and time
 *   capi_native_check ping N        N PINGs: prints the first call's time and the p50 in µs
 *   capi_native_check sleep MS      a `sleep` TASK of MS ms (its params encoded here), "submitted"
 *                                   once sent, then its outcome (the test kills the relay meanwhile)
 *   capi_native_check alloc SIZE... the DDR alone (no SoC): an owner, SIZE bytes allocated in turn
 *                                   ("alloc CODE MESSAGE" each, kept till the end), then closed
 *   capi_native_check fork          a PING from a fork() child of an open client (a coded refusal),
 *                                   then one from the parent (answered)
 * It prints "key value" lines; exit 0 when every step did what it should.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vdsp_client.h"

#define OP_PING 0x0000
#define OP_MEMCPY 0x0001
#define OP_SLEEP 0x0004

static double ms_since(const struct timespec *t0) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

static int threads(void) {
  DIR *d = opendir("/proc/self/task");
  int n = 0;
  if (d == NULL) return -1;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

/* 1 if /proc/self/maps names a libpython (or any object of an interpreter). */
static int python_mapped(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[4096];
  int found = 0;
  if (f == NULL) return -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (strstr(line, "libpython") != NULL || strstr(line, "/python3") != NULL) found = 1;
  fclose(f);
  return found;
}

static int fail(const char *what, const vdsp_err *err) {
  printf("failed %s\ncode %d\nmessage %s\n", what, err->code, err->message);
  return 1;
}

static int flow(size_t size) {
  printf("threads_before %d\n", threads());
  vdsp_client *c;
  vdsp_err err = {0, "", 0};
  if (vdsp_client_open(NULL, &c, &err) != 0) return fail("open", &err);
  printf("ready %s\n", vdsp_wire_get_str(vdsp_wire_map_get(vdsp_client_ready(c), "name"), NULL));
  printf("owner %u\n", vdsp_ddr_owner_id(vdsp_client_ddr(c)));
  vdsp_ddr_segment src, dst;
  if (vdsp_ddr_alloc(vdsp_client_ddr(c), size, &src, &err) != 0) return fail("alloc", &err);
  if (vdsp_ddr_alloc(vdsp_client_ddr(c), size, &dst, &err) != 0) return fail("alloc", &err);
  printf("phys 0x%llx 0x%llx\n", (unsigned long long)src.phys, (unsigned long long)dst.phys);
  unsigned char *s = src.addr, *d = dst.addr;
  for (size_t i = 0; i < size; i++) s[i] = (unsigned char)(i * 131u + 7u);
  vdsp_handle in = {src.phys, size, 0}, out = {dst.phys, size, 0};
  vdsp_task task = {OP_MEMCPY, 0, 0, 0, &in, 1, &out, 1, NULL, 0};
  vdsp_reply reply;
  if (vdsp_client_call(c, &task, 30000, &reply, &err) != 0) return fail("memcpy", &err);
  printf("memcpy_core %s\n", vdsp_wire_get_str(vdsp_wire_map_get(vdsp_wire_body_root(reply.body), "core"), NULL));
  vdsp_reply_free(&reply);
  printf("copied %d\n", memcmp(s, d, size) == 0);
  vdsp_task ping = {OP_PING, 0, 2, 0, NULL, 0, NULL, 0, NULL, 0};
  if (vdsp_client_call(c, &ping, 30000, &reply, &err) != 0) return fail("ping", &err);
  const vdsp_wire_value *values = vdsp_wire_map_get(vdsp_wire_body_root(reply.body), "values");
  printf("ping_core %s\n", vdsp_wire_get_str(vdsp_wire_map_get(values, "core"), NULL));
  vdsp_reply_free(&reply);
  if (vdsp_ddr_free(vdsp_client_ddr(c), &src, &err) != 0) return fail("free", &err);
  if (vdsp_ddr_free(vdsp_client_ddr(c), &dst, &err) != 0) return fail("free", &err);
  printf("held %llu\n", (unsigned long long)vdsp_ddr_held(vdsp_client_ddr(c)));
  printf("threads_after %d\n", threads());
  printf("python_mapped %d\n", python_mapped());
  vdsp_client_close(c);
  return 0;
}

static int open_only(void) {
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  vdsp_client *c;
  vdsp_err err = {0, "", 0};
  int rc = vdsp_client_open(NULL, &c, &err);
  printf("code %d\nms %.1f\nmessage %s\n", rc, ms_since(&t0), rc ? err.message : "");
  if (rc == 0) vdsp_client_close(c);
  return 0;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int ping(int n) {
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  vdsp_client *c;
  vdsp_err err = {0, "", 0};
  if (vdsp_client_open(NULL, &c, &err) != 0) return fail("open", &err);
  printf("open_ms %.2f\n", ms_since(&t0));
  double *us = calloc((size_t)n, sizeof *us);
  vdsp_task task = {OP_PING, 0, 0, 0, NULL, 0, NULL, 0, NULL, 0};
  for (int i = 0; i < n; i++) {
    struct timespec t;
    vdsp_reply reply;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (vdsp_client_call(c, &task, 30000, &reply, &err) != 0) return fail("ping", &err);
    us[i] = ms_since(&t) * 1e3;
    vdsp_reply_free(&reply);
  }
  qsort(us, (size_t)n, sizeof *us, cmp);
  printf("ping_p50_us %.1f\n", us[n / 2]);
  free(us);
  vdsp_client_close(c);
  return 0;
}

static int forked(void) {
  vdsp_client *c;
  vdsp_err err = {0, "", 0};
  if (vdsp_client_open(NULL, &c, &err) != 0) return fail("open", &err);
  vdsp_task task = {OP_PING, 0, 0, 0, NULL, 0, NULL, 0, NULL, 0};
  vdsp_reply reply;
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    int rc = vdsp_client_call(c, &task, 30000, &reply, &err);
    printf("child_code %d\nchild_message %s\n", rc, err.message);
    vdsp_client_close(c);   /* the child's copies only: the parent's owner and link stay */
    fflush(stdout);
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  printf("child_exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  int rc = vdsp_client_call(c, &task, 30000, &reply, &err);
  printf("parent_code %d\n", rc);
  if (rc == 0) vdsp_reply_free(&reply);
  vdsp_client_close(c);
  return 0;
}

static int sleep_task(unsigned ms) {
  vdsp_client *c;
  vdsp_err err = {0, "", 0};
  if (vdsp_client_open(NULL, &c, &err) != 0) return fail("open", &err);
  /* {"ms": ms} as msgpack: fixmap of 1, fixstr "ms", uint32 */
  unsigned char params[] = {0x81, 0xa2, 'm', 's', 0xce, (unsigned char)(ms >> 24), (unsigned char)(ms >> 16),
                            (unsigned char)(ms >> 8), (unsigned char)ms};
  vdsp_task task = {OP_SLEEP, 0, 0, 0, NULL, 0, NULL, 0, params, sizeof params};
  uint64_t msg_id;
  if (vdsp_client_submit(c, &task, &msg_id, &err) != 0) return fail("submit", &err);
  printf("submitted %llu\n", (unsigned long long)msg_id);
  fflush(stdout);
  vdsp_reply reply;
  int rc = vdsp_client_wait(c, msg_id, 60000, &reply, &err);
  printf("code %d\nmessage %s\n", rc, rc ? err.message : "");
  if (rc == 0) vdsp_reply_free(&reply);
  vdsp_client_close(c);
  return 0;
}

static int allocs(int n, char **sizes) {
  vdsp_ddr_owner *o;
  vdsp_err err = {0, "", 0};
  if (vdsp_ddr_open(NULL, &o, &err) != 0) return fail("owner", &err);
  for (int i = 0; i < n; i++) {
    vdsp_ddr_segment seg;
    err.message[0] = '\0';
    int rc = vdsp_ddr_alloc(o, strtoull(sizes[i], NULL, 0), &seg, &err);
    printf("alloc%d %d %s\n", i, rc, rc ? err.message : "");
  }
  vdsp_ddr_close(o);
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "flow";
  if (strcmp(mode, "flow") == 0) return flow(argc > 2 ? (size_t)strtoul(argv[2], NULL, 0) : 4096);
  if (strcmp(mode, "open") == 0) return open_only();
  if (strcmp(mode, "ping") == 0) return ping(argc > 2 ? atoi(argv[2]) : 1000);
  if (strcmp(mode, "fork") == 0) return forked();
  if (strcmp(mode, "alloc") == 0) return allocs(argc - 2, argv + 2);
  if (strcmp(mode, "sleep") == 0) return sleep_task(argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 1000);
  fprintf(stderr, "usage: %s flow [SIZE] | open | ping N | fork | sleep MS | alloc SIZE...\n", argv[0]);
  return 2;
}
