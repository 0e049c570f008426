"""timm's VisionTransformer family as a plain timm model: eval forward,
export, recording that intercepts no function. (Exactness against the dense
reference and clear errors for what is not supported:
``test_alignment.py``; in training, timm's own drop-path draw:
``test_every_backbone.py``.)"""
import threading

import pytest
import timm
import torch
import torch.nn.functional as F
from mmpretrain.registry import MODELS

from tlalign_mm import align_labels

from . import zoo
from .zoo import random_mix


@pytest.mark.parametrize('pool', ['token', 'avg'])
def test_eval_forward_is_the_plain_timm_model_bit_for_bit(pool):
    kwargs = dict(zoo.TIMM, global_pool=pool)
    built = zoo.build(kwargs)
    assert type(built).__name__ == 'TIMMBackbone'
    kwargs = {k: v for k, v in kwargs.items() if k not in ('type',
                                                           'model_name')}
    model = timm.create_model(zoo.TIMM['model_name'], pretrained=False,
                              num_classes=0, **kwargs).eval()
    model.load_state_dict({k[len('timm_model.'):]: v
                           for k, v in built.state_dict().items()},
                          strict=True)
    images, pw, targets = random_mix(2, 2, 32, 32)
    with torch.no_grad():
        expected = model.forward_head(model.forward_features(images),
                                      pre_logits=True)
        assert torch.equal(built(images)[0], expected)
        align_labels(built, images, pw, targets)  # recorded once
        assert torch.equal(built(images)[0], expected)


def test_export_loads_strictly_into_timm_create_model(tmp_path):
    """A TL-Align classifier checkpoint -> plain timm state dict whose
    logits are the classifier's."""
    from mmengine.config import Config
    from mmengine.runner.checkpoint import save_checkpoint

    from tlalign_mm.downstream.export import export_timm
    for name in ('deit_tiny_patch16_224', 'deit_tiny_distilled_patch16_224'):
        cfg = Config.fromfile(
            'configs/tlalign/deit-small-timm_4xb256-tlalign_in1k.py')
        cfg.model.backbone.update(model_name=name, depth=1, img_size=32,
                                  patch_size=8)
        cfg.model.head.in_channels = 192
        torch.manual_seed(0)
        classifier = MODELS.build(cfg.model).eval()
        with torch.no_grad():
            for p in classifier.parameters():
                p.add_(0.1 * torch.randn_like(p))
        ckpt = str(tmp_path / f'{name}.pth')
        save_checkpoint(dict(meta=dict(cfg=cfg.pretty_text),
                             state_dict=classifier.state_dict()), ckpt)
        out = str(tmp_path / f'{name}_timm.pth')
        info = export_timm(ckpt, out)
        assert info['kwargs']['num_classes'] == 1000
        model = timm.create_model(name, pretrained=False, **info['kwargs'])
        model.load_state_dict(torch.load(out, weights_only=True),
                              strict=True)
        model.eval()
        images = torch.randn(2, 3, 32, 32)
        with torch.no_grad():  # float32 logits of order 1: ~100 ulps
            torch.testing.assert_close(model(images),
                                       classifier(images, mode='tensor'),
                                       atol=1e-5, rtol=1e-5)


def test_recording_intercepts_no_function_and_survives_a_raise():
    """Recording puts no torch function mode anywhere: an SDPA call from
    another thread while the attention runs, or from the MLP, is the plain
    function, and a forward that raises leaves nothing behind (the next
    recorded forward gives the same labels)."""
    backbone = zoo.build(zoo.TIMM)
    images, pw, targets = random_mix(2, 2, 32, 32)
    q = torch.randn(1, 1, 3, 4)
    plain_out = F.scaled_dot_product_attention(q, q, q)
    seen = []

    def other_thread():
        seen.append(F.scaled_dot_product_attention(q, q, q))

    def inside_attention(module, args, output):
        seen.append(torch.overrides._get_current_function_mode())
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()

    def in_mlp(module, args, output):
        seen.append(torch.overrides._get_current_function_mode())
        seen.append(F.scaled_dot_product_attention(q, q, q))

    block = backbone.timm_model.blocks[0]
    handles = [block.attn.qkv.register_forward_hook(inside_attention),
               block.mlp.register_forward_hook(in_mlp)]
    reference = align_labels(backbone, images, pw, targets)
    mode_inside, from_thread, mode_in_mlp, from_mlp = seen
    assert mode_inside is None and mode_in_mlp is None
    assert torch.equal(from_thread, plain_out)
    assert torch.equal(from_mlp, plain_out)
    for handle in handles:
        handle.remove()

    def fail(module, args, output):
        raise KeyError('boom')

    handle = block.attn.qkv.register_forward_hook(fail)
    with pytest.raises(KeyError, match='boom'):
        align_labels(backbone, images, pw, targets)
    handle.remove()
    assert torch.overrides._get_current_function_mode() is None
    assert torch.equal(align_labels(backbone, images, pw, targets),
                       reference)

