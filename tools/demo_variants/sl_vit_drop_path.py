# Issue 25, the drop-path row: the demo SL-ViT with TL-Align ignoring
# drop-path (follow_drop_path=False, the official TL-Align code's
# behaviour) instead of keeping the labels of samples whose attention branch
# drop-path removed. Only the TL-Align twin changes (the option is a
# TLAlignClassifier's): the CutMix twin is the baseline SL-ViT.
#
#   .venv/bin/python tools/run_demo.py --seeds $(seq 0 19) \
#       --variants tools/demo_variants/sl_vit_drop_path.py \
#       --work-dir work_dirs/demo_sl_vit_drop_path
variants = [
    dict(name='SL-ViT-ignore-drop-path', model='SL-ViT',
         tlalign_options=['model.align_cfg.follow_drop_path=False']),
]
