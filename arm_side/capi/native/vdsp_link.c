/* vdsp_link.c: see vdsp_link.h. The rules and messages are those of vdsp_board/processes/rundir.py and
 * vdsp_board/sockets/ipclink.py. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "vdsp_link.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vdsp_curve.h"
#include "vdsp_zmq.h"

#define HWM 100000
#define START_HINT "Start one with 'vdsp up -d' (stop it with 'vdsp down'), or set VDSP_RUNTIME_DIR to the runtime dir " \
                   "of a SoC that is up"

static const char *env(const char *name) {
  const char *v = getenv(name);
  return v != NULL && *v ? v : NULL;
}

static int is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* rundir.check_private_dir: 0, or INVALID_ARGUMENT saying what is wrong and how to fix it. */
static int check_private_dir(const char *path, vdsp_err *err) {
  struct stat st;
  if (lstat(path, &st) != 0)
    return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "runtime directory %s: %s", path, strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "runtime directory %s is not a directory (a symlink or a file): "
                     "refusing it; remove it or set VDSP_RUNTIME_DIR", path);
  if (st.st_uid != getuid())
    return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "runtime directory %s is owned by uid %ld, not by you (uid %ld): "
                     "refusing it; remove it or set VDSP_RUNTIME_DIR", path, (long)st.st_uid, (long)getuid());
  if (st.st_mode & 077)
    return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "bad permissions %04o on runtime directory %s: it must be private "
                     "(chmod 700 %s)", (unsigned)(st.st_mode & 07777), path, path);
  return 0;
}

/* rundir.socket_dir for a client: the runtime dir itself, or what its `sockets` link names. */
static int socket_dir(const char *rt, char *out, int unavailable, vdsp_err *err) {
  size_t len = strlen(rt);
  if (len <= VDSP_SHORT_ENOUGH) {
    memcpy(out, rt, len + 1);
    return 0;
  }
  char link[PATH_MAX], target[PATH_MAX];
  if (snprintf(link, sizeof link, "%s/sockets", rt) >= (int)sizeof link)
    return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "runtime directory path %.200s... is too long", rt);
  struct stat st;
  const char *problem = NULL;
  char why[VDSP_ERR_MAX];
  if (lstat(link, &st) != 0) {
    if (errno != ENOENT) return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "%s: %s", link, strerror(errno));
    return vdsp_fail(err, unavailable, "no SoC is up in %s: that path is too long for unix sockets "
                     "(%zu characters), so a SoC there keeps them in the short directory its link %s names, and "
                     "there is no such link. Start one with 'vdsp up -d'", rt, len, link);
  }
  if (!S_ISLNK(st.st_mode))
    return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "%s is not a symlink: the runtime directory's link to the short "
                     "directory of its sockets is one; remove %s", link, link);
  ssize_t n = readlink(link, target, sizeof target - 1);
  if (n < 0) return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "%s: %s", link, strerror(errno));
  target[n] = '\0';
  vdsp_err inner = {0, "", 0};
  if (target[0] != '/' || (size_t)n > VDSP_SHORT_ENOUGH) {
    problem = "is no short absolute path";
  } else if (lstat(target, &st) != 0) {
    problem = "is gone";
  } else if (check_private_dir(target, &inner) != 0) {
    snprintf(why, sizeof why, "is refused (%.600s)", inner.message);
    problem = why;
  }
  if (problem != NULL)
    return vdsp_fail(err, unavailable, "no SoC is up in %s: that path is too long for unix sockets "
                     "(%zu characters), so a SoC there keeps them in the short directory its link %s names, and "
                     "it names %s, which %s. Start one with 'vdsp up -d'", rt, len, link, target, problem);
  memcpy(out, target, (size_t)n + 1);
  return 0;
}

int vdsp_link_runtime_dir(char *out, size_t len, vdsp_err *err) {
  const char *given = env("VDSP_RUNTIME_DIR"), *xdg = env("XDG_RUNTIME_DIR");
  int n;
  if (given != NULL) n = snprintf(out, len, "%s", given);
  else if (xdg != NULL && is_dir(xdg)) n = snprintf(out, len, "%s/vdsp", xdg);
  else n = snprintf(out, len, "/tmp/vdsp-%ld", (long)getuid());
  if (n < 0 || (size_t)n >= len || n >= VDSP_ENDPOINT_MAX)
    return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "runtime directory path %.200s... is too long", out);
  return 0;
}

