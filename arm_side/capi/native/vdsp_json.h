/*
 * vdsp_json.h: JSON text to a msgpack body, for hbDSPRpcV2Json (what arm_side/capi/bridge.py
 * does with json.loads and the SDK's packing): objects, arrays, strings with every escape
 * (surrogate pairs joined; a lone surrogate becomes U+FFFD, as UTF-8 cannot hold it), integers
 * of 64 bits (signed, or unsigned above INT64_MAX), floats, true/false/null, and Python's NaN,
 * Infinity and -Infinity. Two passes over the text, no recursion: the first counts each
 * container's elements, the second writes them. Nesting past VDSP_WIRE_MAX_DEPTH and what the
 * wire refuses are errors.
 */
#ifndef VDSP_JSON_H_
#define VDSP_JSON_H_

#include <stddef.h>

#include "vdsp_wire.h"

#ifdef __cplusplus
extern "C" {
#endif

/* `len` bytes of JSON into `w` (empty before): 0; 1 when it is JSON but not an object; -1 when
 * it is not JSON. `message` says why (paramJson ...). */
int vdsp_json_to_msgpack(const char *text, size_t len, vdsp_wire_writer *w, char *message, size_t message_len);

#ifdef __cplusplus
}
#endif

#endif /* VDSP_JSON_H_ */
