# Writes kvconf.trace/1, 1.1 and 1.2 files for the kvconf check CLI test (tests/tools/cli_check_test.cmake): one good pair with
# synthetic logits, and one broken trace per defect docs/TRACES.md says exits 2. numpy + safetensors only.
# Usage: make_traces.py OUTDIR
import json
import os
import sys

import numpy as np
from safetensors.numpy import save_file

V, T = 40, 6
PROMPT = [1, 5, 9, 13]


def meta(path, **over):
    m = {
        "format": "kvconf.trace/1",
        "engine": {"name": "synthetic", "version": "1", "attention": "eager"},
        "model": {"name": "toy", "vocab_size": V},
        "dtype": "float16",
        "path": path,
        "strategy": {"name": "greedy", "seed": 0},
        "prompt_id": "p0",
        "prompt_ids": PROMPT,
        "generated_ids": [],
    }
    m.update(over)
    return m


def logits(seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(T, V)).astype(np.float16)


def write(path, m, tensors):
    save_file(tensors, path, metadata={"kvconf.trace": json.dumps(m)})


def main(out):
    os.makedirs(out, exist_ok=True)
    z = logits(1)
    toks = [int(i) for i in z.astype(np.float32).argmax(axis=1)]
    good_on = meta("cache_on", generated_ids=toks)
    good_off = meta("cache_off", generated_ids=toks)
    kv = np.random.default_rng(2).normal(size=(2, len(PROMPT) + T - 1, 4)).astype(np.float16)  # (L, N, D_kv)
    good_on_kv = dict(good_on, model={"name": "toy", "vocab_size": V, "n_layers": 2})
    write(f"{out}/good.on.safetensors", good_on_kv, {"logits": z, "k_rows": kv, "v_rows": kv})
    write(f"{out}/good.off.safetensors", good_off, {"logits": z})
    # A pair whose cache-OFF prefill logits differ in one element by one fp16 ulp: prefill_logits_bitwise fails.
    z2 = z.copy()
    z2[0, 3] = np.nextafter(z2[0, 3], np.float16(np.inf))
    write(f"{out}/prefill.on.safetensors", good_on, {"logits": z})
    write(f"{out}/prefill.off.safetensors", good_off, {"logits": z2})
    # cache OFF's calls: the whole sequence from an empty cache at every step.
    off_calls = {"calls": [[len(PROMPT) + t, 0] for t in range(T)], "call_of_step": list(range(T))}
    # 1.2 pairs with the engine's report (docs/TRACES.md "The engine's report"): the calls each path makes and the
    # cache rows after them; then the same cache-ON side whose cache held one row too few after call 2.
    n = len(PROMPT)
    on_calls = {"calls": [[n, 0]] + [[1, n + t - 1] for t in range(1, T)], "call_of_step": list(range(T))}
    report = {"format": "kvconf.trace/1.2", "calls_reported_by": "make_traces.py"}
    held = [n + t for t in range(T)]
    write(f"{out}/report.on.safetensors", meta("cache_on", generated_ids=toks, **report, **on_calls,
                                               cache_after=held), {"logits": z})
    write(f"{out}/report.off.safetensors", meta("cache_off", generated_ids=toks, **report, **off_calls,
                                                cache_after=[0] * T), {"logits": z})
    write(f"{out}/growth.on.safetensors", meta("cache_on", generated_ids=toks, **report, **on_calls,
                                               cache_after=held[:2] + [held[2] - 1] + held[3:]), {"logits": z})
    # The cache-ON side that recomputed: its report says so, its logits are cache OFF's.
    write(f"{out}/recompute.on.safetensors", meta("cache_on", generated_ids=toks, **report, **off_calls,
                                                  cache_after=held), {"logits": z})
    bad = {
        "wrong_shape": (good_off, {"logits": z[:, :-1].copy()}),
        "nan_logits": (good_off, {"logits": np.where(np.arange(T * V).reshape(T, V) == 7, np.float16(np.nan), z)}),
        "token_out_of_vocab": (meta("cache_off", generated_ids=toks[:-1] + [V]), {"logits": z}),
        "other_prompt": (meta("cache_off", generated_ids=toks, prompt_ids=[1, 5, 9, 14]), {"logits": z}),
        "both_on": (good_on, {"logits": z}),
        "no_metadata": (None, {"logits": z}),
        "format_2": (meta("cache_off", generated_ids=toks, format="kvconf.trace/2"), {"logits": z}),
        "draws_outside": (meta("cache_off", generated_ids=toks, draws=[0.5] * (T - 1) + [1.5]), {"logits": z}),
        "kv_in_off": (meta("cache_off", generated_ids=toks, model={"name": "toy", "vocab_size": V, "n_layers": 2}),
                      {"logits": z, "k_rows": np.zeros((2, 9, 4), np.float16), "v_rows": np.zeros((2, 9, 4), np.float16)}),
        # 1.2's engine report (docs/TRACES.md): in a 1.1 trace, missing beside calls, one count short.
        "report_in_11": (meta("cache_off", generated_ids=toks, format="kvconf.trace/1.1", **off_calls,
                              cache_after=[0] * T), {"logits": z}),
        "report_missing": (meta("cache_off", generated_ids=toks, format="kvconf.trace/1.2", **off_calls),
                           {"logits": z}),
        "report_short": (meta("cache_off", generated_ids=toks, format="kvconf.trace/1.2", **off_calls,
                              cache_after=[0] * (T - 1), calls_reported_by="a test"), {"logits": z}),
        # kv_dtype's kv_format (docs/TRACES.md): one the engine does not know; missing.
        "kv_format_unknown": (meta("cache_on", generated_ids=toks, format="kvconf.trace/1.1",
                                   scenario={"name": "kv_dtype", "side": "reference", "kv_format": "q5_k"}),
                              {"logits": z}),
        "kv_format_missing": (meta("cache_on", generated_ids=toks, format="kvconf.trace/1.1",
                                   scenario={"name": "kv_dtype", "side": "reference"}), {"logits": z}),
        # A vLLM trace must carry vLLM's path record (docs/VLLM.md): without calls; without engine_report; a count
        # that is not one.
        "vllm_no_calls": (meta("cache_off", generated_ids=toks, format="kvconf.trace/1.2",
                               engine={"name": "vllm", "version": "0.32.0", "attention": "cpu_attn"}), {"logits": z}),
        "vllm_no_report": (meta("cache_off", generated_ids=toks, **report, **off_calls, cache_after=[0] * T,
                                engine={"name": "vllm", "version": "0.32.0", "attention": "cpu_attn"}), {"logits": z}),
        "vllm_bad_count": (meta("cache_off", generated_ids=toks, **report, **off_calls, cache_after=[0] * T,
                                engine={"name": "vllm", "version": "0.32.0", "attention": "cpu_attn"},
                                engine_report={"num_cached_tokens": -1, "num_preemptions": 0}), {"logits": z}),
    }
    for name, (m, tensors) in bad.items():
        path = f"{out}/{name}.safetensors"
        if m is None:
            save_file(tensors, path)
        else:
            write(path, m, tensors)
    data = open(f"{out}/good.off.safetensors", "rb").read()
    open(f"{out}/truncated.safetensors", "wb").write(data[: len(data) // 2])


if __name__ == "__main__":
    main(sys.argv[1])
