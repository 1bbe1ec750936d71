/* vdsp_client.c: see vdsp_client.h. The conversation is PROTOCOL.md §15.2 (relay mode); the
 * checks of a reply those of protocol.wire and protocol.messages (BODY_FIELDS). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "vdsp_client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "vdsp_link.h"
#include "vdsp_zmq.h"

#define DEFAULT_HEARTBEAT_MS 500
#define START_HINT "Start one with 'vdsp up -d' (stop it with 'vdsp down'), or set VDSP_RUNTIME_DIR to the runtime dir " \
                   "of a SoC that is up"

enum { FREE, WAITING, DONE };

typedef struct {
  int state;
  uint64_t msg_id;
  int code;                    /* DONE: 0 for READY/RESULT, else the failure's code */
  vdsp_wire_header header;
  vdsp_wire_body *body;        /* DONE with code 0 */
  char message[VDSP_ERR_MAX];  /* DONE with a code */
} slot;

struct vdsp_client {
  pid_t pid;                   /* the process that opened it: the only one that may use it */
  void *ctx;
  vdsp_link link;
  vdsp_ddr_owner *ddr;
  vdsp_wire_writer *writer;
  vdsp_wire_body *ready;
  uint64_t next_id;            /* msg_ids from 1 (§3.5: 0 is a one-way message's) */
  int heartbeat_ms;
  int64_t last_sent_ms;
  char name[64];
  slot slots[VDSP_CLIENT_MAX_INFLIGHT];   /* invariant: a msg_id is in at most one non-FREE slot */
};

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int not_ours(const vdsp_client *c, vdsp_err *err) {
  if (c->pid == getpid()) return 0;
  return vdsp_fail(err, VDSP_E_API_USE_ERROR, "this client was opened by process %ld: a child made by fork() cannot "
                   "use it (its sockets and DDR owner are the parent's); open a client of its own", (long)c->pid);
}

static int link_lost(const vdsp_client *c, vdsp_err *err) {
  if (c->link.failed && !c->link.up)
    return vdsp_fail(err, VDSP_E_RELAY_UNAVAILABLE, "relay server is not reachable: nothing listens at %s. " START_HINT,
                     c->link.endpoint);
  return vdsp_fail(err, VDSP_E_RELAY_UNAVAILABLE, "relay server is not reachable: it closed the connection at %s (it "
                   "exited or was restarted); requests in flight get no reply", c->link.endpoint);
}

/* --- sending ---------------------------------------------------------------------------- */

