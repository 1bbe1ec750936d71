// Gathers 16 floats at one byte offset of a 64 kB TCM tile filled from the input (tests/dsp/test_ivp.py).
#include <string.h>
#include <xtensa/tie/xt_ivpn.h>

#include "vdsp_kernel.h"
#include "vdsp_kernel_params.h"

VDSP_KERNEL(ivp_window_kernel) {
  hbDSPIvpWindowParam const *p = VDSP_PARAM(task, hbDSPIvpWindowParam);
  TileBuffer const in = task->inputs[0], out = task->outputs[0];
  uint32_t const bytes = in.data_size < VDSP_IVP_WINDOW_BYTES ? in.data_size : VDSP_IVP_WINDOW_BYTES;
  if (out.data_size < sizeof(xb_vecN_2xf32)) return -1;
  TileBuffer tile = vdsp_tcm_tile(0, VDSP_IVP_WINDOW_BYTES, "window");
  vdsp_idma_wait(vdsp_idma_copy(tile.tile_buffer, in.tile_buffer, bytes));
  xb_vecN_2x32Uv const offsets = (uint32_t)p->offset; /* every lane: the same offset */
  xb_vecN_2xf32 const v = IVP_GATHERDN_2XF32(IVP_GATHERAN_2XF32((float32_t const *)tile.tile_buffer, offsets));
  memcpy(out.tile_buffer, v.s, sizeof v.s);
  return 0;
}
