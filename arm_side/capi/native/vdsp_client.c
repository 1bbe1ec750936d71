/* vdsp_client.c: see vdsp_client.h. The conversations are PROTOCOL.md §15.1 (relay mode) and
 * §15.2 (direct mode), as arm_side/session.py holds them; the checks of a reply those of
 * protocol.wire and protocol.messages (BODY_FIELDS). */
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

#include "vdsp_curve.h"
#include "vdsp_link.h"
#include "vdsp_zmq.h"

#define DEFAULT_HEARTBEAT_MS 500
#define TICK_MS 125                 /* how often the links are looked after (arm_side.reading's tick) */
#define HELLO_SLICE_MS 100          /* a HELLO's wait: how often a refused key is looked for */
#define START_HINT "Start one with 'vdsp up -d' (stop it with 'vdsp down'), or set VDSP_RUNTIME_DIR to the runtime dir " \
                   "of a SoC that is up"

enum { FREE, WAITING, DONE };
enum { K_REQUEST, K_FW_HELLO };     /* a slot's kind: a caller's request, or our HELLO to a firmware */
enum { RELAY, DIRECT };

typedef struct {
  int state;
  int kind;
  uint64_t msg_id;
  size_t peer;                 /* the server it went to (an index into peers) */
  int fw;                      /* it went on that peer's firmware link */
  int task;                    /* a TASK (counted in flight to its core) */
  int fw_ended;                /* a TASK sent on a firmware connection that closed: the core's word ends it */
  int code;                    /* DONE: 0 for READY/RESULT, else the failure's code */
  vdsp_wire_header header;
  vdsp_wire_body *body;        /* DONE with code 0 */
  char message[VDSP_ERR_MAX];  /* DONE with a code */
} slot;

/* A server: the relay (relay mode), or a core (direct mode) with its firmware. */
typedef struct {
  char name[32];
  char control[VDSP_ENDPOINT_MAX];   /* where its control link goes (the relay's endpoint) */
  vdsp_link ctl, fw;                 /* fw: direct mode, open while its firmware runs */
  int ctl_open, fw_open;
  int alive;                   /* answered READY and not declared dead since */
  int running;                 /* direct: its firmware runs at fw_endpoint */
  char state[16];              /* direct: its last state (READY, EVENT) */
  char reason[128];
  char fw_endpoint[VDSP_ENDPOINT_MAX];   /* as announced */
  char fw_key[VDSP_CURVE_KEY_LEN + 1];  /* fw_server_key as announced */
  int heartbeat_ms;
  int64_t last_sent_ms;        /* on its control link */
  vdsp_wire_body *ready;
  uint64_t fw_hello;           /* our HELLO to its firmware in flight (0: none) */
  int fw_refused;              /* the firmware's answer to it: 0, CLAIM_REFUSED or CORE_BUSY */
  char fw_refused_msg[VDSP_ERR_MAX];
  int64_t fw_again_at;         /* CORE_BUSY: when to say it again (0: not yet scheduled) */
  int fw_step;                 /* CORE_BUSY: the pause's step (busy retry, no deadline) */
} peer;

struct vdsp_client {
  pid_t pid;                   /* the process that opened it: the only one that may use it */
  int mode;                    /* RELAY or DIRECT */
  void *ctx;
  vdsp_curve_keys keys;        /* tcp only: our pair and the SoC's key */
  int have_keys;
  vdsp_ddr_owner *ddr;
  vdsp_wire_writer *writer;
  uint64_t next_id;            /* msg_ids from 1 (§3.5: 0 is a one-way message's) */
  int64_t next_tick;
  char name[64];
  peer peers[VDSP_CLIENT_MAX_CORES];
  size_t n_peers;
  slot slots[VDSP_CLIENT_MAX_INFLIGHT + VDSP_CLIENT_MAX_CORES];   /* invariant: a msg_id is in at most one
                                                                     non-FREE slot; K_FW_HELLO ones are extra */
};
#define N_SLOTS (VDSP_CLIENT_MAX_INFLIGHT + VDSP_CLIENT_MAX_CORES)

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

static vdsp_link *link_of(peer *p, int fw) { return fw ? &p->fw : &p->ctl; }

/* The relay's link is gone (relay mode). */
static int link_lost(const peer *p, vdsp_err *err) {
  if (p->ctl.failed && !p->ctl.up)
    return vdsp_fail(err, VDSP_E_RELAY_UNAVAILABLE, "relay server is not reachable: nothing listens at %s. " START_HINT,
                     p->ctl.endpoint);
  return vdsp_fail(err, VDSP_E_RELAY_UNAVAILABLE, "relay server is not reachable: it closed the connection at %s (it "
                   "exited or was restarted); requests in flight get no reply", p->ctl.endpoint);
}

/* KEY_REFUSED as the Python SDK says it (arm_side/channel.py). */
static int key_refused(const vdsp_client *c, const vdsp_link *l, const char *name, vdsp_err *err) {
  return vdsp_fail(err, VDSP_E_KEY_REFUSED, "%s at %s (%s; client key %s, public key %.8s...)", l->refusal, l->endpoint,
                   name, c->keys.client_file, c->keys.public_key);
}

/* --- sending ---------------------------------------------------------------------------- */

