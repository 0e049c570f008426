"""The scripts in tools/analysis/, run in-process on one batch of 8 digits:
each returns its rows and writes them; counts below 1 and empty datasets
stop with a message instead of printing RMSE 0.0 or empty tables."""
import csv
import json
import re

import numpy as np
import pytest

from .conftest import FEW, NO_SERIALIZE, VIT_CONFIG

TOOLS = ['label_rmse', 'label_maps', 'token_presence', 'mixing_ratio']


def test_label_rmse_over_two_models(setups, run_tool, tmp_path):
    rows = run_tool('label_rmse', [*setups['vit'].paths, *setups[
        'swin'].paths, '--names', 'vit', 'swin', '--work-dir', tmp_path, *FEW])
    assert [(r['model'], r['num_images']) for r in rows] == [
        ('vit', 8), ('swin', 8)]
    assert all(r['rmse'] > 1e-3 for r in rows)  # CutMix: the labels move
    with open(tmp_path / 'label_rmse.csv') as f:
        assert [float(r['rmse']) for r in csv.DictReader(f)] == \
            pytest.approx([r['rmse'] for r in rows])
    assert (tmp_path / 'label_rmse.png').stat().st_size > 1000


def test_label_maps_writes_the_grid(setups, run_tool, tmp_path):
    rows = run_tool('label_maps', [
        *setups['vit'].paths, '--work-dir', tmp_path, '--out', 'maps.png',
        '--mix', 'resizemix', '--num-images', 4, '--batch-size', 8,
        '--cfg-options', NO_SERIALIZE])
    assert len(rows) == 4 and (tmp_path / 'maps.png').stat().st_size > 1000
    saved = json.loads((tmp_path / 'maps.json').read_text())
    assert saved['mix'] == 'ResizeMix'
    assert saved['rows'][0]['cutmix_label'] == rows[0]['cutmix_label']
    assert len(saved['rows'][0]['aligned_map']) == 4  # 4x4 patch tokens


def test_token_presence_writes_the_distribution(setups, run_tool, tmp_path):
    rows = run_tool('token_presence', [*setups['vit'].paths, '--work-dir',
                                       tmp_path, *FEW])
    # the demo: 16x16 px, patch 4; 16 patch tokens and the class token
    # average 1 (the presences themselves: test_token_presence.py)
    assert [(r['block'], r['num_tokens']) for r in rows] == [
        (b, 17) for b in (1, 2, 3, 4)]
    assert [(16 * r['mean'] + r['class_token_mean']) / 17 for r in rows] == \
        pytest.approx([1.0] * 4, abs=1e-5)
    values = np.load(tmp_path / 'presence.npz')['block1_patches']
    assert values.shape == (8, 16) and values.std() > 1e-3
    assert values.mean() == pytest.approx(rows[0]['mean'], rel=1e-5)


def test_mixing_ratio_writes_the_series(setups, run_tool, tmp_path):
    rows = run_tool('mixing_ratio',
                    [*setups['vit'].paths, '--work-dir', tmp_path, *FEW])
    assert [r['block'] for r in rows] == [1, 2, 3, 4]
    # CutMix and TransMix do not depend on the block; TL-Align does.
    assert len({r['cutmix'] for r in rows}) == len(
        {r['transmix'] for r in rows}) == 1
    assert len({round(r['tlalign'], 6) for r in rows}) > 1
    assert all(r['tlalign_gap'] >= abs(r['tlalign'] - r['similarity']) - 1e-6
               for r in rows)
    with open(tmp_path / 'mixing_ratio_images.csv') as f:
        assert len(list(csv.DictReader(f))) == 8 * 4


@pytest.mark.parametrize('tool', TOOLS)
def test_counts_below_one_and_empty_datasets_are_refused(run_tool, capsys,
                                                         tmp_path, tool):
    for option in ('--num-images', '--max-batches', '--batch-size'):
        with pytest.raises(SystemExit, match='^2$'):  # argparse's usage
            run_tool(tool, [VIT_CONFIG, 'none', option, '0'])
        assert f'argument {option}: must be at least 1, got 0' in \
            capsys.readouterr().err
    with pytest.raises(SystemExit,
                       match=f'(?s){re.escape(VIT_CONFIG)}.*has no images'):
        run_tool(tool, [VIT_CONFIG, 'none', '--work-dir', tmp_path,
                        '--cfg-options', NO_SERIALIZE,
                        'test_dataloader.dataset.indices=0'])
    assert not any(tmp_path.iterdir())  # no output file with zeros


@pytest.mark.parametrize('tool', TOOLS)
def test_a_config_the_model_refuses_is_one_line(run_tool, tmp_path, tool):
    """It was a traceback (issue 41); --debug keeps it."""
    argv = [VIT_CONFIG, 'none', '--work-dir', tmp_path, '--cfg-options',
            'model.align_cfg.align_layer=last']
    with pytest.raises(SystemExit, match=(
            f"^error: {re.escape(VIT_CONFIG)}: model: Unknown TL-Align "
            r"options \['align_layer'\]")):
        run_tool(tool, argv)
    with pytest.raises(ValueError, match='Unknown TL-Align options'):
        run_tool(tool, [*argv, '--debug'])
