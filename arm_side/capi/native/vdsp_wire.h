/*
 * vdsp_wire.h: the wire layer of PROTOCOL.md in C, with nothing but libc: the 24-byte header
 * (§3.2), the frame limits (§3.4), and a msgpack codec of exactly the subset a body may hold
 * (§3.3: nil, bool, int of every width, float32/64, str, bin, array, map; no ext), with the
 * limits of §3.4 enforced as protocol/wire.py enforces them.
 *
 * The native libvdsp_hb (issue 42) speaks through it, and so does the compiled build of the Python
 * client (arm_side/taskpath.c: a task's frames).
 * It decides exactly what the Python decoder (protocol.wire.unpack_body, parse_header) decides,
 * on the same inputs: tests/sdk/test_capi_wire.py feeds both the same corpus and compares.
 *
 * Errors: every function that can fail returns 0 or a negative code of protocol/errors.py
 * (the VDSP_WIRE_E_* values below) and, when given an error struct, fills it with that code
 * and a message saying what is wrong and where. No input makes it read out of bounds, recurse
 * (every walk is iterative, at most VDSP_WIRE_MAX_DEPTH levels), or allocate more than the
 * input's size justifies (a length beyond the bytes left is refused before any allocation).
 * Nothing is global: any number of threads may use it on objects of their own.
 */
#ifndef VDSP_WIRE_H_
#define VDSP_WIRE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* --- numbers shared with protocol/constants.py (tests/sdk/test_capi_wire.py compares them) --- */
#define VDSP_WIRE_VERSION 2           /* the header's version byte (PROTOCOL.md §17) */
#define VDSP_WIRE_EARLIER_VERSION 1   /* laid out as ours: refused, answered in its own header */
#define VDSP_WIRE_HEADER_SIZE 24
#define VDSP_WIRE_MAX_BODY (1u << 20)         /* bytes of a body; also of one str or bin in it */
#define VDSP_WIRE_MAX_FRAMES 64               /* header + body + raw frames */
#define VDSP_WIRE_MAX_RAW_FRAME (64u << 20)   /* one raw frame */
#define VDSP_WIRE_MAX_MESSAGE (64u << 20)     /* all raw frames of one message */
#define VDSP_WIRE_MAX_DEPTH 32                /* nesting of maps and arrays; the body map is 1 */
#define VDSP_WIRE_MAX_CONTAINER 4096          /* elements of one array or map (pairs of a map) */

/* --- error codes: those of protocol/errors.py's classes --- */
#define VDSP_WIRE_OK 0
#define VDSP_WIRE_E_INVALID_ARGUMENT (-6000001)   /* InvalidArgument: a value we cannot send */
#define VDSP_WIRE_E_OUT_OF_MEMORY (-6000007)      /* OutOfMemory: malloc failed */
#define VDSP_WIRE_E_PROTOCOL_ERROR (-6000257)     /* ProtocolError: malformed */
#define VDSP_WIRE_E_BAD_MAGIC (-6000258)          /* BadMagic: magic or version */
#define VDSP_WIRE_E_MESSAGE_TOO_LARGE (-6000259)  /* MessageTooLarge: over a §3.4 limit */
#define VDSP_WIRE_E_UNKNOWN_COMMAND (-6000262)    /* UnknownCommand: command byte */

#define VDSP_WIRE_MESSAGE_MAX 200   /* bytes of an error's message, NUL included */

typedef struct {
  int code;      /* VDSP_WIRE_OK or a VDSP_WIRE_E_* code */
  int version;   /* BAD_MAGIC for an earlier version: that version, to answer in (§3.2); else 0 */
  char message[VDSP_WIRE_MESSAGE_MAX];   /* what is wrong, NUL-terminated; "" when OK */
} vdsp_wire_error;

/* The name of a code above ("HB_DSP_PROTOCOL_ERROR"), "HB_DNN_SUCCESS" for 0, NULL for others. */
const char *vdsp_wire_code_name(int code);