static int send_message(vdsp_client *c, peer *p, int fw, uint8_t command, uint64_t msg_id, const vdsp_task *task,
                        const uint8_t *body, size_t len, vdsp_err *err) {
  vdsp_link *l = link_of(p, fw);
  if (fw && !p->fw_open)   /* its firmware came up just now, or its link could not open yet */
    return vdsp_fail(err, VDSP_E_CORE_OFFLINE, "%s: its firmware link is not open yet; try again", p->name);
  if (!fw && !p->ctl_open)
    return vdsp_fail(err, c->mode == RELAY ? VDSP_E_RELAY_UNAVAILABLE : VDSP_E_CORE_DEAD, "%s: its connection closed",
                     p->name);
  vdsp_wire_header h = {VDSP_WIRE_VERSION, command, 0, 0, 0, msg_id, 0};
  if (task != NULL) {
    h.op = task->op;
    h.priority = task->priority;
    h.core = task->core;
    h.custom_id = task->custom_id;
  }
  uint8_t head[VDSP_WIRE_HEADER_SIZE];
  vdsp_wire_header_pack(&h, head);
  /* never blocking: an ipc link that failed or ended has no pipe, nor has a tcp link whose handshake
   * was refused, and a blocking send would wait forever */
  if (zmq_send(l->sock, head, sizeof head, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
      zmq_send(l->sock, body, len, ZMQ_DONTWAIT) < 0) {
    int e = zmq_errno();
    vdsp_link_poll_events(l);
    if (c->mode == RELAY && e == EAGAIN && (l->failed || l->ended)) return link_lost(p, err);
    if (l->tcp && l->refusal[0]) return key_refused(c, l, p->name, err);
    return vdsp_fail(err, c->mode == RELAY ? VDSP_E_RELAY_UNAVAILABLE : VDSP_E_CORE_OFFLINE,
                     "%s is not reachable: cannot send to %s: %s", c->mode == RELAY ? "relay server" : p->name,
                     l->endpoint, zmq_strerror(e));
  }
  if (!fw) p->last_sent_ms = now_ms();
  return 0;
}

static void send_empty(vdsp_client *c, peer *p, uint8_t command) {
  static const uint8_t empty_map = 0x80;
  send_message(c, p, 0, command, 0, NULL, &empty_map, 1, NULL);
}

static slot *find(vdsp_client *c, uint64_t msg_id) {
  for (size_t i = 0; msg_id != 0 && i < N_SLOTS; i++)
    if (c->slots[i].state != FREE && c->slots[i].msg_id == msg_id) return &c->slots[i];
  return NULL;
}

static void release(slot *s) {
  vdsp_wire_body_free(s->body);
  memset(s, 0, sizeof *s);
}

static size_t requests(const vdsp_client *c) {
  size_t n = 0;
  for (size_t i = 0; i < N_SLOTS; i++) n += c->slots[i].state != FREE && c->slots[i].kind == K_REQUEST;
  return n;
}

/* Tasks in flight to core `p` (direct mode). */
static size_t inflight(const vdsp_client *c, size_t p) {
  size_t n = 0;
  for (size_t i = 0; i < N_SLOTS; i++)
    n += c->slots[i].state == WAITING && c->slots[i].task && c->slots[i].peer == p;
  return n;
}

/* Send a request whose body the writer holds, to peer `p` (on its firmware link: `fw`); its slot. */
static int request(vdsp_client *c, size_t p, int fw, int kind, uint8_t command, const vdsp_task *task, slot **out,
                   vdsp_err *err) {
  slot *s = NULL;
  if (kind == K_REQUEST && requests(c) >= VDSP_CLIENT_MAX_INFLIGHT)
    return vdsp_fail(err, VDSP_E_TASK_NUM_EXCEED_LIMIT, "%d requests of this client are in flight already: wait for "
                     "one first", VDSP_CLIENT_MAX_INFLIGHT);
  for (size_t i = 0; s == NULL && i < N_SLOTS; i++)
    if (c->slots[i].state == FREE) s = &c->slots[i];
  if (s == NULL) return vdsp_fail(err, VDSP_E_TASK_NUM_EXCEED_LIMIT, "no request slot is free");
  const uint8_t *body;
  size_t len;
  vdsp_wire_error werr;
  if (vdsp_wire_writer_finish(c->writer, &body, &len, &werr) != 0) return vdsp_fail_wire(err, &werr);
  uint64_t msg_id = c->next_id++;
  int rc = send_message(c, &c->peers[p], fw, command, msg_id, task, body, len, err);
  if (rc != 0) return rc;
  s->state = WAITING;
  s->kind = kind;
  s->msg_id = msg_id;
  s->peer = p;
  s->fw = fw;
  s->task = command == VDSP_CMD_TASK;
  s->fw_ended = 0;
  *out = s;
  return 0;
}

static void put_hello(vdsp_client *c) {
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

/* --- direct mode: the cores' states (arm_side/session.py core_state) ------------------------ */

/* Every task in flight to core `p` fails with `code` and `message`. */
/* Every TASK in flight to core `p` fails (`all` 0: but those sent on a firmware connection that closed). */
static void fail_inflight(vdsp_client *c, size_t p, int all, int code, const char *message) {
  vdsp_err e;
  vdsp_fail(&e, code, "%s", message);
  for (size_t i = 0; i < N_SLOTS; i++) {
    slot *s = &c->slots[i];
    if (s->state == WAITING && s->task && s->peer == p && (all || !s->fw_ended)) fail_slot(s, &e);
  }
}

/* protocol.core_state.error_for: the error of a task that cannot run on a core in `state`. */
static int state_error(const peer *p, const char *state, const char *reason, char *out, size_t len) {
  int code = strcmp(state, "crashed") == 0 ? VDSP_E_CORE_CRASHED
             : strcmp(state, "dead") == 0  ? VDSP_E_CORE_DEAD
                                           : VDSP_E_CORE_OFFLINE;
  const char *detail = strcmp(state, "dead") == 0 ? "is dead" : strcmp(state, "unknown") == 0 ? "has not answered yet"
                                                                                              : state;
  if (reason != NULL && *reason) snprintf(out, len, "%s %s (%s)", p->name, detail, reason);
  else snprintf(out, len, "%s %s", p->name, detail);
  return code;
}

/* Our HELLO to core `p`'s firmware is forgotten (a new link, a new firmware, none). */
static void forget_fw_hello(vdsp_client *c, peer *p) {
  slot *s = find(c, p->fw_hello);
  if (s != NULL && s->kind == K_FW_HELLO) release(s);
  p->fw_hello = 0;
  p->fw_refused = 0;
  p->fw_again_at = 0;
  p->fw_step = 0;
}

static void close_fw(vdsp_client *c, peer *p) {
  forget_fw_hello(c, p);
  if (p->fw_open) vdsp_link_close(&p->fw);
  p->fw_open = 0;
}

/* Say HELLO to core `p`'s firmware on its link; not waited for (a firmware running a long task
 * answers after it, and one link keeps order): its answer is kept in fw_refused. */
static void hello_fw(vdsp_client *c, size_t p) {
  peer *pe = &c->peers[p];
  forget_fw_hello(c, pe);
  put_hello(c);
  slot *s;
  if (request(c, p, 1, K_FW_HELLO, VDSP_CMD_HELLO, NULL, &s, NULL) == 0) pe->fw_hello = s->msg_id;
}

/* A new link to core `p`'s firmware (its endpoint checked again) and HELLO on it. A link that
 * cannot open leaves the firmware unreachable until the next announcement or tick. */
static void open_fw(vdsp_client *c, size_t p) {
  peer *pe = &c->peers[p];
  char endpoint[VDSP_ENDPOINT_MAX];
  close_fw(c, pe);
  vdsp_link_connectable(pe->fw_endpoint, pe->control, endpoint);
  if (vdsp_link_open(c->ctx, endpoint, c->have_keys ? &c->keys : NULL, pe->fw_key, &pe->fw, NULL) != 0) return;
  pe->fw_open = 1;
  hello_fw(c, p);
}

/* A core's state, from its READY or an EVENT (`body`): running, a new firmware link when its
 * endpoint or key changed; else its firmware link closes and its tasks in flight fail. */
static void core_state(vdsp_client *c, size_t p, const char *state, const vdsp_wire_value *body) {
  peer *pe = &c->peers[p];
  const char *reason = body != NULL ? vdsp_wire_get_str(vdsp_wire_map_get(body, "reason"), NULL) : NULL;
  snprintf(pe->state, sizeof pe->state, "%s", state);
  snprintf(pe->reason, sizeof pe->reason, "%s", reason != NULL ? reason : "");
  if (strcmp(state, "running") == 0) {
    const char *endpoint = vdsp_wire_get_str(vdsp_wire_map_get(body, "fw_endpoint"), NULL);
    const char *key = vdsp_wire_get_str(vdsp_wire_map_get(body, "fw_server_key"), NULL);
    if (endpoint == NULL) endpoint = "";
    if (key == NULL) key = "";
    if (strlen(endpoint) >= VDSP_ENDPOINT_MAX || strlen(key) > VDSP_CURVE_KEY_LEN) return;   /* not connectable */
    if (!pe->running || strcmp(pe->fw_endpoint, endpoint) != 0 || strcmp(pe->fw_key, key) != 0) {
      strcpy(pe->fw_endpoint, endpoint);
      strcpy(pe->fw_key, key);   /* a new firmware on tcp has a key of its own: a new link */
      pe->running = 1;
      open_fw(c, p);
    }
    return;
  }
  if (pe->running) {
    pe->running = 0;
    close_fw(c, pe);
  }
  char message[VDSP_ERR_MAX];
  int code = state_error(pe, state, reason, message, sizeof message);
  fail_inflight(c, p, 1, code, message);
}

/* Core `p` is dead (its control connection closed over ipc). */
static void core_dead(vdsp_client *c, size_t p, const char *why) {
  c->peers[p].alive = 0;
  vdsp_wire_writer *w = vdsp_wire_writer_new();
  vdsp_wire_body *body = NULL;
  if (w != NULL) {   /* {reason: why}, as the session's peer_dead gives core_state */
    const uint8_t *data;
    size_t len;
    vdsp_wire_error werr;
    vdsp_wire_put_map(w, 1);
    vdsp_wire_put_cstr(w, "reason");
    vdsp_wire_put_cstr(w, why);
    if (vdsp_wire_writer_finish(w, &data, &len, &werr) == 0) vdsp_wire_body_decode(data, len, &body, &werr);
    vdsp_wire_writer_free(w);
  }
  core_state(c, p, "dead", vdsp_wire_body_root(body));
  vdsp_wire_body_free(body);
}

/* Our HELLO to a firmware was answered. */
static void fw_hello_answered(vdsp_client *c, slot *s) {
  peer *pe = &c->peers[s->peer];
  if (pe->fw_hello == s->msg_id) {
    pe->fw_hello = 0;
    pe->fw_refused = s->code == VDSP_E_CLAIM_REFUSED || s->code == VDSP_E_CORE_BUSY ? s->code : 0;
    memcpy(pe->fw_refused_msg, s->message, sizeof pe->fw_refused_msg);
    pe->fw_again_at = 0;
    if (s->code != VDSP_E_CORE_BUSY) pe->fw_step = 0;
  }
  release(s);
}

/* --- what arrives ------------------------------------------------------------------------ */

/* One message's frames from peer `p` (its firmware link: `fw`), checked and matched to its
 * request; an EVENT on a core's control link moves the core's state; what matches nothing is
 * passed over. */
static void dispatch(vdsp_client *c, size_t p, int fw, const uint8_t *head, size_t head_len, const zmq_msg_t *bodymsg,
                     int have_body, const size_t *sizes, size_t frames, int too_many) {
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
  int event = h.command == VDSP_CMD_EVENT && c->mode == DIRECT && !fw;
  if (event) s = NULL;
  else if (h.command != VDSP_CMD_READY && h.command != VDSP_CMD_RESULT && h.command != VDSP_CMD_ERROR) return;
  if (s == NULL && !event) return;   /* a reply to nothing in flight (a request given up): passed over */
  if (too_many || !have_body) {
    if (s == NULL) return;
    if (too_many)
      vdsp_fail(&e, VDSP_WIRE_E_MESSAGE_TOO_LARGE, "a reply of more than %d frames", VDSP_WIRE_MAX_FRAMES);
    else
      vdsp_fail(&e, VDSP_E_PROTOCOL_ERROR, "a reply of one frame: a message is a header and a body (PROTOCOL.md §3.1)");
    fail_slot(s, &e);
    return;
  }
  vdsp_wire_body *body = NULL;
  if (vdsp_wire_check_frames(sizes, frames, &werr) != 0 ||
      vdsp_wire_body_decode(zmq_msg_data((zmq_msg_t *)bodymsg), zmq_msg_size(bodymsg), &body, &werr) != 0) {
    if (s != NULL) {
      vdsp_fail_wire(&e, &werr);
      fail_slot(s, &e);
    }
    return;
  }
  const vdsp_wire_value *root = vdsp_wire_body_root(body);
  if (event) {   /* a core's state (§5.9): a malformed one is dropped, as the session drops it */
    const char *state = vdsp_wire_get_str(vdsp_wire_map_get(root, "state"), NULL);
    if (state != NULL && c->peers[p].alive) core_state(c, p, state, root);
    vdsp_wire_body_free(body);
    return;
  }
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
  if (s->kind == K_FW_HELLO) fw_hello_answered(c, s);
}

/* Read one message of `l` if one is there: 1 if one was read, 0 if none. */
static int receive(vdsp_client *c, size_t p, int fw) {
  vdsp_link *l = link_of(&c->peers[p], fw);
  zmq_msg_t msg, bodymsg;
  uint8_t head[VDSP_WIRE_HEADER_SIZE];
  size_t sizes[VDSP_WIRE_MAX_FRAMES], frames = 0, head_len;
  int too_many = 0, have_body = 0;
  zmq_msg_init(&msg);
  if (zmq_msg_recv(&msg, l->sock, ZMQ_DONTWAIT) < 0) {
    zmq_msg_close(&msg);
    return 0;
  }
  head_len = zmq_msg_size(&msg);
  memcpy(head, zmq_msg_data(&msg), head_len < sizeof head ? head_len : sizeof head);
  sizes[frames++] = head_len;
  int more = zmq_msg_more(&msg);
  zmq_msg_close(&msg);
  zmq_msg_init(&bodymsg);
  if (more && zmq_msg_recv(&bodymsg, l->sock, 0) >= 0) {   /* a multipart message arrives whole */
    have_body = 1;
    sizes[frames++] = zmq_msg_size(&bodymsg);
    more = zmq_msg_more(&bodymsg);
  }
  while (more) {   /* raw frames: counted, not kept */
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, l->sock, 0) < 0) {
      more = 0;
    } else {
      if (frames < VDSP_WIRE_MAX_FRAMES) sizes[frames++] = zmq_msg_size(&msg);
      else too_many = 1;
      more = zmq_msg_more(&msg);
    }
    zmq_msg_close(&msg);
  }
  dispatch(c, p, fw, head, head_len, &bodymsg, have_body, sizes, frames, too_many);
  zmq_msg_close(&bodymsg);
  return 1;
}