/* The runtime dir, checked, and the directory of its sockets; `unavailable`: the code of "no SoC
 * is up there" (RELAY_UNAVAILABLE for the relay, CORE_OFFLINE for the cores). */
static int sockets_of(char *rt, char *sockets, int unavailable, vdsp_err *err) {
  int rc = vdsp_link_runtime_dir(rt, PATH_MAX, err);
  if (rc != 0) return rc;
  struct stat st;
  if (lstat(rt, &st) != 0 && errno == ENOENT)
    return vdsp_fail(err, unavailable, "no SoC is up in %s: that runtime directory does not exist. " START_HINT, rt);
  rc = check_private_dir(rt, err);
  return rc != 0 ? rc : socket_dir(rt, sockets, unavailable, err);
}

/* ipc://<sockets>/<name>.sock into `out`; INVALID_ARGUMENT past 107 characters. */
static int ipc_endpoint(char *out, const char *sockets, const char *name, vdsp_err *err) {
  int n = snprintf(out, VDSP_ENDPOINT_MAX, "ipc://%s/%s.sock", sockets, name);
  if (n < 0 || n - 6 > VDSP_IPC_PATH_MAX)
    return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "ipc socket path %s/%s.sock is %d characters, the limit is %d; "
                     "set VDSP_RUNTIME_DIR to a shorter directory", sockets, name, n - 6, VDSP_IPC_PATH_MAX);
  return 0;
}

int vdsp_link_relay_endpoint(char *out, char *rt_out, vdsp_err *err) {
  const char *override = env("VDSP_RELAY_ENDPOINT");
  if (rt_out != NULL) rt_out[0] = '\0';
  if (override != NULL) {
    if (strlen(override) >= VDSP_ENDPOINT_MAX)
      return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "VDSP_RELAY_ENDPOINT is longer than %d characters",
                       VDSP_ENDPOINT_MAX - 1);
    strcpy(out, override);
    return 0;
  }
  char rt[PATH_MAX], sockets[PATH_MAX];
  int rc = sockets_of(rt, sockets, VDSP_E_RELAY_UNAVAILABLE, err);
  if (rt_out != NULL) strcpy(rt_out, rt);
  return rc != 0 ? rc : ipc_endpoint(out, sockets, "relay", err);
}

int vdsp_link_core_endpoints(vdsp_link_core *cores, size_t max, size_t *n, vdsp_err *err) {
  static const char *const names[] = {"vdsp0", "vdsp1"};   /* protocol.constants.CORE_NAMES */
  const char *list = env("VDSP_CORE_ENDPOINTS");
  *n = 0;
  if (list == NULL) {
    char rt[PATH_MAX], sockets[PATH_MAX];
    int rc = sockets_of(rt, sockets, VDSP_E_CORE_OFFLINE, err);
    for (size_t i = 0; rc == 0 && i < sizeof names / sizeof *names && i < max; i++) {
      snprintf(cores[i].name, sizeof cores[i].name, "%s", names[i]);
      rc = ipc_endpoint(cores[i].endpoint, sockets, names[i], err);
      if (rc == 0) *n = i + 1;
    }
    return rc;
  }
  /* rundir.parse_core_list: name=url items, comma-separated, in core order */
  for (const char *item = list; *item;) {
    const char *comma = strchr(item, ','), *end = comma != NULL ? comma : item + strlen(item);
    while (item < end && (*item == ' ' || *item == '\t')) item++;
    const char *stop = end;
    while (stop > item && (stop[-1] == ' ' || stop[-1] == '\t')) stop--;
    const char *eq = memchr(item, '=', (size_t)(stop - item));
    int len = (int)(stop - item);
    if (eq == NULL || eq == item || memmem(eq + 1, (size_t)(stop - eq - 1), "://", 3) == NULL)
      return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "core endpoint '%.*s' must look like vdsp0=ipc:///path or "
                       "vdsp0=tcp://host:port", len > 200 ? 200 : len, item);
    if (*n >= max)
      return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "VDSP_CORE_ENDPOINTS names more than %zu cores", max);
    size_t name_len = (size_t)(eq - item), url_len = (size_t)(stop - eq - 1);
    if (name_len >= sizeof cores[*n].name || url_len >= VDSP_ENDPOINT_MAX)
      return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "core endpoint '%.*s' is too long", len > 200 ? 200 : len, item);
    for (size_t i = 0; i < *n; i++)   /* a name given twice: its last endpoint, as a dict keeps it */
      if (strlen(cores[i].name) == name_len && memcmp(cores[i].name, item, name_len) == 0) {
        memcpy(cores[i].endpoint, eq + 1, url_len);
        cores[i].endpoint[url_len] = '\0';
        name_len = 0;
      }
    if (name_len != 0) {
      memcpy(cores[*n].name, item, name_len);
      cores[*n].name[name_len] = '\0';
      memcpy(cores[*n].endpoint, eq + 1, url_len);
      cores[*n].endpoint[url_len] = '\0';
      (*n)++;
    }
    item = comma != NULL ? comma + 1 : end;
  }
  return 0;
}

