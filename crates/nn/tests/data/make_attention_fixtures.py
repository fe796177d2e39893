"""Writes the PyTorch reference values that crates/nn/tests/attention.rs checks against.

Run from anywhere with torch and safetensors installed:

    python3 crates/nn/tests/data/make_attention_fixtures.py

Each case is one file `attn_<case>.safetensors` holding, all float32 unless said otherwise:
- `model.<key>`: the module's state_dict;
- the inputs (`query`, `key`, `value` or `input`) and masks (bool masks stay BOOL);
- `probe` (and `probe_w`): fixed random tensors; the loss is `(out * probe).sum()`
  (`+ (weights * probe_w).sum()` where weights are returned);
- `out`, `weights` (averaged over heads) and `weights_per_head` where asked for;
- `grad.<key>`: d loss / d parameter, and `grad_input.<name>`: d loss / d input.

Sizes are small (embed 8, heads 2, seq 4-5, batch 3) so the files stay a few KB each. Dropout is
0 and the models are in train mode, so PyTorch takes its general (non-fast-path) code, which is
the code liandan follows. The printed names and parameter counts are the literals in the test.
"""

import os

import torch
import torch.nn as nn
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
E, H, N, L, S = 8, 2, 3, 5, 4


def leaf(t):
    return t.clone().requires_grad_(True)


def finish(name, model, tensors, loss, inputs):
    """Backward of `loss`, then writes state dict, tensors and gradients to attn_<name>."""
    loss.backward()
    out = {f"model.{k}": v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    for k, p in model.named_parameters():
        out[f"grad.{k}"] = p.grad.detach().clone().contiguous()
    for k, x in inputs.items():
        out[f"grad_input.{k}"] = x.grad.detach().clone().contiguous()
    for k, v in tensors.items():
        out[k] = v.detach().clone().contiguous()
    path = os.path.join(HERE, f"attn_{name}.safetensors")
    save_file(out, path)
    print(name, [k for k, _ in model.state_dict().items()], sum(p.numel() for p in model.parameters()))


def mha_seq_first():
    """Cross-attention, seq-first, L != S, weights averaged, no masks."""
    torch.manual_seed(1)
    m = nn.MultiheadAttention(E, H, dropout=0.0).train()
    with torch.no_grad():  # non-zero biases, so their gradients and uses are checked
        m.in_proj_bias.normal_()
        m.out_proj.bias.normal_()
    q, k, v = leaf(torch.randn(L, N, E)), leaf(torch.randn(S, N, E)), leaf(torch.randn(S, N, E))
    out, w = m(q, k, v, need_weights=True, average_attn_weights=True)
    _, wh = m(q, k, v, need_weights=True, average_attn_weights=False)
    probe, probe_w = torch.randn(out.shape), torch.randn(w.shape)
    loss = (out * probe).sum() + (w * probe_w).sum()
    t = dict(query=q, key=k, value=v, out=out, weights=w, weights_per_head=wh, probe=probe, probe_w=probe_w)
    finish("mha_seq_first", m, t, loss, dict(query=q, key=k, value=v))


def mha_batch_first_masks():
    """Self-attention, batch-first, bool key_padding_mask [N, S] and bool causal attn_mask."""
    torch.manual_seed(2)
    m = nn.MultiheadAttention(E, H, dropout=0.0, batch_first=True).train()
    with torch.no_grad():
        m.in_proj_bias.normal_()
        m.out_proj.bias.normal_()
    x = leaf(torch.randn(N, L, E))
    kpm = torch.zeros(N, L, dtype=torch.bool)
    kpm[0, 4] = True
    kpm[2, 2:] = True  # key 0 always stays visible, so no query loses every key
    causal = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)
    out, w = m(x, x, x, key_padding_mask=kpm, attn_mask=causal, need_weights=True)
    out_nw, _ = m(x, x, x, key_padding_mask=kpm, attn_mask=causal, need_weights=False)
    assert torch.allclose(out, out_nw, atol=1e-6)
    probe, probe_w = torch.randn(out.shape), torch.randn(w.shape)
    loss = (out * probe).sum() + (w * probe_w).sum()
    t = dict(input=x, key_padding_mask=kpm, attn_mask=causal, out=out, weights=w, probe=probe, probe_w=probe_w)
    finish("mha_batch_first_masks", m, t, loss, dict(input=x))


