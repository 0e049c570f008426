"""tlalign_mm: Token-Label Alignment (TL-Align) and SPT/LSA for OpenMMLab 2.x.

Install the whole stack with ``bash tools/install.sh`` (it pins what the stack
forces and builds mmcv's ops where no cached wheel fits). The requirements
below document those pins; the install script resolves them.
"""
import os.path as osp
import shutil

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = osp.dirname(osp.abspath(__file__))
#: What mim reads of a package, under ``<package>/.mim/`` (mmpretrain's
#: setup.py ``add_mim_extension``; MANIFEST.in puts them in the sdist).
MIM_FILES = ('configs', 'tools', 'model-index.yml')


class BuildPyWithMim(build_py):
    """``build_py`` that also copies :data:`MIM_FILES` into the built
    ``tlalign_mm/.mim/``, so that ``mim search tlalign_mm`` and ``mim train
    tlalign_mm CONFIG`` find the model index, configs and tools of an
    installed wheel. An editable install reads the checkout itself."""

    def run(self):
        super().run()
        if self.editable_mode:
            return
        mim = osp.join(self.build_lib, 'tlalign_mm', '.mim')
        for name in MIM_FILES:
            src, dst = osp.join(HERE, name), osp.join(mim, name)
            if osp.isdir(src):
                shutil.copytree(src, dst, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns(
                                    '__pycache__', '*.pyc', '*.png'))
            else:
                shutil.copyfile(src, dst)


setup(
    name='tlalign_mm',
    version='0.1.0',
    description=('Token-Label Alignment for vision transformers on '
                 'OpenMMLab 2.x'),
    long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    license='Apache-2.0',
    python_requires='>=3.11',
    packages=find_packages(include=['tlalign_mm', 'tlalign_mm.*',
                                    'tlalign_mm_cli']),
    cmdclass={'build_py': BuildPyWithMim},
    install_requires=[
        'torch==2.14.1',
        'torchvision==0.29.1',
        'mmengine==0.10.7',
        'mmcv==2.1.0',
        'mmdet==3.3.0',
        'mmsegmentation==1.2.2',
        'mmpretrain==1.2.0',
        'timm>=1.0,<2',
        'scikit-learn',
    ],
    extras_require={
        'tests': ['pytest>=8'],
        # tools/robustness/autoattack.py: fra31/auto-attack's attacks
        'autoattack': ['pyautoattack==0.2.0'],
    },
)
