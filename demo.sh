#!/usr/bin/env bash
# The main job: set up, start a local SoC (relay + vdsp0 + vdsp1 processes),
# run the samples against it, stop everything. Exit status: the samples'.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/venv.sh
export PATH="$PWD/.venv/bin:$PATH"
export VDSP_RUNTIME_DIR="${VDSP_RUNTIME_DIR:-$(mktemp -d /tmp/vdsp-demo.XXXXXX)}"
trap 'vdsp down >/dev/null' EXIT
vdsp firmware install-stock          # build the stock DSP image as vdsp0 and vdsp1
vdsp up -d
vdsp status
vdsp sample smoke
vdsp sample cv                       # the 25 CV operators; images in output/, output/cv_contact_sheet.png
vdsp sample nn                       # quantize, dequantize, softmax, layout, yolov3, pointpillar, centerpoint, mobilenet (hbDNN flow)
