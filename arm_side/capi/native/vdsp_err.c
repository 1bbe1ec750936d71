/* vdsp_err.c: see vdsp_err.h. */
#include "vdsp_err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int vdsp_fail(vdsp_err *err, int code, const char *fmt, ...) {
  if (err != NULL) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    err->code = code;
    err->late = 0;
  }
  return code;
}

int vdsp_fail_wire(vdsp_err *err, const vdsp_wire_error *wire) {
  return vdsp_fail(err, wire->code, "%s", wire->message);
}
