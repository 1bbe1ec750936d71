/*
 * capi_wire_check.c: what tests/sdk/test_capi_wire.py asks of the native wire layer
 * (arm_side/capi/native/vdsp_wire.c), in one of two builds:
 *
 * - a shared library the test loads with ctypes: wire_check_body, wire_check_header, ... one
 *   input at a time (hypothesis);
 * - with -DWIRE_CHECK_MAIN, a program that reads corpus files and prints one line per record,
 *   the same lines whatever the build (the test builds it with -fsanitize=address,undefined,
 *   which must be the first runtime of its process: not loadable into Python).
 *
 * Corpus file: records of [kind: 1 byte 'B' body or 'H' header][length: u32 little-endian][bytes].
 * Output line per record: "B <code>[ <hex of the re-encoded body>]" or
 * "H <code> <version> <command> <op> <priority> <core> <msg_id> <custom_id>"; then the lines of
 * wire_check_writer_cases.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vdsp_wire.h"

/* Decode `in` and write the tree again. 0: *out (malloc'd, wire_check_free) holds the bytes;
 * else the code, and the message in message[VDSP_WIRE_MESSAGE_MAX]. */
int wire_check_body(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len, char *message) {
  vdsp_wire_error err;
  vdsp_wire_body *body = NULL;
  *out = NULL;
  *out_len = 0;
  int rc = vdsp_wire_body_decode(in, len, &body, &err);
  if (rc == 0) {
    vdsp_wire_writer *w = vdsp_wire_writer_new();
    if (w == NULL) {
      vdsp_wire_body_free(body);
      return VDSP_WIRE_E_OUT_OF_MEMORY;
    }
    rc = vdsp_wire_put_value(w, vdsp_wire_body_root(body));
    const uint8_t *data = NULL;
    size_t n = 0;
    if (rc == 0) rc = vdsp_wire_writer_finish(w, &data, &n, &err);
    if (rc == 0 && (*out = (uint8_t *)malloc(n ? n : 1)) != NULL) {
      memcpy(*out, data, n);
      *out_len = n;
    }
    vdsp_wire_writer_free(w);
    vdsp_wire_body_free(body);
  }
  snprintf(message, VDSP_WIRE_MESSAGE_MAX, "%s", err.message);
  return rc;
}

/* The value of `key` in the decoded body's root map, re-encoded alone: 0 and *out, 1 if the key
 * is absent, else the decoder's code. */
int wire_check_lookup(const uint8_t *in, size_t len, const char *key, size_t key_len, uint8_t **out,
                      size_t *out_len) {
  vdsp_wire_body *body = NULL;
  *out = NULL;
  *out_len = 0;
  int rc = vdsp_wire_body_decode(in, len, &body, NULL);
  if (rc != 0) return rc;
  const vdsp_wire_value *v = vdsp_wire_map_get_n(vdsp_wire_body_root(body), key, key_len);
  if (v == NULL) {
    vdsp_wire_body_free(body);
    return 1;
  }
  vdsp_wire_writer *w = vdsp_wire_writer_new();
  rc = w == NULL ? VDSP_WIRE_E_OUT_OF_MEMORY : vdsp_wire_put_value(w, v);
  if (rc == 0) {
    size_t n;
    const uint8_t *data = vdsp_wire_writer_bytes(w, &n);
    if ((*out = (uint8_t *)malloc(n)) != NULL) memcpy(*out, data, n);
    *out_len = n;
  }
  vdsp_wire_writer_free(w);
  vdsp_wire_body_free(body);
  return rc;
}

void wire_check_free(void *p) { free(p); }

/* Parse a header: fields[0..6] = command, op, priority, core, msg_id, custom_id (as u64), version. */
int wire_check_header(const uint8_t *in, size_t len, uint64_t *fields, int *reply_version, char *message) {
  vdsp_wire_error err;
  vdsp_wire_header h;
  memset(&h, 0, sizeof h);
  int rc = vdsp_wire_header_parse(in, len, &h, &err);
  fields[0] = h.command;
  fields[1] = h.op;
  fields[2] = h.priority;
  fields[3] = h.core;
  fields[4] = h.msg_id;
  fields[5] = (uint64_t)h.custom_id;
  fields[6] = h.version;
  *reply_version = err.version;
  snprintf(message, VDSP_WIRE_MESSAGE_MAX, "%s", err.message);
  return rc;
}

