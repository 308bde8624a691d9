"""PyTorch's scaled_dot_product_attention called as an inference engine calls its attention kernel over a KV cache
(as HF transformers' sdpa path does): the query rows transposed to (1, H, n_q, d), the cache's first n_kv rows as
(1, H_kv, n_kv, d) repeated to H heads for GQA, and an explicit bottom-right causal mask (SDPA's is_causal is
top-left aligned, wrong for a decode row). kvconf calls it with kvconf's AttentionCall (docs/PYTHON.md)."""

import torch
from torch.nn.attention import sdpa_kernel


def visible(call, n_q, n_kv):
    """(n_q, n_kv) bool: which keys each query row sees (causal from position q_offset + i, sliding window)."""
    pos = call.q_offset + torch.arange(n_q).unsqueeze(1)  # (n_q, 1) absolute positions of the query rows
    key = torch.arange(n_kv).unsqueeze(0)                 # (1, n_kv)
    see = torch.ones(n_q, n_kv, dtype=torch.bool)
    if call.causal:
        see &= key <= pos
    if call.window > 0:
        dist = pos - key if call.causal else (pos - key).abs()
        see &= dist < call.window
    return see


def repeat_kv(t, heads):
    """(B, H_kv, n, dim) -> (B, H, n, dim): each KV head repeated for its group of query heads (HF's repeat_kv)."""
    b, kv_heads, n, dim = t.shape
    rep = heads // kv_heads
    return t if rep == 1 else t.unsqueeze(2).expand(b, kv_heads, rep, n, dim).reshape(b, heads, n, dim)


def sdpa_attention(q, k_cache, v_cache, call):
    """q: (n_q, H, d); k_cache: (capacity, H_kv, d); v_cache: (capacity, H_kv, d_v) -> (n_q, H, d_v)."""
    n_q, heads, _ = q.shape
    n_kv = call.n_kv
    qt = q.unsqueeze(0).transpose(1, 2)  # (1, H, n_q, d), strided as an engine's view

    def cache(c):  # (capacity, H_kv, dim) -> (1, H, n_kv, dim): the filled rows only, GQA heads repeated
        return repeat_kv(c[:n_kv].unsqueeze(0).transpose(1, 2).contiguous(), heads)  # from (1, H_kv, n_kv, dim)

    see = visible(call, n_q, n_kv)
    mask, is_causal = see.to(q.device), False
    if bool(see.all()):
        mask = None
    elif call.causal and call.window == 0 and n_q == n_kv and call.q_offset == 0:
        mask, is_causal = None, True  # top-left = bottom-right when the rows are the whole prefix
    o = torch.nn.functional.scaled_dot_product_attention(qt, cache(k_cache), cache(v_cache), attn_mask=mask,
                                                         is_causal=is_causal, scale=call.scale)  # (1, H, n_q, d_v)
    return o.transpose(1, 2).reshape(n_q, heads, -1).contiguous()  # (n_q, H, d_v), a new contiguous tensor


def sdpa_batched_decode(batch):
    """One decode step of several sequences in one padded SDPA launch, as an engine batches them (HF's left padding):
    batch is a list of (q (1, H, d), k_cache, v_cache, call) with different n_kv; each cache's filled rows are
    left-padded with zeros to the longest and the padding masked out. Returns each sequence's (1, H, d_v), in order."""
    longest = max(call.n_kv for *_, call in batch)
    heads = batch[0][0].shape[1]

    def padded(c, n):  # (capacity, H_kv, dim) -> (longest, H_kv, dim): the filled rows at the end
        return torch.nn.functional.pad(c[:n], (0, 0, 0, 0, longest - n, 0))

    def heads_of(t):  # (B, longest, H_kv, dim) -> (B, H, longest, dim), GQA heads repeated
        return repeat_kv(t.transpose(1, 2).contiguous(), heads)
    q = torch.stack([q for q, *_ in batch]).transpose(1, 2)                                # (B, H, 1, d)
    k = heads_of(torch.stack([padded(kc, call.n_kv) for _, kc, _, call in batch]))      # (B, H, longest, d)
    v = heads_of(torch.stack([padded(vc, call.n_kv) for _, _, vc, call in batch]))      # (B, H, longest, d_v)
    mask = torch.stack([torch.nn.functional.pad(visible(call, 1, call.n_kv), (longest - call.n_kv, 0))
                        for *_, call in batch]).unsqueeze(1).to(q.device)               # (B, 1, 1, longest)
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=batch[0][3].scale)
    return [o[b].transpose(0, 1).contiguous() for b in range(len(batch))]               # each (1, H, d_v)


def no_softcap(call):
    """SDPA has no logit softcap: kvconf skips those cases with this reason."""
    return "scaled_dot_product_attention has no logit softcap" if call.softcap > 0 else None


def forced(backend, fn=None):
    """fn (default sdpa_attention; also sdpa_batched_decode) with SDPA's backend forced (torch.nn.attention.SDPBackend),
    as kvconf's C++ torch kernels do."""
    fn = fn or sdpa_attention

    def attention(*args):
        with sdpa_kernel([backend]):
            return fn(*args)
    attention.__name__ = f"sdpa_{backend.name.lower()}"
    return attention


def zeros_for(call, dtype, device):
    """(q, k_cache, v_cache) of zeros shaped as kvconf hands them to a kernel for this call."""
    def z(rows, heads, dim):
        return torch.zeros(rows, heads, dim, dtype=dtype, device=device)
    return z(call.n_q, call.n_heads, call.d), z(call.capacity, call.n_kv_heads, call.d), \
        z(call.capacity, call.n_kv_heads, call.d_v)


def refusal(what, run):
    """None when run() works; else SDPA's refusal under the forced backend (its first line), for `what`."""
    try:
        run()
    except RuntimeError as e:
        return f"SDPA takes no forced backend for {what}: " + str(e).splitlines()[0]
    return None


def forced_supports(backend, dtype, device):
    """supports= for forced(backend): no softcap, and whatever SDPA refuses under that backend (on CUDA flash and
    cuDNN take no fp32, flash no explicit mask), asked as kvconf's C++ kernels ask it: the call on zeros, once per
    shape and mask."""
    attention = forced(backend)
    answers = {}

    def supports(call):
        why = no_softcap(call)
        if why is not None:
            return why
        key = (call.n_q, call.n_kv, call.n_heads, call.n_kv_heads, call.d, call.d_v, call.capacity, call.q_offset,
               call.causal, call.window)
        if key not in answers:
            answers[key] = refusal("this call", lambda: attention(*zeros_for(call, dtype, device), call))
        return answers[key]
    return supports


def forced_batch_supports(backend, dtype, device):
    """batch_supports= for forced(backend, sdpa_batched_decode): what SDPA refuses under that backend for the padded
    batch (on CUDA the flash backend takes no mask), asked on zeros of the launch's shapes."""
    step = forced(backend, sdpa_batched_decode)

    def supports(calls):
        return refusal("this padded batch", lambda: step([(*zeros_for(c, dtype, device), c) for c in calls]))
    return supports