static int send_message(vdsp_client *c, uint8_t command, uint64_t msg_id, const vdsp_task *task, const uint8_t *body,
                        size_t len, vdsp_err *err) {
  vdsp_wire_header h = {VDSP_WIRE_VERSION, command, 0, 0, 0, msg_id, 0};
  if (task != NULL) {
    h.op = task->op;
    h.priority = task->priority;
    h.core = task->core;
    h.custom_id = task->custom_id;
  }
  uint8_t head[VDSP_WIRE_HEADER_SIZE];
  vdsp_wire_header_pack(&h, head);
  /* never blocking: an ipc link that failed or ended has no pipe, and a blocking send would wait forever */
  if (zmq_send(c->link.sock, head, sizeof head, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
      zmq_send(c->link.sock, body, len, ZMQ_DONTWAIT) < 0) {
    int e = zmq_errno();
    vdsp_link_poll_events(&c->link);
    if (e == EAGAIN && (c->link.failed || c->link.ended)) return link_lost(c, err);
    return vdsp_fail(err, VDSP_E_RELAY_UNAVAILABLE, "relay server is not reachable: cannot send to %s: %s",
                     c->link.endpoint, zmq_strerror(e));
  }
  c->last_sent_ms = now_ms();
  return 0;
}

static int send_empty(vdsp_client *c, uint8_t command, vdsp_err *err) {
  static const uint8_t empty_map = 0x80;
  return send_message(c, command, 0, NULL, &empty_map, 1, err);
}

static slot *find(vdsp_client *c, uint64_t msg_id) {
  for (size_t i = 0; msg_id != 0 && i < VDSP_CLIENT_MAX_INFLIGHT; i++)
    if (c->slots[i].state != FREE && c->slots[i].msg_id == msg_id) return &c->slots[i];
  return NULL;
}

static void release(slot *s) {
  vdsp_wire_body_free(s->body);
  memset(s, 0, sizeof *s);
}

/* Send a request whose body the writer holds; its slot. */
static int request(vdsp_client *c, uint8_t command, const vdsp_task *task, slot **out, vdsp_err *err) {
  slot *s = NULL;
  for (size_t i = 0; s == NULL && i < VDSP_CLIENT_MAX_INFLIGHT; i++)
    if (c->slots[i].state == FREE) s = &c->slots[i];
  if (s == NULL)
    return vdsp_fail(err, VDSP_E_TASK_NUM_EXCEED_LIMIT, "%d requests of this client are in flight already: wait for "
                     "one first", VDSP_CLIENT_MAX_INFLIGHT);
  const uint8_t *body;
  size_t len;
  vdsp_wire_error werr;
  if (vdsp_wire_writer_finish(c->writer, &body, &len, &werr) != 0) return vdsp_fail_wire(err, &werr);
  uint64_t msg_id = c->next_id++;
  int rc = send_message(c, command, msg_id, task, body, len, err);
  if (rc != 0) return rc;
  s->state = WAITING;
  s->msg_id = msg_id;
  *out = s;
  return 0;
}

/* --- receiving -------------------------------------------------------------------------- */

enum { T_STR, T_INT, T_LIST };
typedef struct {
  const char *name;
  int type;
  int required;
} field;

static const field READY_FIELDS[] = {{"name", T_STR, 1},       {"role", T_STR, 1},
                                     {"protocol", T_INT, 1},   {"state", T_STR, 0},
                                     {"firmware_version", T_STR, 0}, {"operators", T_LIST, 0},
                                     {"fw_endpoint", T_STR, 0}, {"fw_server_key", T_STR, 0},
                                     {"heartbeat_ms", T_INT, 0}, {"cores", T_LIST, 0}};
static const field ERROR_FIELDS[] = {{"code", T_INT, 1}, {"name", T_STR, 0}, {"message", T_STR, 0}};

static const char *kind_name(int kind) {
  static const char *names[] = {"NoneType", "bool", "int", "int", "float", "str", "bytes", "list", "dict"};
  return kind >= 0 && kind <= VDSP_WIRE_MAP ? names[kind] : "?";
}

/* protocol.messages.check_body: required fields present, known fields of their type (a bool is no int). */
static int check_fields(const char *command, const vdsp_wire_value *root, const field *fields, size_t n,
                        vdsp_err *err) {
  static const char *type_names[] = {"str", "int", "list"};
  for (size_t i = 0; i < n; i++) {
    const vdsp_wire_value *v = vdsp_wire_map_get(root, fields[i].name);
    if (v == NULL) {
      if (fields[i].required)
        return vdsp_fail(err, VDSP_E_PROTOCOL_ERROR, "%s body lacks required field '%s'", command, fields[i].name);
      continue;
    }
    int ok = fields[i].type == T_STR    ? v->kind == VDSP_WIRE_STR
             : fields[i].type == T_INT  ? v->kind == VDSP_WIRE_INT || v->kind == VDSP_WIRE_UINT
                                        : v->kind == VDSP_WIRE_ARRAY;
    if (!ok)
      return vdsp_fail(err, VDSP_E_PROTOCOL_ERROR, "%s field '%s' must be %s, got %s", command, fields[i].name,
                       type_names[fields[i].type], kind_name(v->kind));
  }
  return 0;
}

static void fail_slot(slot *s, const vdsp_err *e) {
  s->state = DONE;
  s->code = e->code;
  memcpy(s->message, e->message, sizeof s->message);
}

/* An ERROR's body into the slot: its code (§8.1: an unusable one is HB_DNN_RUN_TASK_FAILED) and message. */
static void take_error(slot *s, const vdsp_wire_value *root) {
  int64_t code = 0;
  const char *name = vdsp_wire_get_str(vdsp_wire_map_get(root, "name"), NULL);
  const char *message = vdsp_wire_get_str(vdsp_wire_map_get(root, "message"), NULL);
  vdsp_wire_get_int(vdsp_wire_map_get(root, "code"), &code);
  vdsp_err e;
  if (code >= 0 || code < INT32_MIN)
    vdsp_fail(&e, VDSP_E_RUN_TASK_FAILED, "the server answered code %lld (%s): %s", (long long)code,
              name ? name : "no name", message ? message : "");
  else
    vdsp_fail(&e, (int)code, "%s", message ? message : (name ? name : ""));
  fail_slot(s, &e);
}

/* One message's frames, checked and matched to its request; what matches none is passed over. */
static void dispatch(vdsp_client *c, const uint8_t *head, size_t head_len, const zmq_msg_t *bodymsg, int have_body,
                     const size_t *sizes, size_t frames, int too_many) {
  uint64_t msg_id;
  if (!vdsp_wire_peek_msg_id(head, head_len, &msg_id)) return;   /* no header: nothing to answer (§3.5) */
  slot *s = find(c, msg_id);
  if (s != NULL && s->state != WAITING) s = NULL;   /* a second reply (§4): the first stands */
  vdsp_wire_header h;
  vdsp_wire_error werr;
  vdsp_err e;
  if (vdsp_wire_header_parse(head, head_len, &h, &werr) != 0) {
    if (s != NULL) {   /* a 24-byte frame whose msg_id is ours: that request fails with the header's code */
      vdsp_fail_wire(&e, &werr);
      fail_slot(s, &e);
    }
    return;
  }
  if (h.command != VDSP_CMD_READY && h.command != VDSP_CMD_RESULT && h.command != VDSP_CMD_ERROR) return;
  if (s == NULL) return;   /* a reply to nothing in flight (a request given up): passed over */
  if (too_many) {
    vdsp_fail(&e, VDSP_WIRE_E_MESSAGE_TOO_LARGE, "a reply of more than %d frames", VDSP_WIRE_MAX_FRAMES);
    fail_slot(s, &e);
    return;
  }
  if (!have_body) {
    vdsp_fail(&e, VDSP_E_PROTOCOL_ERROR, "a reply of one frame: a message is a header and a body (PROTOCOL.md §3.1)");
    fail_slot(s, &e);
    return;
  }
  vdsp_wire_body *body = NULL;
  if (vdsp_wire_check_frames(sizes, frames, &werr) != 0 ||
      vdsp_wire_body_decode(zmq_msg_data((zmq_msg_t *)bodymsg), zmq_msg_size(bodymsg), &body, &werr) != 0) {
    vdsp_fail_wire(&e, &werr);
    fail_slot(s, &e);
    return;
  }
  const vdsp_wire_value *root = vdsp_wire_body_root(body);
  int rc = 0;
  if (h.command == VDSP_CMD_READY)
    rc = check_fields("READY", root, READY_FIELDS, sizeof READY_FIELDS / sizeof *READY_FIELDS, &e);
  else if (h.command == VDSP_CMD_ERROR)
    rc = check_fields("ERROR", root, ERROR_FIELDS, sizeof ERROR_FIELDS / sizeof *ERROR_FIELDS, &e);
  if (rc != 0) {
    fail_slot(s, &e);
  } else if (h.command == VDSP_CMD_ERROR) {
    take_error(s, root);
  } else {
    s->state = DONE;
    s->code = 0;
    s->header = h;
    s->body = body;
    body = NULL;
  }
  vdsp_wire_body_free(body);
}

/* Read one message if one is there: 1 if one was read, 0 if none. */
static int receive(vdsp_client *c) {
  zmq_msg_t msg, bodymsg;
  uint8_t head[VDSP_WIRE_HEADER_SIZE];
  size_t sizes[VDSP_WIRE_MAX_FRAMES], frames = 0, head_len;
  int too_many = 0, have_body = 0;
  zmq_msg_init(&msg);
  if (zmq_msg_recv(&msg, c->link.sock, ZMQ_DONTWAIT) < 0) {
    zmq_msg_close(&msg);
    return 0;
  }
  head_len = zmq_msg_size(&msg);
  memcpy(head, zmq_msg_data(&msg), head_len < sizeof head ? head_len : sizeof head);
  sizes[frames++] = head_len;
  int more = zmq_msg_more(&msg);
  zmq_msg_close(&msg);
  zmq_msg_init(&bodymsg);
  if (more && zmq_msg_recv(&bodymsg, c->link.sock, 0) >= 0) {   /* a multipart message arrives whole */
    have_body = 1;
    sizes[frames++] = zmq_msg_size(&bodymsg);
    more = zmq_msg_more(&bodymsg);
  }
  while (more) {   /* raw frames: counted, not kept */
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, c->link.sock, 0) < 0) {
      more = 0;
    } else {
      if (frames < VDSP_WIRE_MAX_FRAMES) sizes[frames++] = zmq_msg_size(&msg);
      else too_many = 1;
      more = zmq_msg_more(&msg);
    }
    zmq_msg_close(&msg);
  }
  dispatch(c, head, head_len, &bodymsg, have_body, sizes, frames, too_many);
  zmq_msg_close(&bodymsg);
  return 1;
}

