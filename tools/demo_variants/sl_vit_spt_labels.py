# Issue 25, the SPT row: the demo SL-ViT whose patch tokens start TL-Align
# from their own patch's label (the unshifted view, as a plain patch
# embedding) instead of the mean over SPT's five views. Only the labels
# change: the CutMix twin is the baseline SL-ViT, and the TL-Align twin
# trains the same model on the centre-window rule's target.
#
#   .venv/bin/python tools/run_demo.py --seeds $(seq 0 19) \
#       --variants tools/demo_variants/sl_vit_spt_labels.py \
#       --work-dir work_dirs/demo_sl_vit_spt_labels
variants = [
    dict(name='SL-ViT-centre-labels', model='SL-ViT',
         options=['model.backbone.spt_cfg.label_views=centre']),
]
