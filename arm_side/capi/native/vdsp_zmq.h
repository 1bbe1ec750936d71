/*
 * vdsp_zmq.h: the part of libzmq's public API (zmq.h, stable across libzmq 4.x) that the native
 * client core uses, for building where no zmq.h is installed (pyzmq ships libzmq without it).
 *
 * The prototypes are those of libzmq's documentation (zmq_ctx_new(3), zmq_socket(3), ...). The
 * constants are not typed here: vdsp_zmq_constants.h is generated at build time from the values
 * pyzmq was built with (vdsp_sim/capi_native.py), so they are those of the libzmq it ships.
 */
#ifndef VDSP_ZMQ_H_
#define VDSP_ZMQ_H_

#include <stddef.h>

#include "vdsp_zmq_constants.h"

#ifdef __cplusplus
extern "C" {
#endif

/* zmq_msg_t: 64 opaque bytes, pointer-aligned (zmq.h's definition on every Unix) */
typedef struct zmq_msg_t {
#if defined(__GNUC__)
  unsigned char _[64] __attribute__((aligned(sizeof(void *))));
#else
  unsigned char _[64];
#endif
} zmq_msg_t;

/* zmq_poll(3) on Unix: a socket, or an fd when socket is NULL */
typedef struct {
  void *socket;
  int fd;
  short events;
  short revents;
} zmq_pollitem_t;

void *zmq_ctx_new(void);
int zmq_ctx_term(void *context);
void *zmq_socket(void *context, int type);
int zmq_close(void *socket);
int zmq_setsockopt(void *socket, int option_name, const void *option_value, size_t option_len);
int zmq_getsockopt(void *socket, int option_name, void *option_value, size_t *option_len);
int zmq_connect(void *socket, const char *endpoint);
int zmq_socket_monitor(void *socket, const char *endpoint, int events);
int zmq_send(void *socket, const void *buf, size_t len, int flags);
int zmq_msg_init(zmq_msg_t *msg);
int zmq_msg_recv(zmq_msg_t *msg, void *socket, int flags);
int zmq_msg_close(zmq_msg_t *msg);
void *zmq_msg_data(zmq_msg_t *msg);
size_t zmq_msg_size(const zmq_msg_t *msg);
int zmq_msg_more(const zmq_msg_t *msg);
int zmq_poll(zmq_pollitem_t *items, int nitems, long timeout);
int zmq_errno(void);
const char *zmq_strerror(int errnum);
void zmq_version(int *major, int *minor, int *patch);

#ifdef __cplusplus
}
#endif

#endif /* VDSP_ZMQ_H_ */