/* If the link ended: what arrived before its end is read, then every request still waiting fails
 * (RELAY_UNAVAILABLE); 1 if so. */
static int end_of_link(vdsp_client *c) {
  if (!vdsp_link_poll_events(&c->link)) return 0;
  while (receive(c)) {   /* what arrived before the connection ended */
  }
  vdsp_err lost;
  link_lost(c, &lost);
  for (size_t i = 0; i < VDSP_CLIENT_MAX_INFLIGHT; i++)
    if (c->slots[i].state == WAITING) fail_slot(&c->slots[i], &lost);
  return 1;
}

/* Send a HEARTBEAT if one is due; when to wake at the latest (the next one, or `deadline`). */
static int64_t beat(vdsp_client *c, int64_t now, int64_t deadline) {
  if (now - c->last_sent_ms >= c->heartbeat_ms) send_empty(c, VDSP_CMD_HEARTBEAT, NULL);
  int64_t wake = c->last_sent_ms + c->heartbeat_ms;
  return deadline >= 0 && deadline < wake ? deadline : wake;
}

/* Read until `s` is DONE, the link is dead (every waiting slot then fails) or `deadline` (-1: none)
 * passes (TASK_TIMEOUT); HEARTBEATs go out meanwhile. */
static int wait_slot(vdsp_client *c, slot *s, int64_t deadline, vdsp_err *err) {
  for (;;) {
    while (s->state != DONE && receive(c)) {
    }
    if (s->state == DONE || end_of_link(c)) return 0;
    int64_t now = now_ms(), wake = beat(c, now, deadline);
    if (deadline >= 0 && now >= deadline)
      return vdsp_fail(err, VDSP_E_TASK_TIMEOUT, "no reply within the wait (msg_id %llu is still in flight)",
                       (unsigned long long)s->msg_id);
    zmq_pollitem_t items[2] = {{c->link.sock, 0, ZMQ_POLLIN, 0}, {c->link.monitor, 0, ZMQ_POLLIN, 0}};
    if (zmq_poll(items, 2, (long)(wake > now ? wake - now : 0)) < 0 && zmq_errno() != EINTR)
      return vdsp_fail(err, VDSP_E_RELAY_UNAVAILABLE, "relay server is not reachable: %s", zmq_strerror(zmq_errno()));
  }
}