/* Everything waiting on every open link. */
static void receive_all(vdsp_client *c) {
  for (size_t p = 0; p < c->n_peers; p++) {
    while (c->peers[p].ctl_open && receive(c, p, 0)) {
    }
    while (c->peers[p].fw_open && receive(c, p, 1)) {
    }
  }
}

/* --- looking after the links -------------------------------------------------------------- */

/* Every request waiting on peer `p`'s link (`fw`; -1: either) fails. */
static void fail_waiting(vdsp_client *c, size_t p, int fw, const vdsp_err *e) {
  for (size_t i = 0; i < N_SLOTS; i++) {
    slot *s = &c->slots[i];
    if (s->state != WAITING || s->peer != p || (fw >= 0 && s->fw != fw)) continue;
    fail_slot(s, e);
    if (s->kind == K_FW_HELLO) fw_hello_answered(c, s);
  }
}

/* Peer `p`'s control link: its end (ipc), or its connection closed after its handshake (tcp). */
static void look_after_control(vdsp_client *c, size_t p) {
  peer *pe = &c->peers[p];
  vdsp_err e;
  if (vdsp_link_poll_events(&pe->ctl)) {   /* ipc: connected once, and it failed or ended */
    while (receive(c, p, 0)) {   /* what arrived before the connection ended */
    }
    if (c->mode == RELAY) {
      link_lost(pe, &e);
      for (size_t q = 0; q < c->n_peers; q++) fail_waiting(c, q, -1, &e);
      pe->alive = 0;   /* the link stays, for sends to say so */
      return;
    }
    vdsp_fail(&e, VDSP_E_CORE_OFFLINE, "no process serves %s", pe->ctl.endpoint);
    fail_waiting(c, p, 0, &e);
    if (pe->alive) core_dead(c, p, "its connection closed");
    vdsp_link_close(&pe->ctl);
    pe->ctl_open = 0;
  } else if (pe->ctl.tcp && vdsp_link_take_lost(&pe->ctl) && pe->alive) {
    if (c->mode == RELAY) {   /* the relay went away: its requests get no reply */
      vdsp_fail(&e, VDSP_E_RELAY_UNAVAILABLE, "relay server stopped answering: its connection closed");
      fail_waiting(c, p, -1, &e);
      pe->alive = 0;
    } else {   /* no proof a core died over tcp: HELLO again on the new connection, heartbeats judge */
      put_hello(c);
      const uint8_t *body;
      size_t len;
      vdsp_wire_error werr;
      if (vdsp_wire_writer_finish(c->writer, &body, &len, &werr) == 0)
        send_message(c, pe, 0, VDSP_CMD_HELLO, c->next_id++, NULL, body, len, NULL);
    }
  }
}

