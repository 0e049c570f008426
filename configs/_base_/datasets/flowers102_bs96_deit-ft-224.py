# Oxford Flowers-102 (train+val 2,040 / test 6,149 images), fine-tuned at
# 224x224 with DeiT's transfer recipe (deit-ft-224_image-files.py).
# Layout:
# data/flowers102/{jpg/image_00001.jpg..., imagelabels.mat, setid.mat}
# (mmpretrain's Flowers102: the official 102flowers.tgz + the two .mat files)
_base_ = ['./deit-ft-224_image-files.py']
dataset_type = 'Flowers102'
data_preprocessor = dict(num_classes=102)
train_dataloader = dict(
    dataset=dict(
        type=dataset_type, data_root='data/flowers102', split='trainval'))
val_dataloader = dict(
    dataset=dict(type=dataset_type, data_root='data/flowers102', split='test'))
test_dataloader = val_dataloader