/* Take a DONE slot's outcome: 0 and the reply, or its code and message; the slot is freed. */
static int collect(slot *s, vdsp_reply *reply, vdsp_err *err) {
  int code = s->code;
  if (code != 0) {
    vdsp_fail(err, code, "%s", s->message);
  } else if (reply != NULL) {
    reply->header = s->header;
    reply->body = s->body;
    s->body = NULL;
  }
  release(s);
  return code;
}

/* --- HELLO ------------------------------------------------------------------------------ */

static double random_unit(void) {
  uint32_t r = 0;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) r = (uint32_t)now_ms() * 2654435761u;
  return r / 4294967296.0;
}

static int hello(vdsp_client *c, int timeout_ms, vdsp_err *err) {
  int64_t deadline = now_ms() + timeout_ms;
  int step = VDSP_CLIENT_BUSY_FIRST_MS, busy = 0;
  for (;;) {
    vdsp_wire_writer_reset(c->writer);
    vdsp_wire_put_map(c->writer, 5);
    vdsp_wire_put_cstr(c->writer, "role");
    vdsp_wire_put_cstr(c->writer, "client");
    vdsp_wire_put_cstr(c->writer, "pid");
    vdsp_wire_put_int(c->writer, (int64_t)getpid());
    vdsp_wire_put_cstr(c->writer, "owner");
    vdsp_wire_put_int(c->writer, (int64_t)vdsp_ddr_owner_id(c->ddr));
    vdsp_wire_put_cstr(c->writer, "lock_fd");
    vdsp_wire_put_int(c->writer, vdsp_ddr_lock_fd(c->ddr));
    vdsp_wire_put_cstr(c->writer, "name");
    vdsp_wire_put_cstr(c->writer, c->name);
    slot *s;
    int rc = request(c, VDSP_CMD_HELLO, NULL, &s, err);
    if (rc == 0) rc = wait_slot(c, s, deadline, err);
    if (rc == VDSP_E_TASK_TIMEOUT) {
      release(s);
      return vdsp_fail(err, VDSP_E_RELAY_UNAVAILABLE, "relay server is not reachable: the relay at %s did not answer "
                       "HELLO within %d ms; see 'vdsp status'", c->link.endpoint, timeout_ms);
    }
    if (rc != 0) return rc;
    if (s->state == DONE && s->code == 0 && s->header.command != VDSP_CMD_READY) {
      release(s);
      return vdsp_fail(err, VDSP_E_PROTOCOL_ERROR, "HELLO was answered by a RESULT, not READY");
    }
    if (s->code != VDSP_E_CORE_BUSY) {
      vdsp_reply ready = {0};
      rc = collect(s, &ready, err);
      if (rc != 0) return rc;
      c->ready = ready.body;
      int64_t hb = 0;
      if (vdsp_wire_get_int(vdsp_wire_map_get(vdsp_wire_body_root(c->ready), "heartbeat_ms"), &hb) && hb >= 10 &&
          hb <= 60000)
        c->heartbeat_ms = (int)hb;
      return 0;
    }
    /* HB_DSP_BUSY: the HELLO was not taken; again after a pause, within the connect timeout */
    char why[VDSP_ERR_MAX];
    memcpy(why, s->message, sizeof why);
    release(s);
    busy++;
    int pause = (int)(step * (0.5 + 0.5 * random_unit()));
    step = step * 2 < VDSP_CLIENT_BUSY_MOST_MS ? step * 2 : VDSP_CLIENT_BUSY_MOST_MS;
    if (now_ms() + pause >= deadline)
      return vdsp_fail(err, VDSP_E_CORE_BUSY, "%.400s (answered so to %d HELLO(s) within the connect timeout)", why,
                       busy);
    zmq_pollitem_t item = {c->link.monitor, 0, ZMQ_POLLIN, 0};
    zmq_poll(&item, 1, pause);
  }
}