/* Direct mode: core `p`'s firmware link (session.py fw_link_dead, fw_closed, _fw_hello_again). */
static void look_after_firmware(vdsp_client *c, size_t p, int64_t now, int tick) {
  peer *pe = &c->peers[p];
  char message[VDSP_ERR_MAX];
  if (vdsp_link_poll_events(&pe->fw)) {   /* ipc: a new link is due */
    if (pe->fw.failed && !pe->fw.up) {   /* what was sent on it never arrived; not what an ended one took */
      snprintf(message, sizeof message, "%s: the link to its firmware at %s could not connect; send the task again",
               pe->name, pe->fw.endpoint);
      fail_inflight(c, p, 0, VDSP_E_CORE_OFFLINE, message);
    } else {   /* ended: its tasks reached the firmware, which may exit with its core before we hear the core's
                * control connection close: they wait for the core's word (EVENT, its end), as session.py's */
      for (size_t i = 0; i < N_SLOTS; i++)
        if (c->slots[i].state == WAITING && c->slots[i].task && c->slots[i].peer == p) c->slots[i].fw_ended = 1;
    }
    if (tick && pe->alive && pe->running) open_fw(c, p);
    return;
  }
  if (pe->fw.tcp && vdsp_link_take_lost(&pe->fw)) {
    for (size_t i = 0; i < N_SLOTS; i++) {
      slot *s = &c->slots[i];
      if (s->state != WAITING || !s->task || s->peer != p) continue;
      vdsp_err e;
      vdsp_fail(&e, VDSP_E_CORE_OFFLINE, "%s: the connection to its firmware closed with task %llu in flight (it may "
                "have run); connected again: send it again if running it twice is harmless", pe->name,
                (unsigned long long)s->msg_id);
      fail_slot(s, &e);
    }
    hello_fw(c, p);
    return;
  }
  if (pe->fw_refused == VDSP_E_CORE_BUSY && tick) {   /* its answer was BUSY: HELLO again after a pause */
    if (pe->fw_again_at == 0) {
      pe->fw_step = pe->fw_step ? pe->fw_step : VDSP_CLIENT_BUSY_FIRST_MS;
      pe->fw_again_at = now + (int64_t)(pe->fw_step * (0.5 + 0.5 * (double)(now % 1000) / 1000.0));
      pe->fw_step = pe->fw_step * 2 < VDSP_CLIENT_BUSY_MOST_MS ? pe->fw_step * 2 : VDSP_CLIENT_BUSY_MOST_MS;
    } else if (now >= pe->fw_again_at) {
      int step = pe->fw_step;
      hello_fw(c, p);
      pe->fw_step = step;
    }
  }
}

