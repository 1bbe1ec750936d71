/*
 * vdsp_wire.c: the header, frame limits and body codec of PROTOCOL.md §3 (vdsp_wire.h).
 *
 * Invariants:
 * - every read of input is preceded by a check that the bytes are there (need());
 * - a body is walked without recursion, with a stack of at most VDSP_WIRE_MAX_DEPTH open
 *   containers: a deeper one is refused before it is entered;
 * - a body is decoded in two walks of the same function: the first checks everything and
 *   counts values and payload bytes, the second (which cannot fail) fills one allocation of
 *   exactly that size: at most sizeof(vdsp_wire_value) + 1 bytes per input byte;
 * - what is accepted and refused is what protocol/wire.py's unpack_body accepts and refuses
 *   (msgpack-python with its limits, then its key and depth check).
 */
#include "vdsp_wire.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- errors ------------------------------------------------------------------------------ */

const char *vdsp_wire_code_name(int code) {
  switch (code) {
    case VDSP_WIRE_OK: return "HB_DNN_SUCCESS";
    case VDSP_WIRE_E_INVALID_ARGUMENT: return "HB_DNN_INVALID_ARGUMENT";
    case VDSP_WIRE_E_OUT_OF_MEMORY: return "HB_DNN_OUT_OF_MEMORY";
    case VDSP_WIRE_E_PROTOCOL_ERROR: return "HB_DSP_PROTOCOL_ERROR";
    case VDSP_WIRE_E_BAD_MAGIC: return "HB_DSP_BAD_MAGIC";
    case VDSP_WIRE_E_MESSAGE_TOO_LARGE: return "HB_DSP_MESSAGE_TOO_LARGE";
    case VDSP_WIRE_E_UNKNOWN_COMMAND: return "HB_DSP_UNKNOWN_COMMAND";
    default: return NULL;
  }
}

#if defined(__GNUC__)
#define WIRE_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define WIRE_PRINTF(f, a)
#endif

/* Fill `err` (if any) with code and message; returns code. */
static int fail(vdsp_wire_error *err, int code, const char *fmt, ...) WIRE_PRINTF(3, 4);
static int fail(vdsp_wire_error *err, int code, const char *fmt, ...) {
  if (err != NULL) {
    va_list ap;
    va_start(ap, fmt);
    err->code = code;
    err->version = 0;
    vsnprintf(err->message, VDSP_WIRE_MESSAGE_MAX, fmt, ap);
    va_end(ap);
  }
  return code;
}

static int ok(vdsp_wire_error *err) {
  if (err != NULL) {
    err->code = VDSP_WIRE_OK;
    err->version = 0;
    err->message[0] = '\0';
  }
  return VDSP_WIRE_OK;
}

/* --- bytes ------------------------------------------------------------------------------- */

static uint64_t load_be(const uint8_t *p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) v = (v << 8) | p[i];
  return v;
}

static uint64_t load_le(const uint8_t *p, size_t n) {
  uint64_t v = 0;
  for (size_t i = n; i > 0; i--) v = (v << 8) | p[i - 1];
  return v;
}

static void store_be(uint8_t *p, uint64_t v, size_t n) {
  for (size_t i = n; i > 0; i--, v >>= 8) p[i - 1] = (uint8_t)v;
}

static void store_le(uint8_t *p, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; i++, v >>= 8) p[i] = (uint8_t)v;
}

/* Length of the valid UTF-8 prefix of s[0..n) as Python's strict codec judges it (no
 * surrogates, no overlong forms, nothing above U+10FFFF): n if all of it is valid. */
static size_t utf8_valid_prefix(const uint8_t *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint8_t c = s[i];
    size_t more;
    uint8_t lo = 0x80, hi = 0xBF;   /* the range of the second byte */
    if (c < 0x80) {
      i++;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      more = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      more = 2;
      if (c == 0xE0) lo = 0xA0;        /* overlong */
      else if (c == 0xED) hi = 0x9F;   /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
      more = 3;
      if (c == 0xF0) lo = 0x90;        /* overlong */
      else if (c == 0xF4) hi = 0x8F;   /* above U+10FFFF */
    } else {
      return i;
    }
    if (n - i <= more) return i;
    if (s[i + 1] < lo || s[i + 1] > hi) return i;
    for (size_t k = 2; k <= more; k++)
      if ((s[i + k] & 0xC0) != 0x80) return i;
    i += more + 1;
  }
  return n;
}

/* --- header ------------------------------------------------------------------------------ */

int vdsp_wire_command_known(unsigned command) {
  switch (command) {
    case VDSP_CMD_HELLO: case VDSP_CMD_READY: case VDSP_CMD_TASK: case VDSP_CMD_RESULT:
    case VDSP_CMD_ERROR: case VDSP_CMD_CANCEL: case VDSP_CMD_HEARTBEAT: case VDSP_CMD_CONTROL:
    case VDSP_CMD_QUERY: case VDSP_CMD_EVENT: case VDSP_CMD_DISCONNECT:
      return 1;
    default:
      return 0;
  }
}