/* --- the public calls -------------------------------------------------------------------- */

int vdsp_client_open(const vdsp_client_options *options, vdsp_client **out, vdsp_err *err) {
  static const vdsp_client_options none = {NULL, NULL, 0, NULL};
  if (options == NULL) options = &none;
  *out = NULL;
  vdsp_client *c = calloc(1, sizeof *c);
  if (c == NULL) return vdsp_fail(err, VDSP_E_OUT_OF_MEMORY, "out of memory");
  c->pid = getpid();
  c->next_id = 1;
  c->heartbeat_ms = DEFAULT_HEARTBEAT_MS;
  c->link.dir_fd = -1;
  if (options->name != NULL) snprintf(c->name, sizeof c->name, "%s", options->name);
  else snprintf(c->name, sizeof c->name, "pid%ld", (long)c->pid);
  char endpoint[VDSP_ENDPOINT_MAX];
  int rc = 0;
  if (options->endpoint != NULL) {
    snprintf(endpoint, sizeof endpoint, "%s", options->endpoint);
  } else {
    const char *mode = getenv("VDSP_RPC_MODE");
    if (mode != NULL && *mode && strcmp(mode, "relay") != 0)
      rc = vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "VDSP_RPC_MODE=%.32s: the native client speaks to the relay only "
                     "(relay mode)", mode);
    if (rc == 0) rc = vdsp_link_relay_endpoint(endpoint, NULL, err);
  }
  if (rc == 0 && (c->writer = vdsp_wire_writer_new()) == NULL) rc = vdsp_fail(err, VDSP_E_OUT_OF_MEMORY, "out of memory");
  if (rc == 0) rc = vdsp_ddr_open(options->ddr_dir, &c->ddr, err);
  if (rc == 0 && (c->ctx = zmq_ctx_new()) == NULL)
    rc = vdsp_fail(err, VDSP_E_OUT_OF_MEMORY, "cannot make a ZeroMQ context: %s", zmq_strerror(zmq_errno()));
  if (rc == 0) rc = vdsp_link_open(c->ctx, endpoint, &c->link, err);
  if (rc == 0) rc = hello(c, options->connect_timeout_ms > 0 ? options->connect_timeout_ms
                                                            : VDSP_CLIENT_CONNECT_TIMEOUT_MS, err);
  if (rc != 0) {
    vdsp_client_close(c);
    return rc;
  }
  *out = c;
  return 0;
}

