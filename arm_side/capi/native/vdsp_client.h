/*
 * vdsp_client.h: the native client core of the C library (issue 42): a client of PROTOCOL.md in
 * C over libzmq, with no Python in the process; libvdsp_hb's hbSys/hbDSP functions (vdsp_hb.c).
 *
 * vdsp_client_open claims a DDR owner (vdsp_ddr.h) and connects as VDSP_RPC_MODE says
 * (`relay`, the default, or `direct`; anything else INVALID_ARGUMENT):
 * - relay mode (§15.1): one link to the relay (vdsp_link.h), HELLO {role: "client", pid, owner,
 *   lock_fd, name} (§5.2); READY completes it;
 * - direct mode (§15.2): HELLO to each core's control endpoint ($VDSP_CORE_ENDPOINTS, else the
 *   runtime dir's vdsp0.sock, vdsp1.sock), in core order; a core that does not answer (nothing
 *   serves its ipc endpoint; no READY within the connect timeout) is unreachable, and none
 *   answering is CORE_OFFLINE. A core that runs gets a link to its firmware (the announced
 *   fw_endpoint, a wildcard host replaced, §2.2; over tcp fw_server_key as the server key) and
 *   our HELLO there, not waited for: a refusal (CLAIM_REFUSED, or BUSY: said again after a
 *   pause) fails later tasks with buffers to that core. EVENTs on a control link move the core's
 *   state: `running` (a new endpoint or key: a new firmware link), else its firmware link closes
 *   and its tasks in flight fail (CORE_OFFLINE, _CRASHED, _DEAD, as protocol.core_state says).
 *   Over ipc a control connection that closes is the core's death; a firmware link that failed
 *   or ended is made again (the tasks sent on it fail CORE_OFFLINE if it never connected; those
 *   sent on one that ended wait for the core's word, whatever links after it fail). TASKs go to the chosen
 *   core's firmware (CORE_ANY: the running core with the fewest tasks in flight), CANCELs too;
 *   HEARTBEATs to each control link.
 * Over tcp (any server's endpoint tcp://) the links are CURVE clients (§16, vdsp_curve.h) and our
 * public key is named in our owner's access list before the first HELLO (vdsp_ddr_set_key); a
 * server that refuses our key (or whose handshakes fail as with a wrong server key) is
 * KEY_REFUSED (vdsp_link.h). A HELLO answered HB_DSP_BUSY is said again after a pause that
 * doubles from 20 ms to 500 ms, each drawn between half and all of that, until the connect
 * timeout (20 s by default): then HB_DSP_CORE_BUSY. An ERROR (HB_DSP_CLAIM_REFUSED: the server
 * did not find our lock) is returned with the server's message. Nothing listening at an ipc
 * relay endpoint is HB_DSP_RELAY_UNAVAILABLE at once, saying to run `vdsp up -d`; so is a relay
 * that closes the connection (over tcp: once its handshake had succeeded), for every request in
 * flight and every one after.
 *
 * Requests (TASK) carry msg_ids from 1 up; at most VDSP_CLIENT_MAX_INFLIGHT are in flight (the
 * relay's limit per client, §12). Replies are matched by msg_id, whatever their order or link;
 * HEARTBEATs are read and passed over, EVENTs too in relay mode; the client sends a HEARTBEAT each
 * heartbeat_ms of READY while it waits inside a call. Every frame goes through vdsp_wire: a reply
 * whose header, frames or body are malformed, or whose known fields have the wrong type (§3.3,
 * §5), fails its request with the wire's code (HB_DSP_PROTOCOL_ERROR, _BAD_MAGIC, ...).
 *
 * Not here: relay autostart (libvdsp_hb's front leaves that to the embedded SDK), connecting to
 * a relay again after it went away, CONTROL/QUERY, a peer's hung deadline (a server silent past
 * it is not declared dead: only a closed ipc connection is), heartbeats between calls (a client
 * idle in its own code for the relay's hung deadline, 20 s, while its process sleeps, is dropped
 * by the relay).
 *
 * One thread at a time per client. A client opened before fork() is not the child's: every
 * call there returns HB_DNN_API_USE_ERROR, and closing it only releases the child's copies.
 */
#ifndef VDSP_CLIENT_H_
#define VDSP_CLIENT_H_

#include <stddef.h>
#include <stdint.h>

#include "vdsp_ddr.h"
#include "vdsp_err.h"
#include "vdsp_wire.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VDSP_CLIENT_MAX_INFLIGHT 32
#define VDSP_CLIENT_MAX_CORES 8               /* direct mode: cores of VDSP_CORE_ENDPOINTS */
#define VDSP_CLIENT_MAX_HANDLES 32            /* inputs, and outputs, of one TASK (§3.4) */
#define VDSP_CLIENT_CONNECT_TIMEOUT_MS 20000
#define VDSP_CLIENT_BUSY_FIRST_MS 20
#define VDSP_CLIENT_BUSY_MOST_MS 500