void vdsp_wire_header_pack(const vdsp_wire_header *h, uint8_t out[VDSP_WIRE_HEADER_SIZE]) {
  out[0] = 'V';
  out[1] = 'D';
  out[2] = h->version;
  out[3] = h->command;
  store_le(out + 4, h->op, 2);
  out[6] = h->priority;
  out[7] = h->core;
  store_le(out + 8, h->msg_id, 8);
  store_le(out + 16, (uint64_t)h->custom_id, 8);
}

/* A byte as Python's bytes repr writes it, into out (at least 5 bytes). */
static void repr_byte(char *out, uint8_t c) {
  if (c == '\\' || c == '\'') snprintf(out, 5, "\\%c", c);
  else if (c == '\t') snprintf(out, 5, "\\t");
  else if (c == '\n') snprintf(out, 5, "\\n");
  else if (c == '\r') snprintf(out, 5, "\\r");
  else if (c >= 0x20 && c < 0x7F) snprintf(out, 5, "%c", c);
  else snprintf(out, 5, "\\x%02x", c);
}

int vdsp_wire_header_parse(const void *frame, size_t len, vdsp_wire_header *out, vdsp_wire_error *err) {
  const uint8_t *p = (const uint8_t *)frame;
  if (len != VDSP_WIRE_HEADER_SIZE || p == NULL)
    return fail(err, VDSP_WIRE_E_PROTOCOL_ERROR, "header must be %d bytes, got %zu", VDSP_WIRE_HEADER_SIZE,
                p == NULL ? (size_t)0 : len);
  if (p[0] != 'V' || p[1] != 'D') {
    char a[5], b[5];
    repr_byte(a, p[0]);
    repr_byte(b, p[1]);
    return fail(err, VDSP_WIRE_E_BAD_MAGIC, "bad magic b'%s%s', expected b'VD'", a, b);
  }
  if (p[2] != VDSP_WIRE_VERSION) {
    fail(err, VDSP_WIRE_E_BAD_MAGIC,
         "protocol version %u not supported: this peer speaks version %d "
         "(PROTOCOL.md §17 says what changed and what a client must do)", p[2], VDSP_WIRE_VERSION);
    if (err != NULL && p[2] == VDSP_WIRE_EARLIER_VERSION) err->version = p[2];   /* answered in its own header */
    return VDSP_WIRE_E_BAD_MAGIC;
  }
  if (!vdsp_wire_command_known(p[3]))
    return fail(err, VDSP_WIRE_E_UNKNOWN_COMMAND, "unknown command byte 0x%02x", p[3]);
  if (out != NULL) {
    out->version = p[2];
    out->command = p[3];
    out->op = (uint16_t)load_le(p + 4, 2);
    out->priority = p[6];
    out->core = p[7];
    out->msg_id = load_le(p + 8, 8);
    out->custom_id = (int64_t)load_le(p + 16, 8);
  }
  return ok(err);
}

int vdsp_wire_peek_msg_id(const void *frame, size_t len, uint64_t *msg_id) {
  if (frame == NULL || len != VDSP_WIRE_HEADER_SIZE) return 0;
  if (msg_id != NULL) *msg_id = load_le((const uint8_t *)frame + 8, 8);
  return 1;
}

int vdsp_wire_check_frames(const size_t *sizes, size_t count, vdsp_wire_error *err) {
  if (sizes == NULL && count > 0) return fail(err, VDSP_WIRE_E_INVALID_ARGUMENT, "no sizes for %zu frames", count);
  if (count < 2)
    return fail(err, VDSP_WIRE_E_PROTOCOL_ERROR, "a message needs a header and a body frame, got %zu frame(s)",
                count);
  if (count > VDSP_WIRE_MAX_FRAMES)
    return fail(err, VDSP_WIRE_E_MESSAGE_TOO_LARGE, "%zu frames exceed the limit of %d", count,
                VDSP_WIRE_MAX_FRAMES);
  size_t total = 0;   /* <= 62 frames each <= 64 MiB: no overflow */
  for (size_t i = 2; i < count; i++) {
    if (sizes[i] > VDSP_WIRE_MAX_RAW_FRAME)
      return fail(err, VDSP_WIRE_E_MESSAGE_TOO_LARGE, "raw frame of %zu bytes exceeds %u", sizes[i],
                  VDSP_WIRE_MAX_RAW_FRAME);
    total += sizes[i];
  }
  if (total > VDSP_WIRE_MAX_MESSAGE)
    return fail(err, VDSP_WIRE_E_MESSAGE_TOO_LARGE, "raw frames of %zu bytes in one message exceed %u", total,
                VDSP_WIRE_MAX_MESSAGE);
  return ok(err);
}

/* --- body: decoding ---------------------------------------------------------------------- */

struct vdsp_wire_body {
  size_t count;              /* values, the root first */
  vdsp_wire_value values[];  /* then the str/bin bytes */
};

