"""Test-wide isolation.

An in-process mmengine ``Runner`` (the downstream tests build mmseg and mmdet
runners) registers a ``DefaultScope`` that outlives it, and later registry
look-ups would search that library's registry. Each test starts and ends
with the scopes it found.
"""
import pytest
from mmengine.registry import DefaultScope


@pytest.fixture(autouse=True)
def _restore_default_scope():
    before = set(DefaultScope._instance_dict)
    yield
    for name in set(DefaultScope._instance_dict) - before:
        del DefaultScope._instance_dict[name]