/* --- commands (protocol.constants.Command) --- */
enum {
  VDSP_CMD_HELLO = 0x01,
  VDSP_CMD_READY = 0x02,
  VDSP_CMD_TASK = 0x10,
  VDSP_CMD_RESULT = 0x11,
  VDSP_CMD_ERROR = 0x12,
  VDSP_CMD_CANCEL = 0x13,
  VDSP_CMD_HEARTBEAT = 0x20,
  VDSP_CMD_CONTROL = 0x30,
  VDSP_CMD_QUERY = 0x31,
  VDSP_CMD_EVENT = 0x40,
  VDSP_CMD_DISCONNECT = 0x50
};

/* 1 if `command` is a command byte of §5, else 0. */
int vdsp_wire_command_known(unsigned command);

/* --- the header (§3.2): struct <2sBBHBBQq, little-endian whatever the host --- */
typedef struct {
  uint8_t version;    /* VDSP_WIRE_VERSION; another only to refuse a request of that version */
  uint8_t command;
  uint16_t op;
  uint8_t priority;
  uint8_t core;
  uint64_t msg_id;
  int64_t custom_id;
} vdsp_wire_header;

/* The 24 bytes of `h` into `out` (every field fits by its type: nothing can fail). */
void vdsp_wire_header_pack(const vdsp_wire_header *h, uint8_t out[VDSP_WIRE_HEADER_SIZE]);

/* Parse a first frame as protocol.header.Header.parse does: PROTOCOL_ERROR if it is not 24
 * bytes, BAD_MAGIC for another magic or version (err->version set for an earlier version),
 * UNKNOWN_COMMAND. `out` is filled only on success. */
int vdsp_wire_header_parse(const void *frame, size_t len, vdsp_wire_header *out, vdsp_wire_error *err);

/* The msg_id at offset 8 of a 24-byte frame, whatever else it holds (to answer a malformed
 * request, §3.5): 1 and *msg_id set, or 0 if the frame is not 24 bytes. */
int vdsp_wire_peek_msg_id(const void *frame, size_t len, uint64_t *msg_id);

/* protocol.wire.check_frames: `count` frames of the given sizes (header and body included). */
int vdsp_wire_check_frames(const size_t *sizes, size_t count, vdsp_wire_error *err);

/* --- a decoded body: a tree of values, one allocation --- */
typedef enum {
  VDSP_WIRE_NIL,
  VDSP_WIRE_BOOL,
  VDSP_WIRE_INT,     /* any integer encoding whose value fits int64: v.i */
  VDSP_WIRE_UINT,    /* an unsigned value above INT64_MAX: v.u */
  VDSP_WIRE_FLOAT,   /* float32 or float64 on the wire, widened: v.f */
  VDSP_WIRE_STR,     /* UTF-8 (checked), len bytes at v.s, followed by a NUL not counted */
  VDSP_WIRE_BIN,     /* len bytes at v.s */
  VDSP_WIRE_ARRAY,   /* len values at v.items */
  VDSP_WIRE_MAP      /* len pairs: v.items[2k] is a key (always STR), v.items[2k + 1] its value */
} vdsp_wire_kind;

typedef struct vdsp_wire_value {
  uint8_t kind;       /* vdsp_wire_kind */
  uint8_t float32;    /* FLOAT: 1 if it came as a float32 (re-encoded as float64, as Python does) */
  uint32_t len;
  union {
    int b;
    int64_t i;
    uint64_t u;
    double f;
    const char *s;
    const struct vdsp_wire_value *items;
  } v;
} vdsp_wire_value;

typedef struct vdsp_wire_body vdsp_wire_body;

/* Decode a body as protocol.wire.unpack_body does: MESSAGE_TOO_LARGE for more than
 * VDSP_WIRE_MAX_BODY bytes; PROTOCOL_ERROR for anything but one msgpack map of the subset
 * within the limits with str keys in every map, nothing after it. On success *out owns a copy
 * of what it needs (the input may go); free it with vdsp_wire_body_free. On failure *out is
 * NULL. A map may repeat a key (Python's decoder keeps the last): both pairs are kept, in
 * order; vdsp_wire_map_get finds the last. */