/* One open container of a walk: `left` values still to come (a map's pairs count twice). */
typedef struct {
  uint32_t left;
  uint8_t is_map;
  vdsp_wire_value *next;   /* building: the slot of its next value */
} open_container;

typedef struct {
  const uint8_t *p;
  size_t len, pos;
  vdsp_wire_error *err;
  /* counting walk: what the tree needs */
  size_t values, bytes;
  /* building walk: where it goes (NULL while counting) */
  vdsp_wire_value *free_value;
  char *free_byte;
} walker;

/* Python's type name of a msgpack type byte (for messages that read as the Python decoder's). */
static const char *type_name(uint8_t b) {
  if (b <= 0x7F || b >= 0xE0 || (b >= 0xCC && b <= 0xD3)) return "int";
  if (b <= 0x8F || b == 0xDE || b == 0xDF) return "dict";
  if (b <= 0x9F || b == 0xDC || b == 0xDD) return "list";
  if (b <= 0xBF || (b >= 0xD9 && b <= 0xDB)) return "str";
  if (b == 0xC0) return "NoneType";
  if (b == 0xC2 || b == 0xC3) return "bool";
  if (b >= 0xC4 && b <= 0xC6) return "bytes";
  if (b == 0xCA || b == 0xCB) return "float";
  return "ExtType";
}

static int truncated(walker *w, size_t at, const char *what, size_t wanted) {
  return fail(w->err, VDSP_WIRE_E_PROTOCOL_ERROR,
              "body is not valid msgpack: it ends inside %s at byte %zu (%zu bytes needed, %zu left)", what, at,
              wanted, w->len - w->pos);
}

/* 0 if n more bytes are there, else the error (nothing is read). */
static int need(walker *w, size_t at, size_t n, const char *what) {
  return w->len - w->pos >= n ? 0 : truncated(w, at, what, n);
}

/* Read the value at w->pos into *slot (if building). Sets *count to the values a container
 * holds (pairs twice), 0 otherwise, and *is_map. */
