"""``vdsp sample nn mobilenet``: the J5 NN sample's model flow through the hbDNN API.

Like ``run_nn_test.sh`` it uses the DSP NN plugin (HB_DNN_PLUGIN_PATH, default: the stock
plugin directory) and HB_DNN_ENABLE_DSP (default 1 here): registers the plugin's Softmax
layer, loads ``mobilenetv1_224x224_nv12``, lists the models, gets the handle, prepares an NV12
input and the output tensor from the model's tensor properties, runs the inference, waits,
prints the TOP-5 class ids and releases everything.

The model's weights are seeded random numbers (no pretrained classifier ships in a package
this project can use), so **its class ids mean nothing**. The checks are what can be
checked: the same image through the other HB_DNN_ENABLE_DSP setting (DSP dispatch vs ARM
side) and through the whole model on onnxruntime alone must give the same TOP-5 ids and
probabilities within 1e-5; then the sample logs ``check result right``.
"""
from __future__ import annotations

import argparse
import logging
import os

import cv2
import numpy as np

from arm_side import CLEAN, INVALIDATE, Soc, dnn, nn
from vdsp_sim import dnn_models
from vdsp_board.config import clihelp
from vdsp_board.processes import proc
from vdsp_sim.samples.common import sample_soc, setup_logging

log = logging.getLogger("vdsp.sample.nn")
TOP_K = 5
RTOL, ATOL = 1e-5, 1e-7


