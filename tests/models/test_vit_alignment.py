"""TL-Align through mmpretrain's VisionTransformer against a dense
reference."""
import pytest
import torch
from mmpretrain.registry import MODELS

from tlalign_mm import align_labels
from tlalign_mm.models import aligned_forward

from .dense_reference import dense_vit_labels
from .mixes import assert_history_close, random_mix

ARCH = dict(embed_dims=48, num_layers=3, num_heads=3, feedforward_channels=96)


def build_vit(type='VisionTransformer', sharpen=4.0, seed=0, **kwargs):
    torch.manual_seed(seed)
    cfg = dict(type=type, arch=ARCH, img_size=32, patch_size=8)
    cfg.update(kwargs)
    vit = MODELS.build(cfg)
    vit.init_weights()
    with torch.no_grad():
        for p in [vit.pos_embed] + ([vit.cls_token]
                                    if vit.cls_token is not None else []):
            p.normal_(0, 0.5)
        for layer in vit.layers:
            # Sharpen the attention: scale the query and key projections.
            layer.attn.qkv.weight[:2 * 48] *= sharpen
    vit.eval()
    return vit


def test_out_indices_before_the_last_block_is_an_error():
    """The ViT runs all blocks and outputs block 0: labels after every
    block would not be those of the tokens the head reads."""
    with pytest.raises(NotImplementedError, match=r'outputs blocks \[0\] '
                       r'of 3 .*Use out_indices=-1'):
        aligned_forward(build_vit(out_indices=[0]), *random_mix(2, 2, 32,
                                                                32)[:2])
    # the last block among others is what the head reads
    images, pw, _ = random_mix(2, 2, 32, 32)
    aligned_forward(build_vit(out_indices=[0, 2]), images, pw)


CASES = [
    dict(name='cls S=2', S=2, size=(32, 32)),
    dict(name='cls S=3', S=3, size=(32, 32)),
    dict(name='box through patches', S=2, size=(32, 32), box=(3, 21, 5, 30)),
    dict(name='pooled', S=2, size=(32, 32), out_type='avg_featmap'),
    dict(name='pooled no cls', S=3, size=(32, 32), out_type='avg_featmap',
         with_cls_token=False),
    dict(name='other size', S=2, size=(48, 40)),
    dict(name='not a multiple of patch', S=3, size=(36, 29)),
    dict(name='distilled', S=2, size=(32, 32),
         type='DistilledVisionTransformer'),
]


@pytest.mark.parametrize('case', CASES, ids=[c['name'] for c in CASES])
def test_matches_dense_reference(case):
    case = dict(case)
    _, S, (H, W), box = (case.pop('name'), case.pop('S'), case.pop('size'),
                            case.pop('box', None))
    vit = build_vit(**case)
    images, pw, targets = random_mix(3, S, H, W, box=box)
    area_share = pw.mean((2, 3))
    labels, history = align_labels(vit, images, pw, targets,
                                   return_token_labels=True)
    with torch.no_grad():
        ref, ref_history, _ = dense_vit_labels(vit, images, pw, targets,
                                               area_share, patch=8)
    assert (labels.double() - ref).abs().max() <= 1e-5
    assert_history_close(history, ref_history, 4, targets)
    # The alignment moved something: the test can fail.
    if vit.out_type == 'cls_token':
        assert (ref - torch.einsum('bs,bsc->bc', area_share.double(),
                                   targets.double())).abs().max() > 1e-3


def test_given_area_share_are_the_class_token_label(monkeypatch):
    """With attention that moves nothing, the label is ``area_share``."""
    import tlalign_mm.core.records

    from .mixes import identity_attention
    vit = build_vit()
    # attention that moves nothing: A = I
    monkeypatch.setattr(tlalign_mm.core.records, 'head_mean_attention',
                        identity_attention)
    images, pw, targets = random_mix(2, 2, 32, 32, box=(0, 13, 0, 19))
    area_share = torch.tensor([[0.7, 0.3], [0.2, 0.8]])
    labels = align_labels(vit, images, pw, targets, area_share=area_share)
    torch.testing.assert_close(
        labels, torch.einsum('bs,bsc->bc', area_share, targets))


def test_tokens_are_the_plain_forward():
    vit = build_vit(out_type='raw')
    images, pw, _ = random_mix(2, 2, 32, 32)
    plain = vit(images)[0]
    vit.out_type = 'cls_token'
    aligned = aligned_forward(vit, images, pw)
    vit.out_type = 'raw'
    # The aligned call feeds the fused kernel wider (zero-padded) heads, so
    # the tokens agree to rounding, not bit for bit; eval is bit-identical.
    torch.testing.assert_close(aligned.feats[0], plain[:, 0], atol=1e-5,
                               rtol=1e-5)


def test_bf16_autocast_keeps_labels_fp32_accurate():
    vit = build_vit()
    vit.train()
    images, pw, targets = random_mix(2, 2, 32, 32)
    dtypes = []
    vit.layers[0].attn.qkv.register_forward_hook(
        lambda m, i, o: dtypes.append(o.dtype))
    with torch.autocast('cpu', dtype=torch.bfloat16):
        aligned = aligned_forward(vit, images, pw, keep_history=True)
    assert dtypes == [torch.bfloat16]  # the attention ran in bf16
    for labels in aligned.history:
        assert labels.dtype == torch.float32
        # bf16 label arithmetic would be off by ~1e-3.
        torch.testing.assert_close(labels.sum(-1),
                                   torch.ones(labels.shape[:2]),
                                   atol=1e-6, rtol=0)
    ref, _, _ = dense_vit_labels(vit, images, pw, targets, pw.mean((2, 3)), 8)
    ours = torch.einsum('bs,bsc->bc', aligned.weights.double(),
                        targets.double())
    # The attention itself comes from bf16 q, k.
    assert (ours - ref).abs().max() < 3e-2


def test_bad_inputs_get_clear_errors():
    vit = build_vit()
    images, pw, targets = random_mix(2, 2, 32, 32)
    with pytest.raises(ValueError, match='sum to 1'):
        align_labels(vit, images, pw * 2, targets)
    with pytest.raises(ValueError, match='height/width'):
        align_labels(vit, images, pw[..., :16], targets)
    with pytest.raises(ValueError, match=r'targets must be \(B, S, C\)'):
        align_labels(vit, images, pw, targets[:, :1])
    with pytest.raises(ValueError, match=r'area_share must be \(B, S\)'):
        align_labels(vit, images, pw, targets, torch.full((2, 3), 1 / 3))
    with pytest.raises(ValueError, match='area_share .* sum to 1'):
        align_labels(vit, images, pw, targets, torch.ones(2, 2))
    vit.out_type = 'featmap'
    with pytest.raises(ValueError, match='out_type'):
        align_labels(vit, images, pw, targets)
    with pytest.raises(NotImplementedError, match='no family description'):
        align_labels(torch.nn.Conv2d(3, 3, 1), images, pw, targets)