static int one_value(walker *w, int is_key, int depth, vdsp_wire_value *slot, uint32_t *count, uint8_t *is_map) {
  size_t at = w->pos;
  int rc;
  vdsp_wire_value v;
  memset(&v, 0, sizeof v);
  *count = 0;
  *is_map = 0;
  if (w->pos >= w->len) {
    if (at == 0) return fail(w->err, VDSP_WIRE_E_PROTOCOL_ERROR, "body is not valid msgpack: it is empty");
    return fail(w->err, VDSP_WIRE_E_PROTOCOL_ERROR, "body is not valid msgpack: it ends at byte %zu where a value is due",
                at);
  }
  uint8_t b = w->p[w->pos++];
  if (is_key && !(b >= 0xA0 && b <= 0xBF) && !(b >= 0xD9 && b <= 0xDB))
    return fail(w->err, VDSP_WIRE_E_PROTOCOL_ERROR, "map keys must be str, got %s (byte 0x%02x at %zu)",
                type_name(b), b, at);
  size_t width = 0;   /* bytes of a length or number that follow b */
  uint64_t n = 0;
  if (b <= 0x7F || b >= 0xE0) {
    v.kind = VDSP_WIRE_INT;
    v.v.i = (int8_t)b;
  } else if (b <= 0x8F || b == 0xDE || b == 0xDF || b <= 0x9F || b == 0xDC || b == 0xDD) {
    int map = b <= 0x8F || b == 0xDE || b == 0xDF;
    if (b <= 0x9F) {
      n = b & 0x0F;
    } else {
      width = (b == 0xDC || b == 0xDE) ? 2 : 4;
      if ((rc = need(w, at, width, map ? "a map's length" : "an array's length")) != 0) return rc;
      n = load_be(w->p + w->pos, width);
      w->pos += width;
    }
    if (n > VDSP_WIRE_MAX_CONTAINER)
      return fail(w->err, VDSP_WIRE_E_PROTOCOL_ERROR,
                  "body is not valid msgpack: %s of %llu elements at byte %zu exceeds the limit of %d",
                  map ? "map" : "array", (unsigned long long)n, at, VDSP_WIRE_MAX_CONTAINER);
    if (depth > VDSP_WIRE_MAX_DEPTH)
      return fail(w->err, VDSP_WIRE_E_PROTOCOL_ERROR, "body nests maps/arrays deeper than %d levels",
                  VDSP_WIRE_MAX_DEPTH);
    uint64_t values = map ? 2 * n : n;
    /* each value takes at least one byte: a count beyond the bytes left is refused now */
    if ((rc = need(w, at, (size_t)values, map ? "a map" : "an array")) != 0) return rc;
    v.kind = map ? VDSP_WIRE_MAP : VDSP_WIRE_ARRAY;
    v.len = (uint32_t)n;
    *count = (uint32_t)values;
    *is_map = (uint8_t)map;
  } else if (b <= 0xBF || (b >= 0xD9 && b <= 0xDB) || (b >= 0xC4 && b <= 0xC6)) {
    int str = !(b >= 0xC4 && b <= 0xC6);
    if (b <= 0xBF) {
      n = b & 0x1F;
    } else {
      width = (size_t)1 << (str ? b - 0xD9 : b - 0xC4);
      if ((rc = need(w, at, width, str ? "a str's length" : "a bin's length")) != 0) return rc;
      n = load_be(w->p + w->pos, width);
      w->pos += width;
    }
    if (n > VDSP_WIRE_MAX_BODY)
      return fail(w->err, VDSP_WIRE_E_PROTOCOL_ERROR,
                  "body is not valid msgpack: %s of %llu bytes at byte %zu exceeds the limit of %u", str ? "str" : "bin",
                  (unsigned long long)n, at, VDSP_WIRE_MAX_BODY);
    if ((rc = need(w, at, (size_t)n, str ? "a str" : "a bin")) != 0) return rc;
    const uint8_t *s = w->p + w->pos;
    if (str && slot == NULL) {
      size_t good = utf8_valid_prefix(s, (size_t)n);
      if (good != n)
        return fail(w->err, VDSP_WIRE_E_PROTOCOL_ERROR,
                    "body is not valid msgpack: the str at byte %zu is not UTF-8 (its byte %zu, 0x%02x)", at, good,
                    s[good]);
    }
    v.kind = str ? VDSP_WIRE_STR : VDSP_WIRE_BIN;
    v.len = (uint32_t)n;
    if (slot != NULL) {
      memcpy(w->free_byte, s, (size_t)n);
      v.v.s = w->free_byte;
      w->free_byte += n;
      if (str) *w->free_byte++ = '\0';
    }
    w->bytes += (size_t)n + (size_t)str;
    w->pos += (size_t)n;
  } else if (b == 0xC0) {
    v.kind = VDSP_WIRE_NIL;
  } else if (b == 0xC2 || b == 0xC3) {
    v.kind = VDSP_WIRE_BOOL;
    v.v.b = b == 0xC3;
  } else if (b == 0xCA || b == 0xCB) {
    width = b == 0xCA ? 4 : 8;
    if ((rc = need(w, at, width, "a float")) != 0) return rc;
    uint64_t bits = load_be(w->p + w->pos, width);
    w->pos += width;
    v.kind = VDSP_WIRE_FLOAT;
    if (width == 4) {
      uint32_t bits32 = (uint32_t)bits;
      float f;
      memcpy(&f, &bits32, sizeof f);
      v.v.f = (double)f;
      v.float32 = 1;
    } else {
      memcpy(&v.v.f, &bits, sizeof v.v.f);
    }
  } else if (b >= 0xCC && b <= 0xD3) {
    int is_signed = b >= 0xD0;
    width = (size_t)1 << (b - (is_signed ? 0xD0 : 0xCC));
    if ((rc = need(w, at, width, "an int")) != 0) return rc;
    uint64_t raw = load_be(w->p + w->pos, width);
    w->pos += width;
    if (is_signed) {
      /* sign-extend from width bytes */
      uint64_t sign = (uint64_t)1 << (8 * width - 1);
      v.v.i = width == 8 ? (int64_t)raw : (int64_t)((raw ^ sign) - sign);
      v.kind = VDSP_WIRE_INT;
    } else if (raw > (uint64_t)INT64_MAX) {
      v.v.u = raw;
      v.kind = VDSP_WIRE_UINT;
    } else {
      v.v.i = (int64_t)raw;
      v.kind = VDSP_WIRE_INT;
    }
  } else if (b == 0xC1) {
    return fail(w->err, VDSP_WIRE_E_PROTOCOL_ERROR, "body is not valid msgpack: byte 0xc1 at %zu is never used",
                at);
  } else {   /* 0xC7-0xC9 ext 8/16/32, 0xD4-0xD8 fixext: refused whatever follows (§3.3) */
    return fail(w->err, VDSP_WIRE_E_PROTOCOL_ERROR, "msgpack ext type (byte 0x%02x at %zu) is not allowed", b, at);
  }
  w->values++;
  if (slot != NULL) *slot = v;
  return 0;
}