void vdsp_link_connectable(const char *announced, const char *via, char *out) {
  static const char *const wildcards[] = {"tcp://0.0.0.0:", "tcp://*:"};
  for (size_t i = 0; i < 2; i++) {
    size_t w = strlen(wildcards[i]);
    const char *colon = strrchr(via, ':');
    if (strncmp(announced, wildcards[i], w) == 0 && strncmp(via, "tcp://", 6) == 0 && colon != NULL) {
      snprintf(out, VDSP_ENDPOINT_MAX, "tcp://%.*s:%s", (int)(colon - via - 6), via + 6, announced + w);
      return;
    }
  }
  snprintf(out, VDSP_ENDPOINT_MAX, "%s", announced);
}

static int set_int(void *sock, int option, int value) {
  return zmq_setsockopt(sock, option, &value, sizeof value);
}

static int zmq_failed(vdsp_err *err, const char *what, const char *endpoint) {
  int e = zmq_errno();
  return vdsp_fail(err, e == ENOMEM ? VDSP_E_OUT_OF_MEMORY : VDSP_E_RELAY_UNAVAILABLE, "%s %s: %s", what, endpoint,
                   zmq_strerror(e));
}

/* ipclink._open_checked, then the socket's own entry: RELAY_UNAVAILABLE when none can be there. */
static int open_dir(vdsp_link *link, const char *dir, const char *name, vdsp_err *err) {
  const char *ep = link->endpoint;
  int fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return vdsp_fail(err, VDSP_E_RELAY_UNAVAILABLE, "cannot connect to %s: its directory %s: %s (a symlink, gone, or "
                     "not a directory)", ep, dir, strerror(errno));
  link->dir_fd = fd;
  struct stat st;
  if (fstat(fd, &st) != 0)
    return vdsp_fail(err, VDSP_E_RELAY_UNAVAILABLE, "cannot connect to %s: %s", ep, strerror(errno));
  if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077))
    return vdsp_fail(err, VDSP_E_RELAY_UNAVAILABLE, "refusing to connect to %s: its directory %s is owned by uid %ld, "
                     "mode %04o, not a private directory of ours (uid %ld, no group or world access)", ep, dir,
                     (long)st.st_uid, (unsigned)(st.st_mode & 07777), (long)getuid());
  if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISSOCK(st.st_mode))
    return vdsp_fail(err, VDSP_E_RELAY_UNAVAILABLE, "no relay answers at %s: %s. " START_HINT, ep,
                     errno == ENOENT ? "no socket is there" : "that is not a socket");
  return 0;
}

/* The DEALER and its monitor (of `events`, over inproc), the options set; tcp: a CURVE client
 * of `keys` toward `server_key`. 0, or a code with the link closed. */