/* Look after every link: ends, heartbeats due, firmware links (`tick`: what is done at most every
 * TICK_MS). When to wake at the latest. */
static int64_t look_after(vdsp_client *c, int64_t now, int tick) {
  int64_t wake = c->next_tick;
  for (size_t p = 0; p < c->n_peers; p++) {
    peer *pe = &c->peers[p];
    if (pe->ctl_open) look_after_control(c, p);
    if (pe->fw_open) look_after_firmware(c, p, now, tick);
    else if (tick && pe->running && pe->alive) open_fw(c, p);   /* a link that could not open: again */
    if (!pe->ctl_open || !pe->alive) continue;
    if (now - pe->last_sent_ms >= pe->heartbeat_ms) send_empty(c, pe, VDSP_CMD_HEARTBEAT);
    if (pe->last_sent_ms + pe->heartbeat_ms < wake) wake = pe->last_sent_ms + pe->heartbeat_ms;
  }
  return wake;
}

typedef int (*until_fn)(const vdsp_client *c, const void *arg);

/* Read and look after the links until `until` holds (1), `deadline` (-1: none) passes or the fd
 * `wake_fd` (-1: none) becomes readable (0), or polling fails (-1). */
static int run(vdsp_client *c, until_fn until, const void *arg, int64_t deadline, int wake_fd) {
  for (;;) {
    receive_all(c);
    int64_t now = now_ms();
    int tick = now >= c->next_tick;
    if (tick) c->next_tick = now + TICK_MS;
    int64_t wake = look_after(c, now, tick);
    if (until != NULL && until(c, arg)) return 1;
    now = now_ms();
    if (deadline >= 0 && now >= deadline) return 0;
    if (deadline >= 0 && deadline < wake) wake = deadline;
    zmq_pollitem_t items[4 * VDSP_CLIENT_MAX_CORES + 1];
    int n = 0;
    for (size_t p = 0; p < c->n_peers; p++) {
      peer *pe = &c->peers[p];
      for (int fw = 0; fw < 2; fw++) {
        if (!(fw ? pe->fw_open : pe->ctl_open)) continue;
        vdsp_link *l = link_of(pe, fw);
        items[n++] = (zmq_pollitem_t){l->sock, 0, ZMQ_POLLIN, 0};
        items[n++] = (zmq_pollitem_t){l->monitor, 0, ZMQ_POLLIN, 0};
      }
    }
    int wake_at = n;
    if (wake_fd >= 0) items[n++] = (zmq_pollitem_t){NULL, wake_fd, ZMQ_POLLIN, 0};
    int rc = zmq_poll(items, n, (long)(wake > now ? wake - now : 0));
    if (rc < 0 && zmq_errno() != EINTR) return -1;
    if (rc > 0 && wake_fd >= 0 && (items[wake_at].revents & ZMQ_POLLIN)) return 0;
  }
}

static int slot_done(const vdsp_client *c, const void *arg) {
  (void)c;
  return ((const slot *)arg)->state == DONE;
}

