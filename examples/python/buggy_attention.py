"""A readable pure-torch attention with a realistic decode-only bug. Prefill (several query rows) takes one softmax
over all keys; decode (one query row: an engine's separate decode kernel, FlashDecoding-style) walks the cache in
blocks of 8 keys with an online softmax, keeping a running max m, row sum l and output acc, and rescaling them when a
later block raises the max. The bug is the classic sign error in that rescale: exp(m_new - m_old) instead of
exp(m_old - m_new). Prefill is right, so a test that compares prefill with a reference never sees it, and so is
decode whenever the first block holds the row's max; kvconf's cache-ON vs cache-OFF rule (the decode row vs the same
row of prefill) catches it. fixed=True is the same kernel with the right sign."""

import torch

from sdpa_attention import visible

BLOCK = 8  # keys per block of the decode loop


def scores_of(q, k, call):
    """q: (H, n_q, d), k: (H, n_kv, d) -> (H, n_q, n_kv) fp32 scores, softcapped, masked."""
    s = torch.matmul(q.float(), k.float().transpose(1, 2)) * call.scale
    if call.softcap > 0:
        s = call.softcap * torch.tanh(s / call.softcap)
    return s.masked_fill(~visible(call, q.shape[1], k.shape[1]).to(q.device), float("-inf"))


def decode_online(s, v, fixed):
    """s: (H, 1, n_kv) scores, v: (H, n_kv, d_v) fp32 -> (H, 1, d_v): online softmax over blocks of BLOCK keys."""
    heads, _, n_kv = s.shape
    m = torch.full((heads, 1, 1), float("-inf"))
    row_sum = torch.zeros(heads, 1, 1)
    acc = torch.zeros(heads, 1, v.shape[-1])
    for start in range(0, n_kv, BLOCK):
        sb = s[:, :, start:start + BLOCK]                                 # (H, 1, b)
        if bool(torch.isneginf(sb).all()):
            continue                                                     # a block outside the sliding window
        m_new = torch.maximum(m, sb.amax(-1, keepdim=True))              # (H, 1, 1)
        alpha = torch.exp(m - m_new) if fixed else torch.exp(m_new - m)  # BUG: the sign of the rescale
        alpha = torch.nan_to_num(alpha, nan=0.0)                         # m = -inf before the first block
        p = torch.exp(sb - m_new)                                        # (H, 1, b)
        row_sum = row_sum * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + torch.matmul(p, v[:, start:start + BLOCK])
        m = m_new
    return acc / row_sum


def buggy_attention(q, k_cache, v_cache, call, fixed=False):
    """q: (n_q, H, d); k_cache: (capacity, H_kv, d); v_cache: (capacity, H_kv, d_v) -> (n_q, H, d_v)."""
    n_q, heads, _ = q.shape
    rep = heads // call.n_kv_heads
    k = k_cache[:call.n_kv].repeat_interleave(rep, dim=1).transpose(0, 1)  # (H, n_kv, d)
    v = v_cache[:call.n_kv].repeat_interleave(rep, dim=1).transpose(0, 1)  # (H, n_kv, d_v)
    s = scores_of(q.transpose(0, 1), k, call)                              # (H, n_q, n_kv)
    if n_q == 1:
        o = decode_online(s, v.float(), fixed)                             # (H, 1, d_v)
    else:
        o = torch.matmul(torch.softmax(s, dim=-1), v.float())              # (H, n_q, d_v)
    return o.transpose(0, 1).to(q.dtype).contiguous()                      # (n_q, H, d_v)


def fixed_attention(q, k_cache, v_cache, call):
    return buggy_attention(q, k_cache, v_cache, call, fixed=True)
