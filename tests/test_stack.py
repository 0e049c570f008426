"""Smoke tests of the installed OpenMMLab stack (CPU only, a few seconds)."""
import importlib

import pytest
import torch


@pytest.mark.parametrize('name', [
    'torch', 'torchvision', 'mmengine', 'mmcv', 'mmdet', 'mmseg', 'mmpretrain',
    'timm', 'tlalign_mm'
])
def test_import(name):
    module = importlib.import_module(name)
    assert isinstance(getattr(module, '__version__', None), str)


def test_mmcv_has_compiled_ops():
    from mmcv.ops import RoIAlign, nms  # noqa: F401
    from mmcv.utils import ext_loader
    ext = ext_loader.load_ext('_ext', ['nms', 'roi_align_forward'])
    assert hasattr(ext, 'nms') and hasattr(ext, 'roi_align_forward')


def test_mmcv_nms_suppresses_overlapping_box():
    from mmcv.ops import nms
    boxes = torch.tensor([
        [0., 0., 10., 10.],  # kept: highest score
        [1., 1., 11., 11.],  # IoU 0.68 with box 0: suppressed
        [20., 20., 30., 30.],  # disjoint: kept
    ])
    scores = torch.tensor([0.9, 0.8, 0.7])
    dets, keep = nms(boxes, scores, iou_threshold=0.5)
    assert keep.tolist() == [0, 2]
    assert dets.shape == (2, 5)
    torch.testing.assert_close(dets[:, :4], boxes[[0, 2]])
    torch.testing.assert_close(dets[:, 4], scores[[0, 2]])
    # With a threshold above their IoU, both overlapping boxes survive.
    _, keep = nms(boxes, scores, iou_threshold=0.9)
    assert keep.tolist() == [0, 1, 2]


def test_mmcv_roi_align_on_cpu():
    from mmcv.ops import RoIAlign
    # feature value = column index, so bilinear sampling (aligned=False:
    # pixel i sits at coordinate i) returns the x of each sampling point.
    feat = torch.arange(8, dtype=torch.float32).repeat(1, 1, 8, 1)
    rois = torch.tensor([[0., 2., 2., 6., 6.]])  # (batch_idx, x1, y1, x2, y2)
    roi_align = RoIAlign(
        output_size=(2, 2), spatial_scale=1.0, sampling_ratio=1, aligned=False)
    out = roi_align(feat, rois)
    assert out.shape == (1, 1, 2, 2)
    # 2x2 bins over x in [2, 6]: bin centres at x = 3 and x = 5.
    expected = torch.tensor([[[[3., 5.], [3., 5.]]]])
    torch.testing.assert_close(out, expected)
    # Gradient flows back onto the feature map.
    feat.requires_grad_(True)
    roi_align(feat, rois).sum().backward()
    assert feat.grad is not None and feat.grad.abs().sum() > 0