def test_picture(height: int = 224, width: int = 224) -> np.ndarray:
    """A deterministic BGR picture (gradients, a disc, stripes) when no --image is given."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    img = np.zeros((height, width, 3), np.uint8)
    img[..., 0] = (255 * x / width).astype(np.uint8)
    img[..., 1] = (255 * y / height).astype(np.uint8)
    img[..., 2] = ((np.sin(x / 7) * np.cos(y / 11) + 1) * 127).astype(np.uint8)
    cv2.circle(img, (width // 2, height // 2), min(height, width) // 4, (30, 200, 240), -1)
    return img


def bgr_to_nv12(img: np.ndarray) -> np.ndarray:
    """H·3/2 rows of W bytes: the Y plane, then U and V interleaved (what the J5 sample makes)."""
    h, w = img.shape[:2]
    i420 = cv2.cvtColor(img, cv2.COLOR_BGR2YUV_I420)
    u = i420[h:h + h // 4].reshape(h // 2, w // 2)
    v = i420[h + h // 4:].reshape(h // 2, w // 2)
    return np.concatenate([i420[:h], np.stack([u, v], axis=-1).reshape(h // 2, w)])


def read_image(path: str | None, height: int, width: int) -> np.ndarray:
    if path is None:
        return test_picture(height, width)
    img = cv2.imread(path, cv2.IMREAD_COLOR)
    if img is None:
        raise SystemExit(f"vdsp sample nn mobilenet: cannot read image {path}")
    return cv2.resize(img, (width, height), interpolation=cv2.INTER_AREA)


def infer(soc: Soc, rt: dnn.Runtime, model_path, nv12: np.ndarray, say=log.info) -> tuple[np.ndarray, list]:
    """The J5 flow on one runtime; the output probabilities and where each layer ran."""
    pack = rt.initialize_from_files([str(model_path)])
    try:
        names = rt.model_name_list(pack)
        say("hbDNNGetModelNameList success")
        model = rt.model_handle(pack, names[0])
        say("hbDNNGetModelHandle success")
        say("read image to nv12 success")
        in_props, out_props = rt.input_tensor_properties(model, 0), rt.output_tensor_properties(model, 0)
        with soc.mem.alloc_cached(in_props.aligned_byte_size) as src, \
                soc.mem.alloc_cached(out_props.aligned_byte_size) as dst:
            in_props.planes(src.array())[...] = nv12
            src.flush(CLEAN)                    # the BPU reads DDR
            say("prepare nv12 tensor success")
            say("prepare tensor success")
            task = rt.infer([nn.Tensor(dst, out_props)], [nn.Tensor(src, in_props)], model, dnn.InferCtrlParam())
            say("hbDNNInfer success")
            try:
                rt.wait_task_done(task, 0)
                say("task done")
                dst.flush(INVALIDATE)           # the DSP (or the ARM layer) wrote DDR
                prob = nn.read(dst, out_props, invalidate=False).reshape(-1)
                layers = task.layers
            finally:
                rt.release_task(task)
        return prob, layers
    finally:
        rt.release(pack)


def top(prob: np.ndarray, k: int = TOP_K) -> np.ndarray:
    return np.argsort(-prob, kind="stable")[:k]


def agree(name: str, got: np.ndarray, ref: np.ndarray) -> bool:
    if list(top(got)) != list(top(ref)):
        log.error("check result WRONG: TOP %d ids %s, %s gives %s", TOP_K, list(top(got)), name, list(top(ref)))
        return False
    if not np.allclose(got, ref, rtol=RTOL, atol=ATOL):
        i = int(np.argmax(np.abs(got - ref)))
        log.error("check result WRONG: class %d probability %.9g, %s gives %.9g", i, got[i], name, ref[i])
        return False
    log.info("same TOP %d ids and probabilities (rtol %g) as %s", TOP_K, RTOL, name)
    return True


def run(soc: Soc, args) -> bool:
    # the sample's defaults for the runtime's variables, which the environment overrides
    environ = {"HB_DNN_PLUGIN_PATH": str(dnn.STOCK_PLUGIN_DIR), "HB_DNN_ENABLE_DSP": "1", **os.environ}
    model_path, whole_path = dnn_models.ensure(dnn_models.MOBILENET)
    log.warning("the model's weights are seeded random numbers: its class ids mean nothing; the checks compare "
                "DSP dispatch, the ARM side and onnxruntime alone (docs/dnn.md)")
    with dnn.Runtime(soc, environ=environ) as rt:
        dsp = rt.config.enable_dsp
        log.info("HB_DNN_ENABLE_DSP=%d: Quantize, Dequantize and the plugin's Softmax run on %s", dsp,
                 "vdsp0/vdsp1" if dsp else "the ARM side")
        rt.register_layer_creator("Softmax", rt.plugin_creators()["Softmax"])
        log.info("hbDNNRegisterLayerCreator success")
        img = read_image(args.image, 224, 224)
        nv12 = bgr_to_nv12(img)
        prob, layers = infer(soc, rt, model_path, nv12)
    log.info("task post process success")
    for rank, idx in enumerate(top(prob)):
        log.info("TOP %d result id: %d", rank, idx)
    log.info("layers: %s", ", ".join(f"{r.name} ({r.type}) on {r.where}" for r in layers))
    # The checks: the other dispatch setting, and the whole model on onnxruntime alone.
    with dnn.Runtime(soc, enable_dsp=not dsp, log_level=0, environ=environ) as other:
        other.register_layer_creator("Softmax", other.plugin_creators()["Softmax"])
        other_prob, _ = infer(soc, other, model_path, nv12, say=log.debug)
    from arm_side.dnn.ortload import onnxruntime as ort
    whole = ort.InferenceSession(str(whole_path), providers=["CPUExecutionProvider"])
    ref = whole.run(None, {"data": nv12[None]})[0].reshape(-1)
    ok = agree("the ARM side" if dsp else "DSP dispatch", prob, other_prob) and \
        agree("the whole model on onnxruntime alone", prob, ref)
    if ok:
        log.info("check result right")
    return ok


def main(argv: list[str] | None = None) -> int:
    argv = list(argv or ["mobilenet"])
    ap = argparse.ArgumentParser(prog="vdsp sample nn mobilenet", description=__doc__.split("\n\n")[0],
                                 epilog="HB_DNN_ENABLE_DSP=0 runs the non-BPU layers on the ARM side; "
                                        "HB_DNN_LOG_LEVEL, HB_DNN_PLUGIN_PATH and HB_DNN_PROFILER_LOG_PATH "
                                        "work as docs/dnn.md says.")
    ap.add_argument("--image", help="an image file (resized to 224x224); default: a generated test picture")
    args = clihelp.finish(ap).parse_args(argv[1:])
    setup_logging()
    proc.exit_on_sigterm()
    log.info("mobilenet begin")
    with sample_soc() as soc:
        ok = run(soc, args)
    log.info("mobilenet %s", "finish" if ok else "FAILED")
    return 0 if ok else 1