int vdsp_wire_body_decode(const void *data, size_t len, vdsp_wire_body **out, vdsp_wire_error *err);
const vdsp_wire_value *vdsp_wire_body_root(const vdsp_wire_body *body);   /* a MAP */
void vdsp_wire_body_free(vdsp_wire_body *body);

/* The value of `key` in `map` (the last pair with that key, as Python's dict holds), or NULL
 * if `map` is not a MAP or has no such key. */
const vdsp_wire_value *vdsp_wire_map_get(const vdsp_wire_value *map, const char *key);
/* The same for a key of `len` bytes (a str may hold NUL). */
const vdsp_wire_value *vdsp_wire_map_get_n(const vdsp_wire_value *map, const char *key, size_t len);
/* The value of an INT (not BOOL: a boolean is not an integer, §3.3): 1 and *out set, else 0. */
int vdsp_wire_get_int(const vdsp_wire_value *value, int64_t *out);
/* The bytes of a STR: its NUL-terminated text (and *len if len is not NULL), else NULL. */
const char *vdsp_wire_get_str(const vdsp_wire_value *value, size_t *len);

/* --- writing a body: a growable buffer, checked as it is written --- *
 * Each put adds one value; vdsp_wire_put_array / _map open a container of exactly n values
 * (n pairs: key, value, key, value ... with str keys), which the next puts fill. The first
 * error sticks: later puts do nothing and vdsp_wire_writer_finish returns it, so a caller
 * may build a whole body and check once. Refused (INVALID_ARGUMENT): what a receiver would
 * refuse (§3.3, §3.4: a key that is not a str, a str that is not UTF-8, a container of more
 * than VDSP_WIRE_MAX_CONTAINER, a str or bin over VDSP_WIRE_MAX_BODY, nesting deeper than
 * VDSP_WIRE_MAX_DEPTH), a value after the root, an unfilled container at the finish. The
 * encoding of each value is the shortest, as msgpack-python's packb(use_bin_type=True) makes it.
 * A NULL writer is INVALID_ARGUMENT (reset and free do nothing). */
typedef struct vdsp_wire_writer vdsp_wire_writer;

vdsp_wire_writer *vdsp_wire_writer_new(void);   /* NULL if out of memory */
void vdsp_wire_writer_free(vdsp_wire_writer *w);
void vdsp_wire_writer_reset(vdsp_wire_writer *w);   /* empty again, its buffer kept */
int vdsp_wire_put_nil(vdsp_wire_writer *w);
int vdsp_wire_put_bool(vdsp_wire_writer *w, int value);
int vdsp_wire_put_int(vdsp_wire_writer *w, int64_t value);
int vdsp_wire_put_uint(vdsp_wire_writer *w, uint64_t value);
int vdsp_wire_put_double(vdsp_wire_writer *w, double value);
int vdsp_wire_put_float32(vdsp_wire_writer *w, float value);
int vdsp_wire_put_str(vdsp_wire_writer *w, const char *text, size_t len);
int vdsp_wire_put_cstr(vdsp_wire_writer *w, const char *text);   /* a NUL-terminated str */
int vdsp_wire_put_bin(vdsp_wire_writer *w, const void *data, size_t len);
int vdsp_wire_put_array(vdsp_wire_writer *w, uint32_t count);
int vdsp_wire_put_map(vdsp_wire_writer *w, uint32_t pairs);
/* A decoded value (and everything in it), as a receiver could forward it. */
int vdsp_wire_put_value(vdsp_wire_writer *w, const vdsp_wire_value *value);
/* The body written: 0 with *data and *len (owned by w, valid until its next use), or the
 * first error; also INVALID_ARGUMENT if the root is not one complete map, MESSAGE_TOO_LARGE
 * over VDSP_WIRE_MAX_BODY (as protocol.wire.pack_body). */
int vdsp_wire_writer_finish(vdsp_wire_writer *w, const uint8_t **data, size_t *len, vdsp_wire_error *err);
/* What is written so far, whatever it is (for tests and logs): its bytes and length. */
const uint8_t *vdsp_wire_writer_bytes(const vdsp_wire_writer *w, size_t *len);

#ifdef __cplusplus
}
#endif

#endif /* VDSP_WIRE_H_ */
