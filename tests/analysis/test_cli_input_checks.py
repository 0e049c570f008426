"""The analysis tools refuse to analyse nothing: counts below 1 and empty
datasets stop with a message instead of printing RMSE 0.0 or empty tables.
"""
import pytest

from .conftest import NO_SERIALIZE, VIT_CONFIG

TOOLS = ['label_rmse', 'label_maps', 'token_presence', 'mixing_ratio']


def _argv(tool, *extra):
    """label_rmse takes CONFIG CKPT pairs, the others CONFIG [CKPT]."""
    return [VIT_CONFIG, 'none', *extra]


@pytest.mark.parametrize('option', ['--num-images', '--max-batches',
                                    '--batch-size'])
@pytest.mark.parametrize('value', ['0', '-3'])
@pytest.mark.parametrize('tool', TOOLS)
def test_counts_below_one_are_refused(run_tool, capsys, tool, option, value):
    with pytest.raises(SystemExit) as exit_info:
        run_tool(tool, _argv(tool, option, value))
    assert exit_info.value.code == 2  # argparse's usage error
    err = capsys.readouterr().err
    assert f'argument {option}: must be at least 1, got {value}' in err


@pytest.mark.parametrize('tool', TOOLS)
def test_an_empty_dataset_is_refused(run_tool, tmp_path, tool):
    with pytest.raises(SystemExit) as exit_info:
        run_tool(tool, _argv(tool, '--work-dir', tmp_path, '--cfg-options',
                             NO_SERIALIZE,
                             'test_dataloader.dataset.indices=0'))
    message = str(exit_info.value.code)
    assert 'has no images' in message and VIT_CONFIG in message
    assert not any(tmp_path.iterdir())  # no output file with zeros