/* One walk over the body: checking and counting (w->free_value NULL) or building. */
static int walk(walker *w, vdsp_wire_value *root) {
  open_container stack[VDSP_WIRE_MAX_DEPTH];
  int depth = 0;   /* open containers; the value read next is at level depth + 1 */
  int first = 1;
  w->pos = 0;
  w->values = w->bytes = 0;
  while (first || depth > 0) {
    vdsp_wire_value *slot = root;
    int is_key = 0;
    if (depth > 0) {
      open_container *top = &stack[depth - 1];
      is_key = top->is_map && top->left % 2 == 0;
      top->left--;
      slot = top->next != NULL ? top->next++ : NULL;
    }
    uint32_t count;
    uint8_t is_map;
    size_t at = w->pos;
    int rc = one_value(w, is_key, depth + 1, slot, &count, &is_map);
    if (rc != 0) return rc;
    if (first && !is_map)
      return fail(w->err, VDSP_WIRE_E_PROTOCOL_ERROR, "body must be a msgpack map, got %s", type_name(w->p[at]));
    first = 0;
    if (count > 0) {   /* depth + 1 <= MAX_DEPTH: one_value refused deeper */
      open_container *c = &stack[depth++];
      c->left = count;
      c->is_map = is_map;
      c->next = NULL;
      if (w->free_value != NULL) {
        c->next = w->free_value;
        slot->v.items = w->free_value;
        w->free_value += count;
      }
    }
    while (depth > 0 && stack[depth - 1].left == 0) depth--;
  }
  if (w->pos != w->len)
    return fail(w->err, VDSP_WIRE_E_PROTOCOL_ERROR, "body is not valid msgpack: %zu bytes after the map",
                w->len - w->pos);
  return 0;
}

int vdsp_wire_body_decode(const void *data, size_t len, vdsp_wire_body **out, vdsp_wire_error *err) {
  vdsp_wire_error local;
  if (err == NULL) err = &local;
  if (out == NULL) return fail(err, VDSP_WIRE_E_INVALID_ARGUMENT, "no place for the body (out is NULL)");
  *out = NULL;
  if (len > VDSP_WIRE_MAX_BODY)
    return fail(err, VDSP_WIRE_E_MESSAGE_TOO_LARGE, "body of %zu bytes exceeds %u", len, VDSP_WIRE_MAX_BODY);
  walker w;
  memset(&w, 0, sizeof w);
  w.p = (const uint8_t *)data;
  w.len = data == NULL ? 0 : len;
  w.err = err;
  int rc = walk(&w, NULL);
  if (rc != 0) return rc;
  /* values <= len and bytes <= len (each counted value took input bytes): no overflow at 1 MiB */
  size_t size = sizeof(vdsp_wire_body) + w.values * sizeof(vdsp_wire_value) + w.bytes;
  vdsp_wire_body *body = (vdsp_wire_body *)malloc(size);
  if (body == NULL)
    return fail(err, VDSP_WIRE_E_OUT_OF_MEMORY, "out of memory for a body of %zu values", w.values);
  body->count = w.values;
  w.free_value = body->values + 1;
  w.free_byte = (char *)(body->values + w.values);
  rc = walk(&w, body->values);   /* the same bytes again: cannot fail */
  if (rc != 0 || w.free_value != body->values + body->count) {
    free(body);
    return rc != 0 ? rc : fail(err, VDSP_WIRE_E_PROTOCOL_ERROR, "internal error: the walks disagree");
  }
  *out = body;
  return ok(err);
}

const vdsp_wire_value *vdsp_wire_body_root(const vdsp_wire_body *body) {
  return body == NULL ? NULL : &body->values[0];
}

void vdsp_wire_body_free(vdsp_wire_body *body) { free(body); }

const vdsp_wire_value *vdsp_wire_map_get(const vdsp_wire_value *map, const char *key) {
  return key == NULL ? NULL : vdsp_wire_map_get_n(map, key, strlen(key));
}

const vdsp_wire_value *vdsp_wire_map_get_n(const vdsp_wire_value *map, const char *key, size_t n) {
  if (map == NULL || map->kind != VDSP_WIRE_MAP || (key == NULL && n > 0)) return NULL;
  const vdsp_wire_value *found = NULL;
  for (uint32_t k = 0; k < map->len; k++) {
    const vdsp_wire_value *name = &map->v.items[2 * k];
    if (name->kind == VDSP_WIRE_STR && name->len == n && (n == 0 || memcmp(name->v.s, key, n) == 0))
      found = &map->v.items[2 * k + 1];
  }
  return found;
}

int vdsp_wire_get_int(const vdsp_wire_value *value, int64_t *out) {
  if (value == NULL || value->kind != VDSP_WIRE_INT) return 0;
  if (out != NULL) *out = value->v.i;
  return 1;
}

const char *vdsp_wire_get_str(const vdsp_wire_value *value, size_t *len) {
  if (value == NULL || value->kind != VDSP_WIRE_STR) return NULL;
  if (len != NULL) *len = value->len;
  return value->v.s;
}

/* --- body: writing ----------------------------------------------------------------------- */

struct vdsp_wire_writer {
  uint8_t *buf;
  size_t len, cap;
  vdsp_wire_error error;   /* the first error; code 0 while none */
  int started;             /* the root was begun */
  uint8_t root_kind;
  int depth;
  open_container stack[VDSP_WIRE_MAX_DEPTH];
};

vdsp_wire_writer *vdsp_wire_writer_new(void) {
  vdsp_wire_writer *w = (vdsp_wire_writer *)calloc(1, sizeof *w);
  return w;
}

