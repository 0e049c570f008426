# CIFAR-100 (50,000 train / 10,000 test images, 32x32), fine-tuned at
# 224x224 exactly as CIFAR-10 (cifar10_bs96_deit-ft-224.py).
# Layout:
# data/cifar100/cifar-100-python/{train, test, meta}
# (the official "python version" archive, extracted; never downloaded)
_base_ = ['./cifar10_bs96_deit-ft-224.py']
dataset_type = 'LocalCIFAR100'
data_preprocessor = dict(num_classes=100)
train_dataloader = dict(
    dataset=dict(type=dataset_type, data_root='data/cifar100'))
val_dataloader = dict(dataset=dict(type=dataset_type, data_root='data/cifar100'))
test_dataloader = val_dataloader