void wire_check_header_pack(uint8_t command, uint16_t op, uint8_t priority, uint8_t core, uint64_t msg_id,
                            int64_t custom_id, uint8_t version, uint8_t *out) {
  vdsp_wire_header h = {version, command, op, priority, core, msg_id, custom_id};
  vdsp_wire_header_pack(&h, out);
}

int wire_check_frames(const size_t *sizes, size_t count, char *message) {
  vdsp_wire_error err;
  int rc = vdsp_wire_check_frames(sizes, count, &err);
  snprintf(message, VDSP_WIRE_MESSAGE_MAX, "%s", err.message);
  return rc;
}

/* The header's numbers, by the names of protocol/constants.py and protocol/errors.py. */
long long wire_check_constant(const char *name) {
  static const struct {
    const char *name;
    long long value;
  } table[] = {
      {"VERSION", VDSP_WIRE_VERSION}, {"EARLIER_VERSION", VDSP_WIRE_EARLIER_VERSION},
      {"HEADER_SIZE", VDSP_WIRE_HEADER_SIZE}, {"MAX_BODY", VDSP_WIRE_MAX_BODY},
      {"MAX_FRAMES", VDSP_WIRE_MAX_FRAMES}, {"MAX_RAW_FRAME", VDSP_WIRE_MAX_RAW_FRAME},
      {"MAX_MESSAGE", VDSP_WIRE_MAX_MESSAGE}, {"MAX_DEPTH", VDSP_WIRE_MAX_DEPTH},
      {"MAX_CONTAINER", VDSP_WIRE_MAX_CONTAINER},
      {"HELLO", VDSP_CMD_HELLO}, {"READY", VDSP_CMD_READY}, {"TASK", VDSP_CMD_TASK},
      {"RESULT", VDSP_CMD_RESULT}, {"ERROR", VDSP_CMD_ERROR}, {"CANCEL", VDSP_CMD_CANCEL},
      {"HEARTBEAT", VDSP_CMD_HEARTBEAT}, {"CONTROL", VDSP_CMD_CONTROL}, {"QUERY", VDSP_CMD_QUERY},
      {"EVENT", VDSP_CMD_EVENT}, {"DISCONNECT", VDSP_CMD_DISCONNECT},
      {"InvalidArgument", VDSP_WIRE_E_INVALID_ARGUMENT}, {"OutOfMemory", VDSP_WIRE_E_OUT_OF_MEMORY},
      {"ProtocolError", VDSP_WIRE_E_PROTOCOL_ERROR}, {"BadMagic", VDSP_WIRE_E_BAD_MAGIC},
      {"MessageTooLarge", VDSP_WIRE_E_MESSAGE_TOO_LARGE}, {"UnknownCommand", VDSP_WIRE_E_UNKNOWN_COMMAND},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (strcmp(table[i].name, name) == 0) return table[i].value;
  return 0;
}

const char *wire_check_code_name(int code) { return vdsp_wire_code_name(code); }

static void hex_line(FILE *f, const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) fprintf(f, "%02x", p[i]);
}

/* One writer case: its result as a line "W <name> <code> <hex or message>" into f. */
static void writer_line(FILE *f, const char *name, vdsp_wire_writer *w) {
  const uint8_t *data = NULL;
  size_t n = 0;
  vdsp_wire_error err;
  int rc = vdsp_wire_writer_finish(w, &data, &n, &err);
  fprintf(f, "W %s %d ", name, rc);
  if (rc == 0) hex_line(f, data, n);
  else fputs(err.message, f);
  fputc('\n', f);
  vdsp_wire_writer_reset(w);
}

/* Bodies a client builds (HELLO, TASK) and what the writer refuses, one line each into f.
 * tests/sdk/test_capi_wire.py knows the names and what each must give. */