void vdsp_client_close(vdsp_client *c) {
  if (c == NULL) return;
  int ours = c->pid == getpid();
  if (ours) {   /* a fork child leaves the parent's ZeroMQ alone: its threads are not in the child */
    if (c->ready != NULL) send_empty(c, VDSP_CMD_DISCONNECT, NULL);
    vdsp_link_close(&c->link);
    if (c->ctx != NULL) zmq_ctx_term(c->ctx);
  } else if (c->link.dir_fd >= 0) {
    close(c->link.dir_fd);
  }
  for (size_t i = 0; i < VDSP_CLIENT_MAX_INFLIGHT; i++) release(&c->slots[i]);
  vdsp_wire_body_free(c->ready);
  vdsp_wire_writer_free(c->writer);
  vdsp_ddr_close(c->ddr);
  free(c);
}

vdsp_ddr_owner *vdsp_client_ddr(vdsp_client *c) { return c->ddr; }
const vdsp_wire_value *vdsp_client_ready(const vdsp_client *c) { return vdsp_wire_body_root(c->ready); }
const char *vdsp_client_endpoint(const vdsp_client *c) { return c->link.endpoint; }

static int put_handles(vdsp_wire_writer *w, const char *key, const vdsp_handle *h, size_t n, vdsp_err *err) {
  if (n > VDSP_CLIENT_MAX_HANDLES || (n > 0 && h == NULL))
    return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "%zu %s: a TASK has at most %d (and a NULL array none)", n, key,
                     VDSP_CLIENT_MAX_HANDLES);
  vdsp_wire_put_cstr(w, key);
  vdsp_wire_put_array(w, (uint32_t)n);
  for (size_t i = 0; i < n; i++) {
    if (h[i].flags & ~(uint64_t)1)
      return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "%s[%zu] has reserved flag bits set (0x%llx): only bit 0, "
                       "REGISTERED, may be set (PROTOCOL.md §6.2)", key, i, (unsigned long long)h[i].flags);
    vdsp_wire_put_array(w, 3);
    vdsp_wire_put_uint(w, h[i].phys);
    vdsp_wire_put_uint(w, h[i].size);
    vdsp_wire_put_uint(w, h[i].flags);
  }
  return 0;
}

int vdsp_client_submit(vdsp_client *c, const vdsp_task *t, uint64_t *msg_id, vdsp_err *err) {
  int rc = not_ours(c, err);
  if (rc != 0) return rc;
  if (t == NULL || msg_id == NULL) return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "task and msg_id must not be NULL");
  if (t->op == 0xffff) return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "cmd must be an operator id in 0x0000..0xfffe");
  vdsp_wire_body *params = NULL;
  if (t->params != NULL) {
    vdsp_wire_error werr;
    if (vdsp_wire_body_decode(t->params, t->params_len, &params, &werr) != 0)
      return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "params must be one msgpack map of PROTOCOL.md §3.3: %s",
                       werr.message);
  }
  vdsp_wire_writer *w = c->writer;
  vdsp_wire_writer_reset(w);
  vdsp_wire_put_map(w, 4);
  rc = put_handles(w, "inputs", t->inputs, t->n_inputs, err);
  if (rc == 0) rc = put_handles(w, "outputs", t->outputs, t->n_outputs, err);
  if (rc == 0) {
    vdsp_wire_put_cstr(w, "params");
    if (params != NULL) vdsp_wire_put_value(w, vdsp_wire_body_root(params));
    else vdsp_wire_put_map(w, 0);
    vdsp_wire_put_cstr(w, "owner");   /* ignored by servers (§5.3); the reference client sends it */
    vdsp_wire_put_int(w, (int64_t)vdsp_ddr_owner_id(c->ddr));
    slot *s;
    rc = request(c, VDSP_CMD_TASK, t, &s, err);
    if (rc == 0) *msg_id = s->msg_id;
  }
  vdsp_wire_body_free(params);
  return rc;
}