typedef struct vdsp_client vdsp_client;

typedef struct {
  const char *endpoint;     /* the relay's (relay mode whatever VDSP_RPC_MODE says); NULL: as above */
  const char *ddr_dir;      /* NULL: $VDSP_SHM_DIR or /dev/shm */
  int connect_timeout_ms;   /* 0: VDSP_CLIENT_CONNECT_TIMEOUT_MS */
  const char *name;         /* HELLO's name; NULL: "pid<PID>" */
} vdsp_client_options;

/* Claim an owner, connect, HELLO; 0 with *out, else a code (nothing is left behind). `options`
 * may be NULL. */
int vdsp_client_open(const vdsp_client_options *options, vdsp_client **out, vdsp_err *err);

/* DISCONNECT, close the link, free the owner's DDR (vdsp_ddr_close), free `c` (NULL: nothing). */
void vdsp_client_close(vdsp_client *c);

vdsp_ddr_owner *vdsp_client_ddr(vdsp_client *c);
/* The READY's body (a MAP), valid until the client is closed: the relay's, or in direct mode the
 * first core's that answered. */
const vdsp_wire_value *vdsp_client_ready(const vdsp_client *c);
const char *vdsp_client_endpoint(const vdsp_client *c);
/* 1 in direct mode, 0 in relay mode. */
int vdsp_client_direct(const vdsp_client *c);

typedef struct {
  uint64_t phys, size, flags;   /* §6.2: flags bit 0 REGISTERED, the others reserved */
} vdsp_handle;

typedef struct {
  uint16_t op;          /* 0x0000 .. 0xfffe */
  uint8_t priority;     /* 0 .. 255 (PREEMP) */
  uint8_t core;         /* 0 ANY, 1 CORE_0, 2 CORE_1 */
  int64_t custom_id;
  const vdsp_handle *inputs;
  size_t n_inputs;
  const vdsp_handle *outputs;
  size_t n_outputs;
  const void *params;   /* the encoded msgpack map of the parameters (§7.4), or NULL: {} */
  size_t params_len;
} vdsp_task;

typedef struct {
  vdsp_wire_header header;   /* RESULT's: core bit and the µs the task waited in the relay */
  vdsp_wire_body *body;      /* RESULT's body: `values`, `core`, `exec_us` ... */
} vdsp_reply;

/* Send a TASK; 0 with *msg_id to wait for. INVALID_ARGUMENT for what no server would take (an op
 * of 0xffff, more than 32 handles, a reserved flag, params that are not one map of §3.3),
 * TASK_NUM_EXCEED_LIMIT with VDSP_CLIENT_MAX_INFLIGHT in flight, RELAY_UNAVAILABLE. */
int vdsp_client_submit(vdsp_client *c, const vdsp_task *task, uint64_t *msg_id, vdsp_err *err);

/* Wait up to `timeout_ms` (-1: no limit) for the reply of `msg_id`: 0 and *reply (free it with
 * vdsp_reply_free) for a RESULT; the ERROR's code and message; TASK_TIMEOUT when none came (the
 * request stays in flight: wait again); RELAY_UNAVAILABLE when the relay went away; a wire code
 * for a malformed reply; INVALID_ARGUMENT for an msg_id not in flight. */
int vdsp_client_wait(vdsp_client *c, uint64_t msg_id, int timeout_ms, vdsp_reply *reply, vdsp_err *err);

/* submit then wait. */
int vdsp_client_call(vdsp_client *c, const vdsp_task *task, int timeout_ms, vdsp_reply *reply, vdsp_err *err);

void vdsp_reply_free(vdsp_reply *reply);

/* Read what arrives for up to `timeout_ms` (-1: no limit), sending HEARTBEATs: 1 as soon as a
 * request in flight has its outcome (a reply, or the link's end), 0 when the time passed or the
 * fd `wake_fd` (-1: none) became readable first. For a client shared by threads: one thread
 * reads while the others sleep, and a thread that needs the client makes the reader return. */
int vdsp_client_pump(vdsp_client *c, int timeout_ms, int wake_fd);

/* 1 if the request `msg_id` has its outcome (vdsp_client_wait takes it at once), 0 while it is in
 * flight, -1 if no such request is in flight. */
int vdsp_client_done(const vdsp_client *c, uint64_t msg_id);

/* Give the request `msg_id` up: a TASK not yet answered is CANCELled (§5.5: its answer waited
 * for up to `timeout_ms`; no reply of the task comes after it), an answered one's outcome is
 * dropped. 0, or the CANCEL's failure (the task is given up all the same); INVALID_ARGUMENT for
 * an msg_id not in flight. */
int vdsp_client_cancel(vdsp_client *c, uint64_t msg_id, int timeout_ms, vdsp_err *err);

#ifdef __cplusplus
}
#endif

#endif /* VDSP_CLIENT_H_ */