void vdsp_wire_writer_free(vdsp_wire_writer *w) {
  if (w != NULL) free(w->buf);
  free(w);
}

void vdsp_wire_writer_reset(vdsp_wire_writer *w) {
  if (w == NULL) return;
  uint8_t *buf = w->buf;
  size_t cap = w->cap;
  memset(w, 0, sizeof *w);
  w->buf = buf;
  w->cap = cap;
}

static int wfail(vdsp_wire_writer *w, int code, const char *fmt, ...) WIRE_PRINTF(3, 4);
static int wfail(vdsp_wire_writer *w, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  w->error.code = code;
  w->error.version = 0;
  vsnprintf(w->error.message, VDSP_WIRE_MESSAGE_MAX, fmt, ap);
  va_end(ap);
  return code;
}

/* Room for n more bytes; the body never grows past VDSP_WIRE_MAX_BODY (MESSAGE_TOO_LARGE). */
static int room(vdsp_wire_writer *w, size_t n) {
  if (n > VDSP_WIRE_MAX_BODY - w->len)
    return wfail(w, VDSP_WIRE_E_MESSAGE_TOO_LARGE, "body of more than %zu bytes exceeds %u", w->len + n,
                 VDSP_WIRE_MAX_BODY);
  if (w->len + n <= w->cap) return 0;
  size_t cap = w->cap ? w->cap : 256;
  while (cap < w->len + n) cap *= 2;
  if (cap > VDSP_WIRE_MAX_BODY) cap = VDSP_WIRE_MAX_BODY;
  uint8_t *buf = (uint8_t *)realloc(w->buf, cap);
  if (buf == NULL) return wfail(w, VDSP_WIRE_E_OUT_OF_MEMORY, "out of memory for a body of %zu bytes", cap);
  w->buf = buf;
  w->cap = cap;
  return 0;
}

/* Python's type name of a value of `kind` (the writer's messages read as protocol.wire's). */
static const char *kind_name(vdsp_wire_kind kind) {
  static const char *const names[] = {"NoneType", "bool", "int", "int", "float", "str", "bytes", "list", "dict"};
  return (unsigned)kind < sizeof names / sizeof names[0] ? names[kind] : "unknown";
}

/* Before a value of `kind`: the sticky error, a value after the root, a key that is not a str. */
static int begin(vdsp_wire_writer *w, vdsp_wire_kind kind) {
  if (w->error.code != 0) return w->error.code;
  if (w->depth == 0) {
    if (w->started) return wfail(w, VDSP_WIRE_E_INVALID_ARGUMENT, "a value after the body's map");
    w->started = 1;
    w->root_kind = (uint8_t)kind;
    return 0;
  }
  open_container *top = &w->stack[w->depth - 1];
  if (top->is_map && top->left % 2 == 0 && kind != VDSP_WIRE_STR)
    return wfail(w, VDSP_WIRE_E_INVALID_ARGUMENT, "map keys must be str, got %s", kind_name(kind));
  top->left--;
  return 0;
}

/* After a value: close the containers it filled. */
static int end(vdsp_wire_writer *w) {
  while (w->depth > 0 && w->stack[w->depth - 1].left == 0) w->depth--;
  return 0;
}

/* A type byte followed by `width` big-endian bytes of v. */
static int emit(vdsp_wire_writer *w, uint8_t type, uint64_t v, size_t width) {
  if (room(w, 1 + width)) return w->error.code;
  w->buf[w->len] = type;
  store_be(w->buf + w->len + 1, v, width);
  w->len += 1 + width;
  return 0;
}

int vdsp_wire_put_nil(vdsp_wire_writer *w) {
  if (w == NULL) return VDSP_WIRE_E_INVALID_ARGUMENT;
  if (begin(w, VDSP_WIRE_NIL) || emit(w, 0xC0, 0, 0)) return w->error.code;
  return end(w);
}

int vdsp_wire_put_bool(vdsp_wire_writer *w, int value) {
  if (w == NULL) return VDSP_WIRE_E_INVALID_ARGUMENT;
  if (begin(w, VDSP_WIRE_BOOL) || emit(w, value ? 0xC3 : 0xC2, 0, 0)) return w->error.code;
  return end(w);
}

static int emit_uint(vdsp_wire_writer *w, uint64_t v) {
  if (v < 0x80) return emit(w, (uint8_t)v, 0, 0);
  if (v <= 0xFF) return emit(w, 0xCC, v, 1);
  if (v <= 0xFFFF) return emit(w, 0xCD, v, 2);
  if (v <= 0xFFFFFFFFu) return emit(w, 0xCE, v, 4);
  return emit(w, 0xCF, v, 8);
}

int vdsp_wire_put_uint(vdsp_wire_writer *w, uint64_t value) {
  if (w == NULL) return VDSP_WIRE_E_INVALID_ARGUMENT;
  if (begin(w, VDSP_WIRE_INT) || emit_uint(w, value)) return w->error.code;
  return end(w);
}

