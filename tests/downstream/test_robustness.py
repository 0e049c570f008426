"""Robustness datasets (ImageNet-A/R/V2/C labels are ImageNet indices),
metrics (ImageNet-A/R subset accuracy, ImageNet-C mCE) and the robustness
test configs, run in-process on tiny data."""
import os
from importlib import resources

import numpy as np
import pytest
import timm.data
import torch

import tlalign_mm.downstream  # noqa: F401
from tlalign_mm.datasets import (
    CORRUPTIONS,
    ImageNetA,
    ImageNetC,
    ImageNetR,
    ImageNetV2,
    imagenet_synsets,
    subset_synsets,
)
from tlalign_mm.datasets.synthetic import write_class_folders, write_imagenet_c
from tlalign_mm.downstream.metrics import (
    ALEXNET_ERR,
    CorruptionError,
    SubsetAccuracy,
    mce,
)

from .tiny import config_path, tiny_config


def sample(score, gt, **meta):
    return dict(pred_score=torch.as_tensor(score, dtype=torch.float),
                gt_label=torch.tensor([gt]), **meta)


def test_subset_accuracy_restricts_the_prediction():
    metric = SubsetAccuracy(topk=(1, 2), subset_indices=[3, 5, 7])
    a = torch.zeros(10)
    a[0], a[5], a[7] = 9., 2., 1.  # global arg-max 0 is outside the subset
    b = torch.zeros(10)
    b[3], b[7], b[5] = 3., 2., 1.
    metric.process(None, [sample(a, 5), sample(b, 5)])
    assert metric.compute_metrics(metric.results) == {'top1': 50.0,
                                                      'top2': 50.0}
    metric = SubsetAccuracy()  # the subset from the dataset's metainfo
    metric.dataset_meta = {'subset_indices': [1, 2]}
    metric.process(None, [sample([5., 0., 1.], 2)])
    assert metric.compute_metrics(metric.results) == {'top1': 100.0}


def test_corruption_error_is_the_alexnet_normalised_mean():
    # AlexNet itself scores 100
    assert mce({(c, s): ALEXNET_ERR[c] for c in CORRUPTIONS
                for s in range(1, 6)})['mCE'] == pytest.approx(1.0)
    samples = []
    for i, c in enumerate(CORRUPTIONS):
        for s in range(1, 6):  # 4 images each; the first i % 5 wrong
            samples += [sample([0., 1.] if k < i % 5 else [1., 0.], 0,
                               corruption=c, severity=s) for k in range(4)]
    metric = CorruptionError()
    metric.process(None, samples)
    out = metric.compute_metrics(metric.results)
    ce = {c: (i % 5) / 4 / ALEXNET_ERR[c] for i, c in enumerate(CORRUPTIONS)}
    assert out['mCE'] == pytest.approx(100 * np.mean(list(ce.values())))
    assert out['error/fog'] == pytest.approx(100 * (9 % 5) / 4)
    assert out['CE/fog'] == pytest.approx(100 * ce['fog'])
    assert out['top1'] == pytest.approx(100 * (1 - np.mean(
        [(i % 5) / 4 for i in range(15)])))
    # top1 counts the images of the corruptions measured only: the second
    # has 1 of 4 wrong
    one = CorruptionError(corruptions=CORRUPTIONS[1:2])
    one.process(None, samples)
    assert one.compute_metrics(one.results)['top1'] == pytest.approx(75.0)
    metric = CorruptionError()
    metric.process(None, samples[:-4])
    with pytest.raises(ValueError, match='jpeg_compression/5'):
        metric.compute_metrics(metric.results)
    with pytest.raises(KeyError, match='meta_keys'):
        CorruptionError().process(None, [sample([1.], 0)])


def test_imagenet_a_r_v2_labels_are_imagenet_indices(tmp_path):
    """A and R: the folders' synsets' ImageNet indices (the 200 of each
    are timm's), 1000 classes and the subset's indices in the metainfo;
    V2: the folder numbers."""
    synsets = imagenet_synsets()
    index = {s: i for i, s in enumerate(synsets)}
    for cls, subset in ((ImageNetA, 'imagenet_a'), (ImageNetR, 'imagenet_r')):
        text = resources.files(timm.data).joinpath(
            '_info', f'{subset}_indices.txt').read_text()
        assert [synsets[int(i)] for i in text.split()] == list(
            subset_synsets(subset))
        wnids, root = list(subset_synsets(subset))[:3], tmp_path / subset
        write_class_folders(str(root), wnids, per_class=2)
        dataset = cls(data_root=str(root))
        assert [dataset.get_data_info(i)['gt_label'] for i in range(6)] == \
            [index[w] for w in wnids for _ in range(2)]
        assert len(dataset.metainfo['classes']) == 1000
        assert dataset.metainfo['subset_indices'] == sorted(
            index[w] for w in subset_synsets(subset))
        os.makedirs(root / 'n99999999')
        with pytest.raises(FileNotFoundError, match='n99999999'):
            cls(data_root=str(root))
    write_class_folders(str(tmp_path / 'v2'), ['2', '10', '999'], ext='.jpeg')
    dataset = ImageNetV2(data_root=str(tmp_path / 'v2'))
    assert [dataset.get_data_info(i)['gt_label'] for i in range(3)] == [
        2, 10, 999]


