"""setup.py: a built wheel holds what mim reads (``tlalign_mm/.mim/``: the
model index and every config its metafiles name), and the sdist it is built
from lists them (MANIFEST.in). Both run setuptools in-process."""
import os.path as osp
import runpy

import setuptools
import yaml
from setuptools.dist import Distribution

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


def test_wheel_and_sdist_hold_the_mim_files(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    kwargs = {}
    monkeypatch.setattr(setuptools, 'setup', lambda **kw: kwargs.update(kw))
    runpy.run_path(osp.join(ROOT, 'setup.py'))
    dist = Distribution(dict(kwargs, script_name='setup.py'))
    build = dist.get_command_obj('build_py')
    build.build_lib = str(tmp_path / 'lib')
    egg_info = dist.get_command_obj('egg_info')
    egg_info.egg_base = str(tmp_path)
    for command in (build, egg_info):
        command.ensure_finalized()
        command.run()
    mim = tmp_path / 'lib' / 'tlalign_mm' / '.mim'
    index = yaml.safe_load((mim / 'model-index.yml').read_text())
    configs = [model['Config'] for meta in index['Import']
               for model in yaml.safe_load((mim / meta).read_text())['Models']]
    assert configs and all((mim / c).is_file() for c in configs)
    assert (mim / 'tools' / 'train.py').is_file()
    sdist = set((tmp_path / 'tlalign_mm.egg-info' /
                 'SOURCES.txt').read_text().split())
    assert {'model-index.yml', 'tools/train.py', *configs} <= sdist