static int make_socket(void *context, vdsp_link *link, const vdsp_curve_keys *keys, const char *server_key,
                       vdsp_err *err) {
  static unsigned long links;   /* inproc names of monitors, unique in the process */
  char inproc[64];
  snprintf(inproc, sizeof inproc, "inproc://vdsp-link-%ld-%lu", (long)getpid(),
           __atomic_fetch_add(&links, 1, __ATOMIC_RELAXED));
  int events = ZMQ_EVENT_CONNECTED | ZMQ_EVENT_CLOSED | ZMQ_EVENT_DISCONNECTED;
  if (link->tcp)
    events |= ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
              ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;
  link->sock = zmq_socket(context, ZMQ_DEALER);
  int bad = link->sock == NULL || set_int(link->sock, ZMQ_LINGER, 0) ||
            set_int(link->sock, ZMQ_RECONNECT_IVL, link->tcp ? 50 : -1) || set_int(link->sock, ZMQ_SNDHWM, HWM) ||
            set_int(link->sock, ZMQ_RCVHWM, HWM);
  if (!bad && link->tcp)
    bad = zmq_setsockopt(link->sock, ZMQ_CURVE_SERVERKEY, server_key, VDSP_CURVE_KEY_LEN) ||
          zmq_setsockopt(link->sock, ZMQ_CURVE_PUBLICKEY, keys->public_key, VDSP_CURVE_KEY_LEN) ||
          zmq_setsockopt(link->sock, ZMQ_CURVE_SECRETKEY, keys->secret_key, VDSP_CURVE_KEY_LEN);
  if (!bad)
    bad = zmq_socket_monitor(link->sock, inproc, events) ||
          (link->monitor = zmq_socket(context, ZMQ_PAIR)) == NULL || set_int(link->monitor, ZMQ_LINGER, 0) ||
          zmq_connect(link->monitor, inproc);
  if (!bad) return 0;
  int rc = zmq_failed(err, "cannot make a socket for", link->endpoint);
  vdsp_link_close(link);
  return rc;
}

/* A CURVE link to a tcp endpoint (§16): libzmq connects it, and again whenever it closes. */
static int open_tcp(void *context, const vdsp_curve_keys *keys, const char *server_key, vdsp_link *link,
                    vdsp_err *err) {
  if (keys == NULL)
    return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "%s: a tcp endpoint needs CURVE keys (PROTOCOL.md §16)",
                     link->endpoint);
  if (server_key == NULL || !*server_key) server_key = keys->server_key;
  if (!vdsp_curve_valid(server_key))
    return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "server key '%.50s' is not a Z85 CURVE key (40 characters)",
                     server_key);
  link->tcp = 1;
  int rc = make_socket(context, link, keys, server_key, err);
  if (rc == 0 && zmq_connect(link->sock, link->endpoint)) {
    rc = zmq_failed(err, "cannot connect to", link->endpoint);
    vdsp_link_close(link);
  }
  return rc;
}