/* Read until `s` is DONE (a dead link fails it) or `deadline` (-1: none) passes (TASK_TIMEOUT). */
static int wait_slot(vdsp_client *c, slot *s, int64_t deadline, vdsp_err *err) {
  int rc = run(c, slot_done, s, deadline, -1);
  if (rc < 0)
    return vdsp_fail(err, c->mode == RELAY ? VDSP_E_RELAY_UNAVAILABLE : VDSP_E_CORE_OFFLINE, "%s: %s",
                     c->mode == RELAY ? "relay server is not reachable" : "cannot read the cores' links",
                     zmq_strerror(zmq_errno()));
  if (s->state == DONE) return 0;
  return vdsp_fail(err, VDSP_E_TASK_TIMEOUT, "no reply within the wait (msg_id %llu is still in flight)",
                   (unsigned long long)s->msg_id);
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

/* No READY within the connect timeout, as the Python SDK says it (connect_wait.py). */
static int no_answer(const vdsp_client *c, const peer *pe, int timeout_ms, vdsp_err *err) {
  if (c->mode == DIRECT) return vdsp_fail(err, VDSP_E_TASK_TIMEOUT, "no answer within %g s", timeout_ms / 1000.0);
  if (pe->ctl.tcp)
    return vdsp_fail(err, VDSP_E_RELAY_UNAVAILABLE, "no relay answers at %s within %g s", pe->ctl.endpoint,
                     timeout_ms / 1000.0);
  vdsp_fail(err, VDSP_E_RELAY_UNAVAILABLE, "relay server is not reachable: the relay at %s did not answer HELLO "
            "within %d ms; see 'vdsp status'", pe->ctl.endpoint, timeout_ms);
  if (err != NULL) err->late = 1;   /* connected: a relay is there, starved or hung */
  return VDSP_E_RELAY_UNAVAILABLE;
}

/* HELLO to peer `p` on its control link until READY (kept in its `ready`): HB_DSP_BUSY answers
 * say it again after a pause, within `timeout_ms`; a refused key is KEY_REFUSED at once. */
static int hello(vdsp_client *c, size_t p, int timeout_ms, vdsp_err *err) {
  peer *pe = &c->peers[p];
  int64_t deadline = now_ms() + timeout_ms;
  int step = VDSP_CLIENT_BUSY_FIRST_MS, busy = 0;
  for (;;) {
    put_hello(c);
    slot *s;
    int rc = request(c, p, 0, K_REQUEST, VDSP_CMD_HELLO, NULL, &s, err);
    if (rc != 0) return rc;
    while (s->state != DONE) {
      int64_t now = now_ms();
      if (run(c, slot_done, s, deadline < now + HELLO_SLICE_MS ? deadline : now + HELLO_SLICE_MS, -1) < 0) {
        release(s);
        return vdsp_fail(err, c->mode == RELAY ? VDSP_E_RELAY_UNAVAILABLE : VDSP_E_CORE_OFFLINE, "cannot read the "
                         "link to %s: %s", pe->ctl.endpoint, zmq_strerror(zmq_errno()));
      }
      if (s->state == DONE) break;
      if (pe->ctl.tcp && pe->ctl.refusal[0]) {
        release(s);
        return key_refused(c, &pe->ctl, pe->name, err);
      }
      if (now_ms() >= deadline) {
        release(s);
        return no_answer(c, pe, timeout_ms, err);
      }
    }
    if (s->code == 0 && s->header.command != VDSP_CMD_READY) {
      release(s);
      return vdsp_fail(err, VDSP_E_PROTOCOL_ERROR, "HELLO was answered by a RESULT, not READY");
    }
    if (s->code != VDSP_E_CORE_BUSY) {
      vdsp_reply ready = {0};
      rc = collect(s, &ready, err);
      if (rc != 0) return rc;
      pe->ready = ready.body;
      int64_t hb = 0;
      if (vdsp_wire_get_int(vdsp_wire_map_get(vdsp_wire_body_root(pe->ready), "heartbeat_ms"), &hb) && hb >= 10 &&
          hb <= 60000)
        pe->heartbeat_ms = (int)hb;
      pe->alive = 1;
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
    run(c, NULL, NULL, now_ms() + pause, -1);
  }
}

/* --- connecting ---------------------------------------------------------------------------- */

static int is_tcp(const char *endpoint) { return strncmp(endpoint, "tcp://", 6) == 0; }

static int open_control(vdsp_client *c, size_t p, vdsp_err *err) {
  peer *pe = &c->peers[p];
  int rc = vdsp_link_open(c->ctx, pe->control, c->have_keys ? &c->keys : NULL, NULL, &pe->ctl, err);
  pe->ctl_open = rc == 0;
  pe->heartbeat_ms = DEFAULT_HEARTBEAT_MS;
  return rc;
}

/* Relay mode (§15.1): HELLO the relay. */
static int connect_relay(vdsp_client *c, int timeout_ms, vdsp_err *err) {
  int rc = open_control(c, 0, err);
  return rc != 0 ? rc : hello(c, 0, timeout_ms, err);
}

/* Direct mode (§15.2): HELLO each core; one that does not answer is unreachable; its firmware
 * linked at once when it runs. CORE_OFFLINE when none answers. */
static int connect_direct(vdsp_client *c, int timeout_ms, vdsp_err *err) {
  size_t alive = 0;
  for (size_t p = 0; p < c->n_peers; p++) {
    peer *pe = &c->peers[p];
    vdsp_err e;
    int rc = open_control(c, p, &e);
    if (rc == 0) rc = hello(c, p, timeout_ms, &e);
    if (rc == 0) {
      const vdsp_wire_value *ready = vdsp_wire_body_root(pe->ready);
      const char *state = vdsp_wire_get_str(vdsp_wire_map_get(ready, "state"), NULL);
      core_state(c, p, state != NULL ? state : "offline", ready);
      alive++;
      continue;
    }
    if (rc != VDSP_E_TASK_TIMEOUT && rc != VDSP_E_CORE_OFFLINE && rc != VDSP_E_RELAY_UNAVAILABLE) {
      if (err != NULL) *err = e;
      return rc;
    }
    snprintf(pe->state, sizeof pe->state, "unreachable");   /* as the session marks it */
    snprintf(pe->reason, sizeof pe->reason, "%.120s", e.message);
    if (pe->ctl_open) vdsp_link_close(&pe->ctl);
    pe->ctl_open = 0;
  }
  if (alive == 0) return vdsp_fail(err, VDSP_E_CORE_OFFLINE, "no DSP core answers: is the SoC up? (vdsp up -d)");
  return 0;
}

/* The servers to HELLO, as the mode and the environment name them. */
static int find_servers(vdsp_client *c, const vdsp_client_options *options, vdsp_err *err) {
  const char *mode = getenv("VDSP_RPC_MODE");
  if (mode == NULL || !*mode || strcmp(mode, "relay") == 0) c->mode = RELAY;
  else if (strcmp(mode, "direct") == 0) c->mode = DIRECT;
  else return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "VDSP_RPC_MODE must be relay or direct, got '%.32s'", mode);
  if (options->endpoint != NULL) c->mode = RELAY;
  if (c->mode == RELAY) {
    c->n_peers = 1;
    snprintf(c->peers[0].name, sizeof c->peers[0].name, "relay");
    if (options->endpoint == NULL) return vdsp_link_relay_endpoint(c->peers[0].control, NULL, err);
    if (strlen(options->endpoint) >= VDSP_ENDPOINT_MAX)
      return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "endpoint is longer than %d characters", VDSP_ENDPOINT_MAX - 1);
    strcpy(c->peers[0].control, options->endpoint);
    return 0;
  }
  vdsp_link_core cores[VDSP_CLIENT_MAX_CORES];
  int rc = vdsp_link_core_endpoints(cores, VDSP_CLIENT_MAX_CORES, &c->n_peers, err);
  for (size_t p = 0; rc == 0 && p < c->n_peers; p++) {
    memcpy(c->peers[p].name, cores[p].name, sizeof c->peers[p].name);
    memcpy(c->peers[p].control, cores[p].endpoint, sizeof c->peers[p].control);
  }
  return rc;
}

