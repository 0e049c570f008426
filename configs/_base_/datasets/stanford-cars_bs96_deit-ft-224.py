# Stanford Cars (8,144 train / 8,041 test images, 196 classes), fine-tuned
# at 224x224 with DeiT's transfer recipe (deit-ft-224_image-files.py).
# Layout:
# data/stanfordcars/{car_ims/000001.jpg..., cars_annos.mat}, or
# data/stanfordcars/{cars_train/, cars_test/, devkit/cars_train_annos.mat,
#   devkit/cars_test_annos_withlabels.mat}  (mmpretrain's StanfordCars)
_base_ = ['./deit-ft-224_image-files.py']
dataset_type = 'StanfordCars'
data_preprocessor = dict(num_classes=196)
train_dataloader = dict(
    dataset=dict(
        type=dataset_type, data_root='data/stanfordcars', split='train'))
val_dataloader = dict(
    dataset=dict(
        type=dataset_type, data_root='data/stanfordcars', split='test'))
test_dataloader = val_dataloader