int vdsp_wire_put_int(vdsp_wire_writer *w, int64_t value) {
  if (w == NULL) return VDSP_WIRE_E_INVALID_ARGUMENT;
  if (value >= 0) return vdsp_wire_put_uint(w, (uint64_t)value);
  if (begin(w, VDSP_WIRE_INT)) return w->error.code;
  uint64_t bits = (uint64_t)value;
  int rc;
  if (value >= -32) rc = emit(w, (uint8_t)bits, 0, 0);
  else if (value >= INT8_MIN) rc = emit(w, 0xD0, bits, 1);
  else if (value >= INT16_MIN) rc = emit(w, 0xD1, bits, 2);
  else if (value >= INT32_MIN) rc = emit(w, 0xD2, bits, 4);
  else rc = emit(w, 0xD3, bits, 8);
  return rc ? rc : end(w);
}

int vdsp_wire_put_double(vdsp_wire_writer *w, double value) {
  if (w == NULL) return VDSP_WIRE_E_INVALID_ARGUMENT;
  uint64_t bits;
  memcpy(&bits, &value, sizeof bits);
  if (begin(w, VDSP_WIRE_FLOAT) || emit(w, 0xCB, bits, 8)) return w->error.code;
  return end(w);
}

int vdsp_wire_put_float32(vdsp_wire_writer *w, float value) {
  if (w == NULL) return VDSP_WIRE_E_INVALID_ARGUMENT;
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  if (begin(w, VDSP_WIRE_FLOAT) || emit(w, 0xCA, bits, 4)) return w->error.code;
  return end(w);
}

/* A str or bin: header then bytes. */
static int put_bytes(vdsp_wire_writer *w, int str, const void *data, size_t len) {
  if (len > 0 && data == NULL) return wfail(w, VDSP_WIRE_E_INVALID_ARGUMENT, "NULL data of %zu bytes", len);
  if (len > VDSP_WIRE_MAX_BODY)
    return wfail(w, VDSP_WIRE_E_MESSAGE_TOO_LARGE, "a %s of %zu bytes exceeds %u", str ? "str" : "bin", len,
                 VDSP_WIRE_MAX_BODY);
  int rc;
  if (str && len < 32) rc = emit(w, (uint8_t)(0xA0 | len), 0, 0);
  else if (len <= 0xFF) rc = emit(w, str ? 0xD9 : 0xC4, len, 1);
  else if (len <= 0xFFFF) rc = emit(w, str ? 0xDA : 0xC5, len, 2);
  else rc = emit(w, str ? 0xDB : 0xC6, len, 4);
  if (rc || room(w, len)) return w->error.code;
  if (len > 0) memcpy(w->buf + w->len, data, len);
  w->len += len;
  return end(w);
}

int vdsp_wire_put_str(vdsp_wire_writer *w, const char *text, size_t len) {
  if (w == NULL) return VDSP_WIRE_E_INVALID_ARGUMENT;
  if (begin(w, VDSP_WIRE_STR)) return w->error.code;
  if (text != NULL) {
    size_t good = utf8_valid_prefix((const uint8_t *)text, len);
    if (good != len)
      return wfail(w, VDSP_WIRE_E_INVALID_ARGUMENT, "str is not UTF-8 (its byte %zu, 0x%02x)", good,
                   (uint8_t)text[good]);
  }
  return put_bytes(w, 1, text, len);
}

int vdsp_wire_put_cstr(vdsp_wire_writer *w, const char *text) {
  if (w == NULL) return VDSP_WIRE_E_INVALID_ARGUMENT;
  if (text == NULL) return begin(w, VDSP_WIRE_STR) ? w->error.code : wfail(w, VDSP_WIRE_E_INVALID_ARGUMENT, "NULL str");
  return vdsp_wire_put_str(w, text, strlen(text));
}

int vdsp_wire_put_bin(vdsp_wire_writer *w, const void *data, size_t len) {
  if (w == NULL) return VDSP_WIRE_E_INVALID_ARGUMENT;
  if (begin(w, VDSP_WIRE_BIN)) return w->error.code;
  return put_bytes(w, 0, data, len);
}

static int put_container(vdsp_wire_writer *w, int map, uint32_t n) {
  if (begin(w, map ? VDSP_WIRE_MAP : VDSP_WIRE_ARRAY)) return w->error.code;
  if (n > VDSP_WIRE_MAX_CONTAINER)
    return wfail(w, VDSP_WIRE_E_INVALID_ARGUMENT, "%s of %u elements exceeds the limit of %d", map ? "map" : "array",
                 n, VDSP_WIRE_MAX_CONTAINER);
  if (w->depth + 1 > VDSP_WIRE_MAX_DEPTH)
    return wfail(w, VDSP_WIRE_E_INVALID_ARGUMENT, "maps/arrays nested deeper than %d levels", VDSP_WIRE_MAX_DEPTH);
  int rc;
  if (n < 16) rc = emit(w, (uint8_t)((map ? 0x80 : 0x90) | n), 0, 0);
  else rc = emit(w, map ? 0xDE : 0xDC, n, 2);   /* n <= 4096 */
  if (rc) return rc;
  if (n == 0) return end(w);
  open_container *c = &w->stack[w->depth++];
  c->left = map ? 2 * n : n;
  c->is_map = (uint8_t)map;
  c->next = NULL;
  return 0;
}

