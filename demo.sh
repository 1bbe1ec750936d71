#!/usr/bin/env bash
# The main job: set up, start a local SoC (relay + vdsp0 + vdsp1 processes),
# run the samples against it, stop everything. Exit status: the samples'.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/venv.sh      # PYTHON=python3.13 ./demo.sh: on that Python, in its own venv
export PATH="$PWD/$(bash scripts/venv.sh --dir)/bin:$PATH"
# A runtime directory of its own (the SoC's sockets, logs and keys), removed at the end unless a
# step failed: then it stays, and the last line says where its logs are.
made_rt=""
if [ -z "${VDSP_RUNTIME_DIR:-}" ]; then
  VDSP_RUNTIME_DIR=$(mktemp -d "${TMPDIR:-/tmp}/vdsp-demo.XXXXXX")
  made_rt=1
fi
export VDSP_RUNTIME_DIR
finish() {
  local status=$?
  vdsp down >/dev/null || status=1
  if [ -n "$made_rt" ]; then
    if [ "$status" = 0 ]; then
      rm -rf "$VDSP_RUNTIME_DIR"
    else
      echo "demo.sh: failed (exit status $status); the SoC's logs are in $VDSP_RUNTIME_DIR/log" >&2
    fi
  fi
  exit "$status"
}
trap finish EXIT
vdsp firmware install-stock          # build the stock DSP image as vdsp0 and vdsp1
vdsp up -d
vdsp status
vdsp sample smoke
vdsp sample cv                       # the J5 CV sample's operators; images in output/, output/cv_contact_sheet.png
vdsp sample nn                       # quantize, dequantize, softmax, layout, yolov3, pointpillar, centerpoint, mobilenet (hbDNN flow)
