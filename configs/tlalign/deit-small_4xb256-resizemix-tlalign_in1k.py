# TL-Align on the ResizeMix twin (deit-small_4xb256-resizemix_in1k.py):
# everything but the training target is that config's. TLResizeMix draws
# exactly what ResizeMix draws and records the pasted box as wholly the
# partner's pixels; alignment leaves Mixup labels unchanged.
_base_ = ['./deit-small_4xb256-resizemix_in1k.py']

model = dict(type='TLAlignClassifier')