/* Over tcp a server verifies our owner by the CURVE key our owner's access list names (§16):
 * our keys are loaded and our key named before the first HELLO. */
static int prepare(vdsp_client *c, vdsp_err *err) {
  int tcp = 0;
  for (size_t p = 0; p < c->n_peers; p++) tcp |= is_tcp(c->peers[p].control);
  if (!tcp) return 0;
  int rc = vdsp_curve_load(&c->keys, 1, err);
  if (rc != 0) return rc;
  c->have_keys = 1;
  return vdsp_ddr_set_key(c->ddr, c->keys.public_key, err);
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
  for (size_t p = 0; p < VDSP_CLIENT_MAX_CORES; p++) c->peers[p].ctl.dir_fd = c->peers[p].fw.dir_fd = -1;
  if (options->name != NULL) snprintf(c->name, sizeof c->name, "%s", options->name);
  else snprintf(c->name, sizeof c->name, "pid%ld", (long)c->pid);
  int rc = find_servers(c, options, err);
  if (rc == 0 && (c->writer = vdsp_wire_writer_new()) == NULL) rc = vdsp_fail(err, VDSP_E_OUT_OF_MEMORY, "out of memory");
  if (rc == 0) rc = vdsp_ddr_open(options->ddr_dir, &c->ddr, err);
  if (rc == 0) rc = prepare(c, err);
  if (rc == 0 && (c->ctx = zmq_ctx_new()) == NULL)
    rc = vdsp_fail(err, VDSP_E_OUT_OF_MEMORY, "cannot make a ZeroMQ context: %s", zmq_strerror(zmq_errno()));
  int timeout = options->connect_timeout_ms > 0 ? options->connect_timeout_ms : VDSP_CLIENT_CONNECT_TIMEOUT_MS;
  if (rc == 0) rc = c->mode == RELAY ? connect_relay(c, timeout, err) : connect_direct(c, timeout, err);
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
  for (size_t p = 0; p < c->n_peers; p++) {
    peer *pe = &c->peers[p];
    if (ours) {   /* a fork child leaves the parent's ZeroMQ alone: its threads are not in the child */
      if (pe->ready != NULL && pe->ctl_open && !(pe->ctl.tcp && pe->ctl.refusal[0]))
        send_empty(c, pe, VDSP_CMD_DISCONNECT);
      if (pe->fw_open) vdsp_link_close(&pe->fw);
      if (pe->ctl_open) vdsp_link_close(&pe->ctl);
    } else {
      if (pe->ctl.dir_fd >= 0) close(pe->ctl.dir_fd);
      if (pe->fw.dir_fd >= 0) close(pe->fw.dir_fd);
    }
    vdsp_wire_body_free(pe->ready);
  }
  if (ours && c->ctx != NULL) zmq_ctx_term(c->ctx);
  for (size_t i = 0; i < N_SLOTS; i++) release(&c->slots[i]);
  vdsp_wire_writer_free(c->writer);
  vdsp_ddr_close(c->ddr);
  free(c);
}

vdsp_ddr_owner *vdsp_client_ddr(vdsp_client *c) { return c->ddr; }

static const peer *first_peer(const vdsp_client *c) {
  for (size_t p = 0; p < c->n_peers; p++)
    if (c->peers[p].ready != NULL) return &c->peers[p];
  return &c->peers[0];
}

const vdsp_wire_value *vdsp_client_ready(const vdsp_client *c) { return vdsp_wire_body_root(first_peer(c)->ready); }
const char *vdsp_client_endpoint(const vdsp_client *c) { return first_peer(c)->control; }
int vdsp_client_direct(const vdsp_client *c) { return c->mode == DIRECT; }

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

/* Direct mode: the core a task goes to (session.py route): the least busy running one for
 * CORE_ANY. Its index, or a negative code. */
