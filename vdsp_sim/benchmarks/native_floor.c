/*
 * The native direct floor of 'vdsp bench perf' (vdsp_sim/benchmarks/native_floor.py compiles it with
 * the libzmq pyzmq ships): the direct floor's topology and messages (bench_rpc.DirectBaseline: a
 * client DEALER and one echo worker's ROUTER over an ipc socket, a 24-byte header frame and a body
 * frame), with no Python in either process. What any implementation of that topology costs on the
 * machine, beside what the Python floor costs.
 *
 *   native_floor worker DIR
 *       ROUTER bound at ipc://DIR/front.sock; prints "ready", then echoes every message (as the
 *       Python echo worker: a poll of 200 ms, then what has arrived) until its parent exits.
 *   native_floor latency DIR N BODY
 *       N round trips one at a time (after N/10 unmeasured); one JSON line: {"p50_us", "p99_us"}.
 *   native_floor throughput DIR WINDOW SECONDS BODY
 *       WINDOW tasks outstanding (wait for one reply, send one more) for SECONDS; one JSON line:
 *       {"tasks", "seconds", "cpu_s"} (cpu_s: this process, all its threads, libzmq's too).
 *
 * BODY: the body frame's size in bytes. Exit status 1 with a line on stderr on any failure, among
 * them a reply that does not come within 5 s (the worker gone) or that is not the echo asked for.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "vdsp_zmq.h"

/* zmq_bind(3), zmq_msg_send(3): the worker's (vdsp_zmq.h has what the C API's client core uses) */
int zmq_bind(void *socket, const char *endpoint);
int zmq_msg_send(zmq_msg_t *msg, void *socket, int flags);

#define HEADER 24           /* PROTOCOL.md §3: magic "VD", version 2, TASK 0x10, ..., msg_id at byte 8 */
#define REPLY_WAIT_MS 5000  /* a reply later than this: the worker is gone */
#define MAX_BODY 65536
#define MAX_LAT 1000000

/* A failure said on stderr; -1 */
static int fail(const char *what) {
  fprintf(stderr, "native_floor: %s: %s\n", what, zmq_strerror(zmq_errno()));
  return -1;
}

static double seconds(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double cpu_seconds(void) {
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  return (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) + (double)(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

static void *open_socket(void *ctx, int type) {
  void *s = zmq_socket(ctx, type);
  int hwm = 100000, linger = 0;
  if (s != NULL && (zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm) != 0 ||
                    zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm) != 0 ||
                    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger) != 0)) {
    zmq_close(s);
    return NULL;
  }
  return s;
}

/* One message that has arrived, echoed: 1; 0 when none waits; -1 on a failure (said on stderr).
 * A message of more than MAX_FRAMES frames is not the floor's: received whole, dropped. */
#define MAX_FRAMES 4
static int echo_one(void *s) {
  zmq_msg_t frames[MAX_FRAMES + 1]; /* the last: a scratch for the frames past MAX_FRAMES */
  int count = 0, more = 1;
  while (more) {
    zmq_msg_t *m = &frames[count < MAX_FRAMES ? count : MAX_FRAMES];
    zmq_msg_init(m);
    if (zmq_msg_recv(m, s, count == 0 ? ZMQ_DONTWAIT : 0) < 0) {
      int none = count == 0 && zmq_errno() == EAGAIN;
      zmq_msg_close(m);
      for (int i = 0; i < count && i < MAX_FRAMES; i++) zmq_msg_close(&frames[i]);
      return none ? 0 : fail("receive");
    }
    more = zmq_msg_more(m);
    if (count >= MAX_FRAMES) zmq_msg_close(m);
    count++;
  }
  if (count > MAX_FRAMES) {
    for (int i = 0; i < MAX_FRAMES; i++) zmq_msg_close(&frames[i]);
    return 1;
  }
  for (int i = 0; i < count; i++) {
    if (zmq_msg_send(&frames[i], s, i + 1 < count ? ZMQ_SNDMORE : 0) < 0) {
      for (int j = i; j < count; j++) zmq_msg_close(&frames[j]);
      return fail("send");
    }
  }
  return 1;
}

/* Echo what arrives until the parent that started us (``parent``, read before "ready") is gone. */
static int serve(void *s, pid_t parent) {
  zmq_pollitem_t item = {s, 0, ZMQ_POLLIN, 0};
  for (;;) {
    int n = zmq_poll(&item, 1, 200);
    if (n < 0 && zmq_errno() != EINTR) {
      fail("poll");
      return 1;
    }
    if (n <= 0) {
      if (getppid() != parent) return 0;
      continue;
    }
    int got;
    while ((got = echo_one(s)) > 0) {
    }
    if (got < 0) return 1;
  }
}

static int worker(void *ctx, const char *endpoint) {
  pid_t parent = getppid(); /* before "ready": a parent may exit as soon as it has read it */
  void *s = open_socket(ctx, ZMQ_ROUTER);
  if (s == NULL || zmq_bind(s, endpoint) != 0) {
    fail("bind");
    if (s != NULL) zmq_close(s);
    return 1;
  }
  printf("ready\n");
  fflush(stdout);
  int rc = serve(s, parent);
  zmq_close(s); /* before zmq_ctx_term, which waits for every socket of the context */
  return rc;
}

static void *client_socket(void *ctx, const char *endpoint) {
  void *s = open_socket(ctx, ZMQ_DEALER);
  if (s != NULL && zmq_connect(s, endpoint) != 0) {
    zmq_close(s);
    return NULL;
  }
  return s;
}

