"""Yolov3DetectionOutput (fused) and its four-operator chain, in-process as the firmware runs
them, against the plain-loop reference of arm_side.nn.reference (no SoC needed)."""
from __future__ import annotations

import numpy as np
import pytest

from protocol import errors
from arm_side import nn
from arm_side.nn import reference as ref
from tests.dsp.test_nn_ops import buffer, run

TOL = 2e-5  # float32 decode on the DSP vs float64 loops in the reference


def make_params(**kw) -> nn.YoloParams:
    base = dict(class_num=4, anchor_num=3, map_w=(4, 5), map_h=(4, 3), net_w=160, net_h=96,
                biases=[[[10, 14], [23, 27], [37, 58]], [[81, 82], [135, 169], [344, 319]]],
                max_box_num=50, confidence_thresh=0.5, nms_thresh=0.45)
    base.update(kw)
    return nn.YoloParams(**base)


def make_maps(p: nn.YoloParams, batch: int, seed: int = 0, obj_mean: float = 0.0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    maps = []
    for w, h in zip(p.map_w, p.map_h):
        x = rng.standard_normal((batch, p.anchor_num, 5 + p.class_num, w * h)).astype(np.float32)
        x[:, :, 2:4] *= 0.5
        x[:, :, 4] += obj_mean
        x[:, :, 5:] *= 2.5
        maps.append(x)
    return maps


def _params(p: nn.YoloParams, batch: int) -> dict:
    return {**p.geometry(), "max_box_num": p.max_box_num, "confidence_thresh": p.confidence_thresh,
            "nms_thresh": p.nms_thresh, "batch": batch}


def fused(p: nn.YoloParams, maps: list, batch: int) -> np.ndarray:
    out = buffer(p.output_bytes(batch))
    run(nn.ids.YOLOV3_DETECTION_OUTPUT, [m.view(np.uint8).reshape(-1) for m in maps], [out], _params(p, batch))
    return out.view(np.float32)


def chain(p: nn.YoloParams, maps: list, batch: int, capacity: int = 4096) -> np.ndarray:
    dec = buffer(batch * p.boxes * (5 + p.class_num) * 4)
    cand, kept = buffer(batch * (64 + 7 * capacity) * 4), buffer(batch * (64 + 7 * capacity) * 4)
    out = buffer(p.output_bytes(batch))
    run(nn.ids.YOLO_DECODE, [m.view(np.uint8).reshape(-1) for m in maps], [dec], {**p.geometry(), "batch": batch})
    run(nn.ids.YOLO_FILTER, [dec], [cand], {"class_num": p.class_num, "boxes": p.boxes, "capacity": capacity,
                                            "confidence_thresh": p.confidence_thresh, "batch": batch})
    run(nn.ids.YOLO_NMS, [cand], [kept], {"nms_thresh": p.nms_thresh, "capacity": capacity, "batch": batch})
    run(nn.ids.YOLO_TOPK, [kept], [out], {"max_box_num": p.max_box_num, "capacity": capacity, "batch": batch})
    return out.view(np.float32)


def check_against_reference(p, maps, batch, out) -> list[int]:
    expect = ref.yolov3_detection_output(maps, p, batch)
    got = nn.parse_output(out, batch, p.max_box_num)
    counts = []
    for b in range(batch):
        assert got[b].shape == expect[b].shape, f"batch {b}"
        np.testing.assert_array_equal(got[b][:, :2], expect[b][:, :2])    # batch, class
        np.testing.assert_allclose(got[b][:, 2:], expect[b][:, 2:], atol=TOL)
        block = out[b * (64 + 7 * p.max_box_num):(b + 1) * (64 + 7 * p.max_box_num)]
        assert not block[1:64].any() and not block[64 + 7 * len(got[b]):].any()   # unused space zeroed
        counts.append(len(got[b]))
    return counts


def test_fused_matches_reference_non_square_maps_batch_3():
    p = make_params()
    maps = make_maps(p, 3)
    counts = check_against_reference(p, maps, 3, fused(p, maps, 3))
    assert min(counts) > 3   # the data gives real detections to compare


def test_output_ordered_by_class_then_descending_score():
    p = make_params()
    maps = make_maps(p, 1, seed=4)
    rec = nn.parse_output(fused(p, maps, 1), 1, p.max_box_num)[0]
    key = list(zip(rec[:, 1], -rec[:, 2]))
    assert key == sorted(key) and len(rec) > 5


def test_zero_boxes():
    p = make_params()
    maps = make_maps(p, 2, obj_mean=-20.0)
    out = fused(p, maps, 2)
    assert check_against_reference(p, maps, 2, out) == [0, 0]
    assert not out.any()


def test_more_boxes_than_max_box_num_keeps_the_best():
    p = make_params(max_box_num=5, nms_thresh=0.9)
    maps = make_maps(p, 2, seed=2, obj_mean=2.0)
    assert check_against_reference(p, maps, 2, fused(p, maps, 2)) == [5, 5]
    many = make_params(max_box_num=500, nms_thresh=0.9)
    all_boxes = ref.yolov3_detection_output(maps, many, 2)
    assert len(all_boxes[0]) > 5   # there really were more


def test_one_class_and_seven_maps():
    p = make_params(class_num=1, map_w=(2, 3, 1, 4, 2, 1, 3), map_h=(2, 1, 1, 2, 3, 2, 3),
                    biases=np.random.default_rng(1).uniform(5, 60, 7 * 3 * 2))
    maps = make_maps(p, 2, seed=6)
    assert sum(check_against_reference(p, maps, 2, fused(p, maps, 2))) > 0


@pytest.mark.parametrize("seed,obj_mean,max_box", [(0, 0.0, 50), (2, 2.0, 5), (5, -20.0, 50), (7, 1.0, 200)])
def test_chain_equals_fused_exactly(seed, obj_mean, max_box):
    p = make_params(max_box_num=max_box, class_num=6)
    maps = make_maps(p, 3, seed=seed, obj_mean=obj_mean)
    a, b = fused(p, maps, 3), chain(p, maps, 3)
    np.testing.assert_array_equal(a, b)


def test_batch_offset_labels_records():
    p = make_params()
    maps = make_maps(p, 1, seed=3)
    out = buffer(p.output_bytes(1))
    run(nn.ids.YOLOV3_DETECTION_OUTPUT, [m.view(np.uint8).reshape(-1) for m in maps], [out],
        {**_params(p, 1), "batch_offset": 5})
    rec = nn.parse_output(out.view(np.float32), 1, p.max_box_num)[0]
    assert len(rec) and (rec[:, 0] == 5).all()


def test_bad_parameters_are_invalid_argument():
    p = make_params()
    maps = [m.view(np.uint8).reshape(-1) for m in make_maps(p, 1)]
    out = buffer(p.output_bytes(1))
    good = _params(p, 1)
    cases = [({"map_w": [4]}, "map_w"), ({"biases": [1.0] * 6}, "biases"), ({"batch": 2}, "inputs[0]"),
             ({"max_box_num": 51}, "outputs[0]"), ({"confidence_thresh": 1.5}, "confidence_thresh"),
             ({"biases": [0.0] * 12}, "biases"), ({"class_num": 0}, "class_num")]
    for change, word in cases:
        with pytest.raises(errors.InvalidArgument) as info:
            run(nn.ids.YOLOV3_DETECTION_OUTPUT, maps, [out], {**good, **change})
        assert word in str(info.value), (change, str(info.value))
    with pytest.raises(errors.InvalidArgument, match="capacity"):
        chain(make_params(), make_maps(p, 1, obj_mean=3.0), 1, capacity=2)
