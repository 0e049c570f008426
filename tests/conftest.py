"""Test-wide set-up: the `e2e` and `cuda` markers, and registry-scope
isolation.

An in-process mmengine ``Runner`` (the downstream tests build mmseg and mmdet
runners) registers a ``DefaultScope`` that outlives it, and later registry
look-ups would search that library's registry. Each test starts and ends
with the scopes it found.
"""
import pytest
from mmengine.registry import DefaultScope


def pytest_configure(config):
    # registered here, next to the tests, so that no ini file (pytest.ini,
    # setup.cfg, tox.ini) is needed at the top level for one marker.
    config.addinivalue_line(
        'markers',
        'e2e: starts a subprocess or trains more than a few steps '
        '(the inner loop leaves them out: -m "not e2e")')
    config.addinivalue_line(
        'markers',
        'cuda: runs on a CUDA device, skipped without one (CI on a GPU '
        'runner: pytest -m cuda tests)')


@pytest.fixture(autouse=True)
def _restore_default_scope():
    before = set(DefaultScope._instance_dict)
    yield
    for name in set(DefaultScope._instance_dict) - before:
        del DefaultScope._instance_dict[name]
