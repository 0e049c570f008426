"""timm's VisionTransformer family as a plain timm model: export, and
recording that intercepts no function. (Exactness against the dense
reference and clear errors for what is not supported:
``test_alignment.py``; in training, timm's own drop-path draw, and a
recorded backbone's bit-identical forward: ``test_every_backbone.py``.)"""
import pytest
import timm
import torch
import torch.nn.functional as F

from tlalign_mm import align_labels

from . import zoo
from .zoo import random_mix


@pytest.mark.parametrize('name,pool', [
    ('deit_tiny_patch16_224', 'avg'),
    ('deit_tiny_distilled_patch16_224', 'token')])
def test_export_loads_strictly_into_timm_create_model(name, pool, tmp_path):
    """A TL-Align classifier checkpoint -> plain timm state dict whose
    logits are the classifier's: the backbone pools as timm does (the
    token pool of plain DeiT: tests/downstream/test_export.py)."""
    from tlalign_mm.downstream.export import export_timm

    from ..downstream.tiny import config_path, make_pretrain_checkpoint
    ckpt, out = str(tmp_path / 'ckpt.pth'), str(tmp_path / 'timm.pth')
    classifier = make_pretrain_checkpoint(
        config_path('tlalign', 'deit-small-timm_4xb256-tlalign_in1k.py'),
        ckpt, dict(model_name=name, depth=1, img_size=32, patch_size=8,
                   global_pool=pool), width=192).eval()
    # (the kwargs' classes: the strict load of the head's weights)
    model = timm.create_model(name, pretrained=False,
                              **export_timm(ckpt, out)['kwargs'])
    model.load_state_dict(torch.load(out, weights_only=True), strict=True)
    model.eval()
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():  # float32 logits of order 1: ~100 ulps
        torch.testing.assert_close(model(images),
                                   classifier(images, mode='tensor'),
                                   atol=1e-5, rtol=1e-5)


def test_recording_intercepts_no_function_and_survives_a_raise():
    """Recording puts no torch function mode anywhere and replaces no
    function: inside the attention and in the MLP, none is active and SDPA
    is torch's own; a forward that raises leaves nothing behind (the next
    recorded forward gives the same labels)."""
    backbone = zoo.build(zoo.TIMM)
    images, pw, targets = random_mix(2, 2, 32, 32)
    sdpa, seen = F.scaled_dot_product_attention, []

    def look(module, args, output):
        seen.append((torch.overrides._get_current_function_mode(),
                     torch.nn.functional.scaled_dot_product_attention))

    block = backbone.timm_model.blocks[0]
    block.attn.qkv.register_forward_hook(look)
    block.mlp.register_forward_hook(look)
    reference = align_labels(backbone, images, pw, targets)
    assert seen == [(None, sdpa)] * 2  # (later calls append unread)

    def fail(module, args, output):
        raise KeyError('boom')

    handle = block.attn.qkv.register_forward_hook(fail)
    with pytest.raises(KeyError, match='boom'):
        align_labels(backbone, images, pw, targets)
    handle.remove()
    assert torch.overrides._get_current_function_mode() is None
    assert torch.equal(align_labels(backbone, images, pw, targets),
                       reference)


def test_pooled_timm_backbone_reads_checkpoint_path_through_the_checked_loader(
        tmp_path):
    """timm's own state dict (classifier included) loads strictly, as
    ``timm.create_model(checkpoint_path=...)`` would, but read by
    :func:`tlalign_mm.checkpoint.load` (crafted files on this path:
    tests/test_checkpoint_safety.py, 'timm-backbone'); a missing key
    fails naming it."""
    from tlalign_mm.checkpoint import CheckpointMismatchError
    from tlalign_mm.models.pooled_timm_backbone import PooledTIMMBackbone
    args = dict(model_name='deit_tiny_patch16_224', img_size=32,
                patch_size=8, depth=1)
    source = timm.create_model(num_classes=5, **args)
    path = str(tmp_path / 'timm.pth')
    torch.save(source.state_dict(), path)
    backbone = PooledTIMMBackbone(checkpoint_path=path, **args)
    for key, value in backbone.timm_model.state_dict().items():
        assert torch.equal(value, source.state_dict()[key]), key
    torch.save({k: v for k, v in source.state_dict().items()
                if k != 'cls_token'}, path)
    with pytest.raises(CheckpointMismatchError, match='missing in the '
                       r'checkpoint \(1\): cls_token'):
        PooledTIMMBackbone(checkpoint_path=path, **args)
