# The first ablation rows of issue 25: which of SL-ViT's two components,
# Shifted Patch Tokenization or Locality Self-Attention, carries the small
# loss TL-Align shows on the demo SL-ViT. Each row is the demo SL-ViT with one
# switch turned off, trained with CutMix and with TL-Align on every seed, and
# paired with its own CutMix twin:
#
#   .venv/bin/python tools/run_demo.py --seeds $(seq 0 19) \
#       --variants tools/demo_variants/sl_vit_components.py \
#       --work-dir work_dirs/demo_sl_vit_components
#
# (The full SL-ViT and the plain ViT are the main job's two rows:
# `tools/run_demo.py --seeds $(seq 0 19)`.)
variants = [
    dict(name='ViT+SPT', model='SL-ViT',
         options=['model.backbone.use_lsa=False']),
    dict(name='ViT+LSA', model='SL-ViT',
         options=['model.backbone.use_spt=False']),
]