static int send_task(void *s, uint64_t msg_id, const unsigned char *body, size_t body_size) {
  unsigned char header[HEADER] = {'V', 'D', 2, 0x10};
  memcpy(header + 8, &msg_id, sizeof msg_id); /* little-endian, as the protocol's */
  if (zmq_send(s, header, HEADER, ZMQ_SNDMORE) < 0 || zmq_send(s, body, body_size, 0) < 0) return -1;
  return 0;
}

/* One reply: its msg_id, or 0 with a line on stderr (none within REPLY_WAIT_MS, a receive that
 * failed, not a header and a body) */
static uint64_t reply(void *s) {
  zmq_pollitem_t item = {s, 0, ZMQ_POLLIN, 0};
  int n = zmq_poll(&item, 1, REPLY_WAIT_MS);
  if (n <= 0) {
    if (n == 0) fprintf(stderr, "native_floor: no reply within %d ms\n", REPLY_WAIT_MS);
    else fail("poll");
    return 0;
  }
  uint64_t msg_id = 0;
  int frames = 0, more = 1;
  while (more) {
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, s, 0) < 0) {
      zmq_msg_close(&m);
      fail("receive");
      return 0;
    }
    if (frames == 0 && zmq_msg_size(&m) == HEADER) memcpy(&msg_id, (unsigned char *)zmq_msg_data(&m) + 8, sizeof msg_id);
    more = zmq_msg_more(&m);
    zmq_msg_close(&m);
    frames++;
  }
  if (frames != 2 || msg_id == 0) {
    fprintf(stderr, "native_floor: a reply of %d frames, not the echo of a task\n", frames);
    return 0;
  }
  return msg_id;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int latency(void *s, long n, const unsigned char *body, size_t body_size) {
  double *lat = malloc((size_t)n * sizeof *lat);
  if (lat == NULL) return 1;
  uint64_t id = 0;
  for (long i = -(n / 10); i < n; i++) {
    double t0 = seconds(CLOCK_MONOTONIC);
    if (send_task(s, ++id, body, body_size) != 0) {
      free(lat);
      return -fail("send");
    }
    if (reply(s) != id) {
      fprintf(stderr, "native_floor: the reply to %llu did not come back\n", (unsigned long long)id);
      free(lat);
      return 1;
    }
    if (i >= 0) lat[i] = (seconds(CLOCK_MONOTONIC) - t0) * 1e6;
  }
  qsort(lat, (size_t)n, sizeof *lat, cmp);
  printf("{\"p50_us\": %.1f, \"p99_us\": %.1f}\n", lat[n / 2], lat[(size_t)((double)(n - 1) * 0.99)]);
  free(lat);
  return 0;
}

static int throughput(void *s, long window, double duration, const unsigned char *body, size_t body_size) {
  uint64_t sent = 0, next = 1;
  long outstanding = 0, done = 0;
  double c0 = cpu_seconds(), t0 = seconds(CLOCK_MONOTONIC), end = t0 + duration, now = t0;
  while (now < end || outstanding > 0) {
    while (now < end && outstanding < window) {
      if (send_task(s, ++sent, body, body_size) != 0) return -fail("send");
      outstanding++;
    }
    if (reply(s) != next) { /* a DEALER over one connection keeps the order */
      fprintf(stderr, "native_floor: the reply to %llu did not come back in order\n", (unsigned long long)next);
      return 1;
    }
    next++;
    outstanding--;
    done++;
    if ((done & 63) == 0 || outstanding == 0) now = seconds(CLOCK_MONOTONIC);
  }
  double wall = seconds(CLOCK_MONOTONIC) - t0;
  printf("{\"tasks\": %ld, \"seconds\": %.6f, \"cpu_s\": %.6f}\n", done, wall, cpu_seconds() - c0);
  return 0;
}

static long number(const char *text, long lo, long hi) {
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  return errno != 0 || *end != '\0' || v < lo || v > hi ? -1 : v;
}

int main(int argc, char **argv) {
  const char *usage = "usage: native_floor worker DIR | latency DIR N BODY | throughput DIR WINDOW SECONDS BODY\n";
  if (argc < 3 || strlen(argv[2]) > 400) {
    fputs(usage, stderr);
    return 2;
  }
  char endpoint[512];
  snprintf(endpoint, sizeof endpoint, "ipc://%s/front.sock", argv[2]);
  int is_worker = strcmp(argv[1], "worker") == 0 && argc == 3;
  int is_lat = strcmp(argv[1], "latency") == 0 && argc == 5;
  int is_tput = strcmp(argv[1], "throughput") == 0 && argc == 6;
  long n = is_lat ? number(argv[3], 1, MAX_LAT) : is_tput ? number(argv[3], 1, 100000) : 0;
  double duration = is_tput ? atof(argv[4]) : 0.0;
  long body_size = is_lat || is_tput ? number(argv[argc - 1], 0, MAX_BODY) : 0;
  if (!(is_worker || is_lat || is_tput) || n < 0 || body_size < 0 || (is_tput && !(duration > 0 && duration < 3600))) {
    fputs(usage, stderr);
    return 2;
  }
  void *ctx = zmq_ctx_new();
  if (ctx == NULL) return -fail("context");
  int rc;
  if (is_worker) {
    rc = worker(ctx, endpoint);
  } else {
    static unsigned char body[MAX_BODY];
    void *s = client_socket(ctx, endpoint);
    rc = s == NULL ? -fail("connect") : is_lat ? latency(s, n, body, (size_t)body_size)
                                              : throughput(s, n, duration, body, (size_t)body_size);
    if (s != NULL) zmq_close(s);
  }
  zmq_ctx_term(ctx);
  return rc;
}
