"""In-process runs of the tools (tools/smoke.py, tools/train.py and
tools/test.py through ``tests.downstream.tiny.run_tool``) with two costs
that change no setting of any run taken out:

- mmengine formats a config's text with yapf each time a Runner logs or
  dumps it (4-5 s a time for a detection config, most of such a test's
  time): here the text is left unformatted, which is the same Python;
- mmengine reads mmpretrain's 85 metafiles at every parse of an
  ``mmpretrain::`` base: here once
  (:func:`tlalign_mm.testing.configs.read_package_metafiles_once`)."""
import mmengine.config.config as config_module
import pytest

from tlalign_mm.testing.configs import read_package_metafiles_once


@pytest.fixture(scope='module', autouse=True)
def _quick_runner_setup():
    patch = pytest.MonkeyPatch()
    patch.setattr(config_module, 'FormatCode',
                  lambda text, **kwargs: (text, False))
    read_package_metafiles_once()
    yield
    patch.undo()