static int writer_cases(FILE *f) {
  vdsp_wire_writer *w = vdsp_wire_writer_new();
  if (w == NULL) return -1;

  vdsp_wire_put_map(w, 5);   /* protocol.messages.hello(1, "client", pid=77, owner=12345, name="a", lock_fd=3) */
  vdsp_wire_put_cstr(w, "role"), vdsp_wire_put_cstr(w, "client");
  vdsp_wire_put_cstr(w, "pid"), vdsp_wire_put_int(w, 77);
  vdsp_wire_put_cstr(w, "owner"), vdsp_wire_put_int(w, 12345);
  vdsp_wire_put_cstr(w, "name"), vdsp_wire_put_cstr(w, "a");
  vdsp_wire_put_cstr(w, "lock_fd"), vdsp_wire_put_int(w, 3);
  writer_line(f, "hello", w);

  static const uint8_t blob[] = {0xff, 0x00};
  vdsp_wire_put_map(w, 4);
  vdsp_wire_put_cstr(w, "inputs"), vdsp_wire_put_array(w, 1);
  vdsp_wire_put_array(w, 3), vdsp_wire_put_uint(w, 4096), vdsp_wire_put_uint(w, 16), vdsp_wire_put_uint(w, 0);
  vdsp_wire_put_cstr(w, "outputs"), vdsp_wire_put_array(w, 1);
  vdsp_wire_put_array(w, 3), vdsp_wire_put_uint(w, 1ull << 40), vdsp_wire_put_uint(w, 70000),
      vdsp_wire_put_uint(w, 1);
  vdsp_wire_put_cstr(w, "params"), vdsp_wire_put_map(w, 9);
  vdsp_wire_put_cstr(w, "k"), vdsp_wire_put_int(w, 3);
  vdsp_wire_put_cstr(w, "s"), vdsp_wire_put_str(w, "\xc3\xa9t\xc3\xa9", 5);
  vdsp_wire_put_cstr(w, "b"), vdsp_wire_put_bin(w, blob, sizeof blob);
  vdsp_wire_put_cstr(w, "f"), vdsp_wire_put_double(w, 1.5);
  vdsp_wire_put_cstr(w, "neg"), vdsp_wire_put_int(w, -200);
  vdsp_wire_put_cstr(w, "min"), vdsp_wire_put_int(w, INT64_MIN);
  vdsp_wire_put_cstr(w, "big"), vdsp_wire_put_uint(w, UINT64_MAX);
  vdsp_wire_put_cstr(w, "none"), vdsp_wire_put_nil(w);
  vdsp_wire_put_cstr(w, "t"), vdsp_wire_put_bool(w, 1);
  vdsp_wire_put_cstr(w, "owner"), vdsp_wire_put_int(w, 7);
  writer_line(f, "task", w);

  vdsp_wire_put_map(w, 0);
  writer_line(f, "empty", w);

  vdsp_wire_put_map(w, 1), vdsp_wire_put_int(w, 1), vdsp_wire_put_int(w, 2);
  writer_line(f, "int_key", w);
  vdsp_wire_put_map(w, 1), vdsp_wire_put_bin(w, "a", 1), vdsp_wire_put_int(w, 2);
  writer_line(f, "bin_key", w);
  vdsp_wire_put_map(w, 1), vdsp_wire_put_cstr(w, "s"), vdsp_wire_put_str(w, "\xed\xa0\x80", 3);
  writer_line(f, "surrogate", w);
  vdsp_wire_put_map(w, 1), vdsp_wire_put_cstr(w, "a"), vdsp_wire_put_array(w, VDSP_WIRE_MAX_CONTAINER + 1);
  writer_line(f, "wide", w);
  vdsp_wire_put_map(w, 1), vdsp_wire_put_cstr(w, "a");
  for (int i = 2; i <= VDSP_WIRE_MAX_DEPTH; i++) vdsp_wire_put_array(w, 1);
  vdsp_wire_put_array(w, 0);   /* level 33 */
  writer_line(f, "deep", w);
  vdsp_wire_put_map(w, 1), vdsp_wire_put_cstr(w, "a");
  for (int i = 2; i < VDSP_WIRE_MAX_DEPTH; i++) vdsp_wire_put_array(w, 1);
  vdsp_wire_put_array(w, 0);   /* level 32 */
  writer_line(f, "deepest", w);
  vdsp_wire_put_map(w, 0), vdsp_wire_put_nil(w);
  writer_line(f, "after_root", w);
  vdsp_wire_put_map(w, 2), vdsp_wire_put_cstr(w, "a"), vdsp_wire_put_nil(w);
  writer_line(f, "unfilled", w);
  vdsp_wire_put_array(w, 0);
  writer_line(f, "not_a_map", w);
  writer_line(f, "nothing", w);
  uint8_t *big = (uint8_t *)calloc(1, VDSP_WIRE_MAX_BODY);
  if (big == NULL) {
    vdsp_wire_writer_free(w);
    return -1;
  }
  vdsp_wire_put_map(w, 1), vdsp_wire_put_cstr(w, "blob"), vdsp_wire_put_bin(w, big, VDSP_WIRE_MAX_BODY);
  writer_line(f, "too_large", w);
  vdsp_wire_put_map(w, 1), vdsp_wire_put_cstr(w, "blob"), vdsp_wire_put_bin(w, big, VDSP_WIRE_MAX_BODY - 12);
  writer_line(f, "largest", w);
  free(big);
  vdsp_wire_writer_free(w);
  return 0;
}