static int route(vdsp_client *c, uint8_t core, int has_buffers, size_t *out, vdsp_err *err) {
  size_t total = 0;
  for (size_t p = 0; p < c->n_peers; p++) total += inflight(c, p);
  if (total >= VDSP_CLIENT_MAX_INFLIGHT)
    return vdsp_fail(err, VDSP_E_TASK_NUM_EXCEED_LIMIT, "%zu tasks already in flight (limit %d)", total,
                     VDSP_CLIENT_MAX_INFLIGHT);
  size_t p = 0;
  peer *pe = NULL;
  if (core == 0) {
    for (size_t q = 0; q < c->n_peers; q++)
      if (c->peers[q].running && c->peers[q].alive && (pe == NULL || inflight(c, q) < inflight(c, p))) {
        pe = &c->peers[q];
        p = q;
      }
    if (pe == NULL) {
      char states[VDSP_ERR_MAX - 64];
      size_t n = 0;
      for (size_t q = 0; q < c->n_peers && n < sizeof states; q++)
        n += (size_t)snprintf(states + n, sizeof states - n, "%s'%s': '%s'", q ? ", " : "", c->peers[q].name,
                              c->peers[q].state);
      return vdsp_fail(err, VDSP_E_CORE_OFFLINE, "no running core ({%s})", states);
    }
  } else {
    p = (size_t)core - 1;
    if (core > 2 || p >= c->n_peers)   /* CORE_0, CORE_1: the header's core field (§3.2) */
      return vdsp_fail(err, VDSP_E_INVALID_CORE, "this SoC has %zu cores", c->n_peers);
    pe = &c->peers[p];
    if (!pe->running || !pe->alive) {
      char message[VDSP_ERR_MAX];
      int code = state_error(pe, pe->state[0] ? pe->state : "offline", pe->reason, message, sizeof message);
      return vdsp_fail(err, code, "%s", message);
    }
  }
  if (pe->fw_refused != 0 && has_buffers) {
    if (pe->fw_refused == VDSP_E_CORE_BUSY)
      return vdsp_fail(err, VDSP_E_CORE_BUSY, "%s: our HELLO is to be said again to its firmware, which answered the "
                       "last one: %.300s; send the task again shortly", pe->name, pe->fw_refused_msg);
    return vdsp_fail(err, VDSP_E_CLAIM_REFUSED, "%s: %.500s", pe->name, pe->fw_refused_msg);
  }
  *out = p;
  return 0;
}

int vdsp_client_submit(vdsp_client *c, const vdsp_task *t, uint64_t *msg_id, vdsp_err *err) {
  int rc = not_ours(c, err);
  if (rc != 0) return rc;
  if (t == NULL || msg_id == NULL) return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "task and msg_id must not be NULL");
  if (t->op == 0xffff) return vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "cmd must be an operator id in 0x0000..0xfffe");
  if (c->mode == RELAY && !c->peers[0].alive) {   /* the relay went away: nothing goes to it any more */
    if (c->peers[0].ctl.tcp)
      return vdsp_fail(err, VDSP_E_RELAY_UNAVAILABLE, "relay server stopped answering: its connection closed");
    return link_lost(&c->peers[0], err);
  }
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
  size_t p = 0;
  if (rc == 0 && c->mode == DIRECT) {
    receive_all(c);   /* a core's latest state first */
    rc = route(c, t->core, t->n_inputs + t->n_outputs > 0, &p, err);
  }
  if (rc == 0) {
    vdsp_wire_put_cstr(w, "params");
    if (params != NULL) vdsp_wire_put_value(w, vdsp_wire_body_root(params));
    else vdsp_wire_put_map(w, 0);
    vdsp_wire_put_cstr(w, "owner");   /* ignored by servers (§5.3); the reference client sends it */
    vdsp_wire_put_int(w, (int64_t)vdsp_ddr_owner_id(c->ddr));
    slot *s;
    rc = request(c, p, c->mode == DIRECT, K_REQUEST, VDSP_CMD_TASK, t, &s, err);
    if (rc == 0) *msg_id = s->msg_id;
  }
  vdsp_wire_body_free(params);
  return rc;
}

/* The slot of `msg_id` in flight of this process's client; NULL with `err` filled if none. */
static slot *in_flight(vdsp_client *c, uint64_t msg_id, vdsp_err *err) {
  if (not_ours(c, err) != 0) return NULL;
  slot *s = find(c, msg_id);
  if (s == NULL || s->kind != K_REQUEST) {
    vdsp_fail(err, VDSP_E_INVALID_ARGUMENT, "no request with msg_id %llu is in flight", (unsigned long long)msg_id);
    return NULL;
  }
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
  for (size_t i = 0; i < N_SLOTS; i++) n += c->slots[i].state == DONE && c->slots[i].kind == K_REQUEST;
  return n;
}

static int more_done(const vdsp_client *c, const void *before) { return done_count(c) != *(const size_t *)before; }

int vdsp_client_pump(vdsp_client *c, int timeout_ms, int wake_fd) {
  if (c->pid != getpid()) return 0;
  size_t before = done_count(c);
  return run(c, more_done, &before, timeout_ms < 0 ? -1 : now_ms() + timeout_ms, wake_fd) == 1;
}

int vdsp_client_done(const vdsp_client *c, uint64_t msg_id) {
  for (size_t i = 0; msg_id != 0 && i < N_SLOTS; i++)
    if (c->slots[i].state != FREE && c->slots[i].kind == K_REQUEST && c->slots[i].msg_id == msg_id)
      return c->slots[i].state == DONE;
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
  size_t p = target->peer;
  int fw = target->fw;
  if (target->state == DONE || (fw && !c->peers[p].fw_open)) {   /* answered, or nowhere to send a CANCEL */
    release(target);
    return 0;
  }
  vdsp_wire_writer *w = c->writer;
  vdsp_wire_writer_reset(w);
  vdsp_wire_put_map(w, 1);
  vdsp_wire_put_cstr(w, "target");
  vdsp_wire_put_uint(w, msg_id);
  slot *s;
  rc = request(c, p, fw, K_REQUEST, VDSP_CMD_CANCEL, NULL, &s, err);
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
