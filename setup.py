"""tlalign_mm: Token-Label Alignment (TL-Align) and SPT/LSA for OpenMMLab 2.x.

Install the whole stack with ``bash tools/install.sh`` (it pins what the stack
forces and builds mmcv's ops where no cached wheel fits). The requirements
below document those pins; the install script resolves them.
"""
from setuptools import find_packages, setup

setup(
    name='tlalign_mm',
    version='0.1.0',
    description=('Token-Label Alignment for vision transformers on '
                 'OpenMMLab 2.x'),
    long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    license='Apache-2.0',
    python_requires='>=3.11',
    packages=find_packages(include=['tlalign_mm', 'tlalign_mm.*']),
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