/* Calls with NULL where a pointer is due: each answers INVALID_ARGUMENT (1), none crashes. */
int wire_check_null_arguments(void) {
  int ok = 1;
  vdsp_wire_error err;
  ok &= vdsp_wire_put_nil(NULL) == VDSP_WIRE_E_INVALID_ARGUMENT;
  ok &= vdsp_wire_put_map(NULL, 1) == VDSP_WIRE_E_INVALID_ARGUMENT;
  ok &= vdsp_wire_put_value(NULL, NULL) == VDSP_WIRE_E_INVALID_ARGUMENT;
  ok &= vdsp_wire_writer_finish(NULL, NULL, NULL, &err) == VDSP_WIRE_E_INVALID_ARGUMENT;
  ok &= vdsp_wire_body_decode("\x80", 1, NULL, &err) == VDSP_WIRE_E_INVALID_ARGUMENT;
  ok &= vdsp_wire_check_frames(NULL, 3, &err) == VDSP_WIRE_E_INVALID_ARGUMENT;
  ok &= vdsp_wire_header_parse(NULL, 24, NULL, &err) == VDSP_WIRE_E_PROTOCOL_ERROR;
  ok &= vdsp_wire_map_get(NULL, "a") == NULL && vdsp_wire_get_str(NULL, NULL) == NULL;
  vdsp_wire_writer *w = vdsp_wire_writer_new();
  ok &= w != NULL && vdsp_wire_put_map(w, 1) == 0 && vdsp_wire_put_cstr(w, NULL) == VDSP_WIRE_E_INVALID_ARGUMENT;
  ok &= vdsp_wire_put_bin(w, NULL, 3) == VDSP_WIRE_E_INVALID_ARGUMENT;   /* the first error sticks */
  vdsp_wire_writer_free(w);
  vdsp_wire_writer_reset(NULL);
  vdsp_wire_writer_free(NULL);
  vdsp_wire_body_free(NULL);
  return ok;
}

/* The writer cases' lines into buf (NUL-terminated): 0, or -1 if they do not fit. */
int wire_check_writer_cases(char *buf, size_t cap) {
  FILE *f = tmpfile();
  if (f == NULL) return -1;
  int rc = writer_cases(f);
  long n = ftell(f);
  if (rc == 0 && n >= 0 && (size_t)n < cap) {
    rewind(f);
    buf[fread(buf, 1, (size_t)n, f)] = '\0';
  } else {
    rc = -1;
  }
  fclose(f);
  return rc;
}

#ifdef WIRE_CHECK_MAIN
static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    perror(path);
    return 1;
  }
  for (;;) {
    uint8_t head[5];
    size_t got = fread(head, 1, sizeof head, f);
    if (got == 0) break;
    if (got != sizeof head) {
      fprintf(stderr, "%s: a record's head is cut\n", path);
      fclose(f);
      return 1;
    }
    uint32_t len = (uint32_t)head[1] | (uint32_t)head[2] << 8 | (uint32_t)head[3] << 16 | (uint32_t)head[4] << 24;
    /* exactly len bytes, in a block of that size: ASan sees any read past it */
    uint8_t *data = (uint8_t *)malloc(len ? len : 1);
    if (data == NULL || fread(data, 1, len, f) != len) {
      fprintf(stderr, "%s: a record of %u bytes is cut\n", path, len);
      free(data);
      fclose(f);
      return 1;
    }
    char message[VDSP_WIRE_MESSAGE_MAX];
    if (head[0] == 'B') {
      uint8_t *out;
      size_t out_len;
      int rc = wire_check_body(len ? data : NULL, len, &out, &out_len, message);
      printf("B %d", rc);
      if (rc == 0) {
        putchar(' ');
        hex_line(stdout, out, out_len);
      }
      putchar('\n');
      free(out);
    } else {
      uint64_t fields[7];
      int version;
      int rc = wire_check_header(data, len, fields, &version, message);
      printf("H %d %d", rc, version);
      if (rc == 0)
        for (int i = 0; i < 7; i++) printf(" %" PRIu64, fields[i]);
      putchar('\n');
    }
    free(data);
  }
  fclose(f);
  return 0;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (run_file(argv[i]) != 0) return 1;
  if (!wire_check_null_arguments()) {
    fprintf(stderr, "a NULL argument was not refused\n");
    return 1;
  }
  return writer_cases(stdout) == 0 ? 0 : 1;
}
#endif