int vdsp_link_open(void *context, const char *endpoint, const void *keys, const char *server_key, vdsp_link *link,
                   vdsp_err *err) {
  memset(link, 0, sizeof *link);
  link->dir_fd = -1;
  if (strlen(endpoint) >= VDSP_ENDPOINT_MAX)
    return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "endpoint is longer than %d characters", VDSP_ENDPOINT_MAX - 1);
  strcpy(link->endpoint, endpoint);
  if (strncmp(endpoint, "tcp://", 6) == 0) return open_tcp(context, keys, server_key, link, err);
  if (strncmp(endpoint, "ipc://", 6) != 0)
    return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "unsupported endpoint %s: use ipc:// or tcp://", endpoint);
  const char *path = endpoint + 6;
  if (strlen(path) > VDSP_IPC_PATH_MAX)
    return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "ipc socket path %s is %zu characters, the limit is %d; set "
                     "VDSP_RUNTIME_DIR to a shorter directory", path, strlen(path), VDSP_IPC_PATH_MAX);
  char dir[PATH_MAX], via[PATH_MAX + 64];
  const char *name = path, *slash = strrchr(path, '/');
  if (path[0] != '@') {
    if (slash == NULL) {
      strcpy(dir, ".");
    } else {
      size_t n = (size_t)(slash - path);
      memcpy(dir, path, n);
      dir[n ? n : 1] = '\0';
      if (!n) dir[0] = '/';
      name = slash + 1;
    }
    int rc = open_dir(link, dir, name, err);
    if (rc != 0) {
      vdsp_link_close(link);
      return rc;
    }
  }
  int rc = make_socket(context, link, NULL, NULL, err);
  if (rc != 0) return rc;
  if (link->dir_fd < 0) {   /* an abstract name: no directory to check */
    if (zmq_connect(link->sock, endpoint)) rc = zmq_failed(err, "cannot connect to", endpoint);
  } else {
    snprintf(via, sizeof via, "/proc/self/fd/%d", link->dir_fd);
    if (is_dir(via)) {
      snprintf(via, sizeof via, "ipc:///proc/self/fd/%d/%s", link->dir_fd, name);
      if (zmq_connect(link->sock, via)) rc = zmq_failed(err, "cannot connect to", endpoint);
    } else {   /* no /proc: the path itself, the directory there checked to be the one opened */
      struct stat opened, now;
      if (zmq_connect(link->sock, endpoint)) rc = zmq_failed(err, "cannot connect to", endpoint);
      else if (fstat(link->dir_fd, &opened) || lstat(dir, &now) || opened.st_dev != now.st_dev ||
               opened.st_ino != now.st_ino)
        rc = vdsp_fail(err, VDSP_E_RELAY_UNAVAILABLE, "refusing %s: its directory %s was replaced while connecting",
                       endpoint, dir);
    }
  }
  if (rc != 0) vdsp_link_close(link);
  return rc;
}

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A tcp link's monitor event (arm_side/channel.py's Watch.heard). */
static void heard_tcp(vdsp_link *link, int event, uint32_t value) {
  if (event == ZMQ_EVENT_CONNECTED) {
    link->up = 1;
  } else if (event == ZMQ_EVENT_DISCONNECTED) {
    link->lost |= link->handshook;
    link->handshook = 0;
  } else if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
    link->handshook = 1;
    link->failures = 0;
  } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
    snprintf(link->refusal, sizeof link->refusal, "the server did not accept this client key (ZAP status %u: not on "
             "its allow-list, or revoked)", (unsigned)value);
  } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL || event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
    long long now = now_ms();   /* a wrong server key: the server drops every handshake */
    if (link->failures++ == 0) link->failing_since_ms = now;
    if (link->failures >= VDSP_LINK_HANDSHAKE_FAILURES && now - link->failing_since_ms >= VDSP_LINK_HANDSHAKE_FAILING_MS &&
        !link->refusal[0])
      snprintf(link->refusal, sizeof link->refusal, "the server did not accept this client's CURVE handshake %d times: "
               "is VDSP_SERVER_KEY the key of this server?", link->failures);
  }
}

int vdsp_link_poll_events(vdsp_link *link) {
  if (link->monitor == NULL) return 1;
  for (;;) {
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, link->monitor, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&msg);
      break;
    }
    int event = -1;
    uint32_t value = 0;
    if (zmq_msg_size(&msg) == 6) {   /* uint16 event, uint32 value, in the host's order */
      uint16_t e;
      memcpy(&e, zmq_msg_data(&msg), sizeof e);
      memcpy(&value, (const char *)zmq_msg_data(&msg) + 2, sizeof value);
      event = e;
    }
    int more = zmq_msg_more(&msg);
    zmq_msg_close(&msg);
    while (more) {   /* the endpoint frame */
      zmq_msg_init(&msg);
      if (zmq_msg_recv(&msg, link->monitor, ZMQ_DONTWAIT) < 0) more = 0;
      else more = zmq_msg_more(&msg);
      zmq_msg_close(&msg);
    }
    if (link->tcp) heard_tcp(link, event, value);
    else if (event == ZMQ_EVENT_CONNECTED) link->up = 1;
    else if (event == ZMQ_EVENT_CLOSED && !link->up) link->failed = 1;   /* the attempt's socket closed */
    else if (event == ZMQ_EVENT_DISCONNECTED) link->ended = 1;
  }
  return !link->tcp && (link->failed || link->ended);
}

int vdsp_link_take_lost(vdsp_link *link) {
  vdsp_link_poll_events(link);
  int lost = link->lost;
  link->lost = 0;
  return lost;
}

void vdsp_link_close(vdsp_link *link) {
  if (link->sock != NULL) {
    if (link->monitor != NULL) zmq_socket_monitor(link->sock, NULL, 0);
    zmq_close(link->sock);
    link->sock = NULL;
  }
  if (link->monitor != NULL) {
    zmq_close(link->monitor);
    link->monitor = NULL;
  }
  if (link->dir_fd >= 0) {
    close(link->dir_fd);
    link->dir_fd = -1;
  }
}