def mha_float_mask():
    """Self-attention, seq-first, float 3-D attn_mask [N*H, L, L] and float key_padding_mask,
    weights per head."""
    torch.manual_seed(3)
    m = nn.MultiheadAttention(E, H, dropout=0.0).train()
    x = leaf(torch.randn(L, N, E))
    mask = torch.randn(N * H, L, L)
    kpm = torch.zeros(N, L)
    kpm[1, 3] = -2.5
    kpm[2, 0] = float("-inf")
    out, wh = m(x, x, x, key_padding_mask=kpm, attn_mask=mask, need_weights=True, average_attn_weights=False)
    probe, probe_w = torch.randn(out.shape), torch.randn(wh.shape)
    loss = (out * probe).sum() + (wh * probe_w).sum()
    t = dict(input=x, attn_mask=mask, key_padding_mask=kpm, out=out, weights_per_head=wh, probe=probe, probe_w=probe_w)
    finish("mha_float_mask", m, t, loss, dict(input=x))


def mha_unbatched():
    """Self-attention on an unbatched [L, E] input with a float [L, L] attn_mask, output only."""
    torch.manual_seed(4)
    m = nn.MultiheadAttention(E, H, dropout=0.0).train()
    x = leaf(torch.randn(L, E))
    mask = torch.randn(L, L)
    out, w = m(x, x, x, attn_mask=mask, need_weights=True)
    probe = torch.randn(out.shape)
    loss = (out * probe).sum()
    t = dict(input=x, attn_mask=mask, out=out, weights=w, probe=probe)
    finish("mha_unbatched", m, t, loss, dict(input=x))


def randomize_norms(model):
    """LayerNorm weights start at 1 and biases at 0; other values check they are used."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.3 * torch.randn_like(p))


def layer_post_relu():
    """Post-norm ReLU layer, seq-first, with a bool src_key_padding_mask."""
    torch.manual_seed(5)
    m = nn.TransformerEncoderLayer(E, H, dim_feedforward=16, dropout=0.0).train()
    randomize_norms(m)
    x = leaf(torch.randn(L, N, E))
    kpm = torch.zeros(N, L, dtype=torch.bool)
    kpm[1, 3:] = True
    out = m(x, src_key_padding_mask=kpm)
    probe = torch.randn(out.shape)
    t = dict(input=x, key_padding_mask=kpm, out=out, probe=probe)
    finish("layer_post_relu", m, t, (out * probe).sum(), dict(input=x))


def layer_pre_gelu():
    """Pre-norm GELU layer, batch-first (the ViT's block), no masks."""
    torch.manual_seed(6)
    m = nn.TransformerEncoderLayer(E, H, dim_feedforward=16, dropout=0.0, activation="gelu", batch_first=True, norm_first=True).train()
    randomize_norms(m)
    x = leaf(torch.randn(N, L, E))
    out = m(x)
    probe = torch.randn(out.shape)
    t = dict(input=x, out=out, probe=probe)
    finish("layer_pre_gelu", m, t, (out * probe).sum(), dict(input=x))


def encoder_stack():
    """Two pre-norm GELU layers plus a final LayerNorm, batch-first, float causal src_mask."""
    torch.manual_seed(7)
    layer = nn.TransformerEncoderLayer(E, H, dim_feedforward=16, dropout=0.0, activation="gelu", batch_first=True, norm_first=True)
    m = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(E), enable_nested_tensor=False).train()
    with torch.no_grad():  # the deep copies start equal; make the layers differ
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))
    x = leaf(torch.randn(N, L, E))
    mask = nn.Transformer.generate_square_subsequent_mask(L)
    out = m(x, mask=mask)
    probe = torch.randn(out.shape)
    t = dict(input=x, attn_mask=mask, out=out, probe=probe)
    finish("encoder_stack", m, t, (out * probe).sum(), dict(input=x))


if __name__ == "__main__":
    mha_seq_first()
    mha_batch_first_masks()
    mha_float_mask()
    mha_unbatched()
    layer_post_relu()
    layer_pre_gelu()
    encoder_stack()