int vdsp_wire_put_array(vdsp_wire_writer *w, uint32_t count) {
  return w == NULL ? VDSP_WIRE_E_INVALID_ARGUMENT : put_container(w, 0, count);
}

int vdsp_wire_put_map(vdsp_wire_writer *w, uint32_t pairs) {
  return w == NULL ? VDSP_WIRE_E_INVALID_ARGUMENT : put_container(w, 1, pairs);
}

/* One value of a tree, its items not included. */
static int put_one(vdsp_wire_writer *w, const vdsp_wire_value *v) {
  switch (v->kind) {
    case VDSP_WIRE_NIL: return vdsp_wire_put_nil(w);
    case VDSP_WIRE_BOOL: return vdsp_wire_put_bool(w, v->v.b);
    case VDSP_WIRE_INT: return vdsp_wire_put_int(w, v->v.i);
    case VDSP_WIRE_UINT: return vdsp_wire_put_uint(w, v->v.u);
    case VDSP_WIRE_FLOAT: return vdsp_wire_put_double(w, v->v.f);   /* as Python re-encodes a float32 */
    case VDSP_WIRE_STR: return vdsp_wire_put_str(w, v->v.s, v->len);
    case VDSP_WIRE_BIN: return vdsp_wire_put_bin(w, v->v.s, v->len);
    case VDSP_WIRE_ARRAY: return vdsp_wire_put_array(w, v->len);
    case VDSP_WIRE_MAP: return vdsp_wire_put_map(w, v->len);
    default:
      if (begin(w, VDSP_WIRE_NIL)) return w->error.code;
      return wfail(w, VDSP_WIRE_E_INVALID_ARGUMENT, "a value of unknown kind %d", (int)v->kind);
  }
}

int vdsp_wire_put_value(vdsp_wire_writer *w, const vdsp_wire_value *value) {
  if (w == NULL) return VDSP_WIRE_E_INVALID_ARGUMENT;
  if (value == NULL) return begin(w, VDSP_WIRE_NIL) ? w->error.code : wfail(w, VDSP_WIRE_E_INVALID_ARGUMENT, "NULL value");
  struct {
    const vdsp_wire_value *next;
    uint32_t left;
  } stack[VDSP_WIRE_MAX_DEPTH];
  int depth = 0;
  const vdsp_wire_value *v = value;
  for (;;) {
    if (put_one(w, v)) return w->error.code;
    uint32_t n = v->kind == VDSP_WIRE_MAP ? 2 * v->len : v->kind == VDSP_WIRE_ARRAY ? v->len : 0;
    if (n > 0) {
      /* put_container refused nesting past MAX_DEPTH, and this walk began at the writer's depth or deeper */
      if (depth == VDSP_WIRE_MAX_DEPTH)
        return wfail(w, VDSP_WIRE_E_INVALID_ARGUMENT, "maps/arrays nested deeper than %d levels", VDSP_WIRE_MAX_DEPTH);
      stack[depth].next = v->v.items;
      stack[depth].left = n;
      depth++;
    }
    while (depth > 0 && stack[depth - 1].left == 0) depth--;
    if (depth == 0) return 0;
    stack[depth - 1].left--;
    v = stack[depth - 1].next++;
  }
}

int vdsp_wire_writer_finish(vdsp_wire_writer *w, const uint8_t **data, size_t *len, vdsp_wire_error *err) {
  if (w == NULL) return VDSP_WIRE_E_INVALID_ARGUMENT;
  if (w->error.code != 0) {
    if (err != NULL) *err = w->error;
    return w->error.code;
  }
  if (!w->started) return fail(err, VDSP_WIRE_E_INVALID_ARGUMENT, "nothing was written: a body is a map");
  if (w->depth > 0)
    return fail(err, VDSP_WIRE_E_INVALID_ARGUMENT, "a container is not filled: %u more value(s) are due at level %d",
                w->stack[w->depth - 1].left, w->depth);
  if (w->root_kind != VDSP_WIRE_MAP)
    return fail(err, VDSP_WIRE_E_INVALID_ARGUMENT, "a body must be a map, got %s",
                kind_name((vdsp_wire_kind)w->root_kind));
  if (data != NULL) *data = w->buf;
  if (len != NULL) *len = w->len;
  return ok(err);
}

const uint8_t *vdsp_wire_writer_bytes(const vdsp_wire_writer *w, size_t *len) {
  if (w == NULL) {
    if (len != NULL) *len = 0;
    return NULL;
  }
  if (len != NULL) *len = w->len;
  return w->buf;
}