def test_imagenet_c(tmp_path):
    count = write_imagenet_c(str(tmp_path), CORRUPTIONS, range(1, 6),
                             imagenet_synsets()[:2])
    dataset = ImageNetC(data_root=str(tmp_path))
    assert len(dataset) == count == 15 * 5 * 2
    info = dataset.get_data_info(len(dataset) - 1)
    assert (info['corruption'], info['severity'], info['gt_label']) == \
        ('jpeg_compression', 5, 1)
    assert len(ImageNetC(data_root=str(tmp_path), corruptions=['fog'],
                         severities=[3])) == 2
    os.rename(tmp_path / 'fog' / '3', tmp_path / 'fog' / 'x')
    with pytest.raises(FileNotFoundError, match='fog/3'):
        ImageNetC(data_root=str(tmp_path))


def tiny_test(config, data_root, tmp_path, scores):
    """The metrics of ``configs/robustness/<config>``'s test on
    ``data_root``, with the tiny arch of its family scoring every image
    ``scores`` (1000,): the head's last linear layer weightless, its bias
    the scores."""
    from mmengine.runner import Runner
    cfg = tiny_config(config_path('robustness', config), data_root, 7,
                      str(tmp_path / 'work'))
    cfg.test_dataloader.batch_size = 16
    runner = Runner.from_cfg(cfg)
    fc = [m for m in runner.model.head.modules()
          if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():
        fc.weight.zero_()
        fc.bias.copy_(scores)
    return runner.test()


@pytest.mark.e2e  # a Runner over 150 images
def test_imagenet_c_config_reports_the_mce_of_its_errors(tmp_path):
    """Two classes in every corruption and severity, a model that always
    says the first: every cell's error is 1/2, so each CE is 100 * 0.5 /
    AlexNet's error and the mCE their mean (a label off the ImageNet index,
    or a cell left out, changes it)."""
    synsets = imagenet_synsets()[3:5]
    write_imagenet_c(str(tmp_path / 'c'), CORRUPTIONS, range(1, 6), synsets)
    metrics = tiny_test('deit-small_in1k_test-imagenet-c.py',
                        str(tmp_path / 'c'), tmp_path, torch.eye(1000)[3])
    ce = {c: 100 * 0.5 / ALEXNET_ERR[c] for c in CORRUPTIONS}
    for c in CORRUPTIONS:
        assert metrics[f'imagenet_c/CE/{c}'] == pytest.approx(ce[c]), c
    assert metrics['imagenet_c/mCE'] == pytest.approx(np.mean(list(
        ce.values())))


@pytest.mark.e2e  # a Runner each
@pytest.mark.parametrize('name', ['imagenet-a', 'imagenet-v2'])
def test_a_and_v2_configs_score_imagenet_indices(tmp_path, name):
    """Two class folders and a model whose scores rank the second folder's
    class (its ImageNet index) first, for ImageNet-A after a class outside
    its 200 (the accuracy takes the arg-max over those 200 only): one of
    the two images is right."""
    scores = torch.zeros(1000)
    if name == 'imagenet-a':
        folders = subset_synsets('imagenet_a')[-2:]
        label = imagenet_synsets().index(folders[1])
        scores[max(i for i, f in enumerate(imagenet_synsets())
                   if f not in subset_synsets('imagenet_a'))] = 2.
        config, key = 'swin-tiny_in1k_test-imagenet-a.py', 'subset_accuracy'
    else:  # ImageNet-V2's folders are the class indices
        folders, label = ['0', '17'], 17
        config, key = 'deit-tiny_in1k_test-imagenet-v2.py', 'accuracy'
    scores[label] = 1.
    write_class_folders(str(tmp_path / 'd'), folders)
    assert tiny_test(config, str(tmp_path / 'd'), tmp_path, scores)[
        f'{key}/top1'] == 50.