/* The slot of `msg_id` in flight of this process's client; NULL with `err` filled if none. */
static slot *in_flight(vdsp_client *c, uint64_t msg_id, vdsp_err *err) {
  if (not_ours(c, err) != 0) return NULL;
  slot *s = find(c, msg_id);
  if (s == NULL)
    vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "no request with msg_id %llu is in flight", (unsigned long long)msg_id);
  return s;
}

int vdsp_client_wait(vdsp_client *c, uint64_t msg_id, int timeout_ms, vdsp_reply *reply, vdsp_err *err) {
  if (reply != NULL) memset(reply, 0, sizeof *reply);
  vdsp_err e;
  slot *s = in_flight(c, msg_id, &e);
  if (s == NULL) {
    if (err != NULL) *err = e;
    return e.code;
  }
  int rc = wait_slot(c, s, timeout_ms < 0 ? -1 : now_ms() + timeout_ms, err);
  if (rc != 0) return rc;   /* TASK_TIMEOUT: still in flight */
  return collect(s, reply, err);
}

int vdsp_client_call(vdsp_client *c, const vdsp_task *task, int timeout_ms, vdsp_reply *reply, vdsp_err *err) {
  uint64_t msg_id;
  int rc = vdsp_client_submit(c, task, &msg_id, err);
  return rc != 0 ? rc : vdsp_client_wait(c, msg_id, timeout_ms, reply, err);
}

static size_t done_count(const vdsp_client *c) {
  size_t n = 0;
  for (size_t i = 0; i < VDSP_CLIENT_MAX_INFLIGHT; i++) n += c->slots[i].state == DONE;
  return n;
}

int vdsp_client_pump(vdsp_client *c, int timeout_ms, int wake_fd) {
  if (c->pid != getpid()) return 0;
  int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
  size_t before = done_count(c);
  for (;;) {
    while (receive(c)) {
    }
    if (done_count(c) != before || end_of_link(c)) return 1;
    int64_t now = now_ms(), wake = beat(c, now, deadline);
    if (deadline >= 0 && now >= deadline) return 0;
    zmq_pollitem_t items[3] = {{c->link.sock, 0, ZMQ_POLLIN, 0}, {c->link.monitor, 0, ZMQ_POLLIN, 0},
                               {NULL, wake_fd, ZMQ_POLLIN, 0}};
    int rc = zmq_poll(items, wake_fd >= 0 ? 3 : 2, (long)(wake > now ? wake - now : 0));
    if (rc < 0 && zmq_errno() != EINTR) return 0;
    if (rc > 0 && wake_fd >= 0 && (items[2].revents & ZMQ_POLLIN)) return 0;
  }
}

int vdsp_client_done(const vdsp_client *c, uint64_t msg_id) {
  for (size_t i = 0; msg_id != 0 && i < VDSP_CLIENT_MAX_INFLIGHT; i++)
    if (c->slots[i].state != FREE && c->slots[i].msg_id == msg_id) return c->slots[i].state == DONE;
  return -1;
}

int vdsp_client_cancel(vdsp_client *c, uint64_t msg_id, int timeout_ms, vdsp_err *err) {
  vdsp_err e;
  slot *target = in_flight(c, msg_id, &e);
  if (target == NULL) {
    if (err != NULL) *err = e;
    return e.code;
  }
  int rc;
  if (target->state == DONE) {
    release(target);
    return 0;
  }
  vdsp_wire_writer *w = c->writer;
  vdsp_wire_writer_reset(w);
  vdsp_wire_put_map(w, 1);
  vdsp_wire_put_cstr(w, "target");
  vdsp_wire_put_uint(w, msg_id);
  slot *s;
  rc = request(c, VDSP_CMD_CANCEL, NULL, &s, err);
  if (rc == 0) {
    rc = wait_slot(c, s, timeout_ms < 0 ? -1 : now_ms() + timeout_ms, err);
    if (rc == 0) rc = collect(s, NULL, err);
    else release(s);   /* its late answer is passed over */
  }
  target = find(c, msg_id);   /* no reply of the target comes after the CANCEL's answer (§5.5) */
  if (target != NULL) release(target);
  return rc;
}

void vdsp_reply_free(vdsp_reply *reply) {
  if (reply == NULL) return;
  vdsp_wire_body_free(reply->body);
  reply->body = NULL;
}
