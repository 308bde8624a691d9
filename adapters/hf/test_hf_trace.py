# Test of the transformers adapter: writes llama2-tiny traces, reads them back, checks the format and bad-input exits.
"""python adapters/hf/test_hf_trace.py --fixtures build/fixtures   (exit 0 on success, 1 on a failed check)

Runs kvconf_hf_trace.py on the llama2-tiny fixture (2 prompts x 8 tokens: fp32 eager greedy with hidden states, and
fp16 sdpa top-k seed 3), reads every trace back with read_trace.py and checks shapes, metadata, the prefill rule
(logits row 0 bitwise equal between the paths in fp32 eager), that the stored tokens are what kvconf's sampler picks
from the stored logits and draws, that both paths share the draws; then bad input (exit 2, one stderr line) and
read_trace.py's refusal of a truncated file and of format kvconf.trace/2.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)

import kvconf_hf_trace as hf  # noqa: E402
import read_trace  # noqa: E402

ADAPTER = os.path.join(HERE, "kvconf_hf_trace.py")
READER = os.path.join(HERE, "read_trace.py")
T = 8
failures: list[str] = []


def check(cond: bool, what: str) -> None:
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}", file=sys.stderr)


def run_cli(args: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=240, **kw)


def expect_bad_input(name: str, proc: subprocess.CompletedProcess, must_name: str) -> None:
    lines = proc.stderr.strip().splitlines()
    check(proc.returncode == 2, f"{name}: exit {proc.returncode}, expected 2 (stderr: {proc.stderr.strip()[:300]})")
    check(len(lines) == 1, f"{name}: {len(lines)} stderr lines, expected 1: {proc.stderr.strip()[:300]}")
    check("Traceback" not in proc.stderr, f"{name}: a traceback on stderr")
    check(must_name in proc.stderr, f"{name}: stderr does not name {must_name!r}: {proc.stderr.strip()[:300]}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", required=True, help="the build tree's fixtures folder (models/, prompts/)")
    args = ap.parse_args()
    model = os.path.join(args.fixtures, "models", "llama2-tiny")
    prompts_file = os.path.join(args.fixtures, "prompts", "gsm8k.json")
    for p in (os.path.join(model, "config.json"), prompts_file):
        if not os.path.isfile(p):
            print(f"test_hf_trace: fixture {p} missing (build the kvconf_fixture_files target)", file=sys.stderr)
            return 1
    with open(prompts_file, encoding="utf-8") as f:
        prompts = json.load(f)["prompts"][:2]
    t0 = time.monotonic()

    # 1. step_draw is SplitMix64 and the sampler passes kvconf's hand-computed cases.
    try:
        hf.self_test()
    except AssertionError as e:
        check(False, f"self_test: {e}")

    with tempfile.TemporaryDirectory(prefix="kvconf-hf-") as tmp:
        # 2. The two configurations, run side by side (one torch thread each).
        configs = {
            "fp32": dict(dtype="float32", attention="eager", strategy="greedy", seed=0, hidden=True),
            "fp16": dict(dtype="float16", attention="sdpa", strategy="topk", seed=3, hidden=False),
        }
        procs = {}
        for key, c in configs.items():
            cmd = [sys.executable, ADAPTER, "--model", model, "--prompts", prompts_file, "--n", "2",
                   "--max-new-tokens", str(T), "--dtype", c["dtype"], "--attention", c["attention"],
                   "--strategy", c["strategy"], "--seed", str(c["seed"]), "--out", os.path.join(tmp, key)]
            if c["hidden"]:
                cmd.append("--hidden")
            procs[key] = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for key, p in procs.items():
            out, err = p.communicate(timeout=240)
            check(p.returncode == 0, f"adapter {key}: exit {p.returncode}: {err.strip()[-500:]}")
            check(len(out.strip().splitlines()) == 4, f"adapter {key}: {len(out.strip().splitlines())} lines, expected 4")

        version = importlib.metadata.version("transformers")
        traces = {}
        for key, c in configs.items():
            sampler = hf.Sampler(c["strategy"], 50, 0.9, 1.0, c["seed"])
            for p in prompts:
                for on_off, path in (("on", "cache_on"), ("off", "cache_off")):
                    name = hf.trace_filename(p["id"], c["dtype"], c["attention"], c["strategy"], c["seed"], on_off)
                    fp = os.path.join(tmp, key, name)
                    if not os.path.isfile(fp):
                        check(False, f"{key}: {name} not written")
                        continue
                    try:
                        meta, tensors = read_trace.load(fp)
                    except ValueError as e:
                        check(False, f"read_trace rejects {name}: {e}")
                        continue
                    traces[(key, p["id"], on_off)] = (meta, tensors)
                    lg = tensors["logits"]
                    want_dtype = {"float32": "torch.float32", "float16": "torch.float16"}[c["dtype"]]
                    check(tuple(lg.shape) == (T, 32000), f"{name}: logits shape {tuple(lg.shape)}")
                    check(str(lg.dtype) == want_dtype, f"{name}: logits dtype {lg.dtype}, expected {want_dtype}")
                    if c["hidden"]:
                        hs = tensors.get("hidden_states")
                        check(hs is not None and tuple(hs.shape) == (T, 3, 256),
                              f"{name}: hidden_states {None if hs is None else tuple(hs.shape)}, expected (8, 3, 256)")
                    else:
                        check("hidden_states" not in tensors, f"{name}: unexpected hidden_states")
                    check(meta["format"] == "kvconf.trace/1.2", f"{name}: format")
                    # The calls transformers reported: cache ON prefills the prompt, then feeds one token over the
                    # cache; cache OFF feeds the whole sequence over no cache at every step.
                    n, steps = len(meta["prompt_ids"]), len(meta["generated_ids"])
                    want = ([[n, 0]] + [[1, n + t - 1] for t in range(1, steps)] if meta["path"] == "cache_on"
                            else [[n + t, 0] for t in range(steps)])
                    check(meta["calls"] == want, f"{name}: calls {meta['calls']} != {want}")
                    # The cache object's own rows after each call: cache ON holds what it fed; cache OFF keeps none.
                    held = ([f + c0 for f, c0 in want] if meta["path"] == "cache_on" else [0] * steps)
                    check(meta["cache_after"] == held, f"{name}: cache_after {meta['cache_after']} != {held}")
                    check("forward pre-hook" in meta["calls_reported_by"], f"{name}: calls_reported_by")
                    check(meta["engine"] == {"name": "transformers", "version": version, "attention": c["attention"]},
                          f"{name}: engine {meta['engine']}")
                    check(meta["model"]["name"] == "llama2-tiny" and meta["model"]["vocab_size"] == 32000 and
                          meta["model"]["n_layers"] == 2 and meta["model"]["hidden_size"] == 256,
                          f"{name}: model {meta['model']}")
                    check(meta["dtype"] == c["dtype"] and meta["path"] == path, f"{name}: dtype/path")
                    check(meta["strategy"] == {"name": c["strategy"], "top_k": 50, "top_p": 0.9, "temperature": 1.0,
                                               "seed": c["seed"]}, f"{name}: strategy {meta['strategy']}")
                    check(meta["prompt_id"] == p["id"] and meta["prompt_ids"] == p["ids"], f"{name}: prompt")
                    check(len(meta["generated_ids"]) == T, f"{name}: {len(meta['generated_ids'])} tokens")
                    check(meta["draws"] == [hf.step_draw(c["seed"], t) for t in range(T)], f"{name}: draws")
                    # The stored token is kvconf's choice from the stored logits row and draw (greedy: the arg-max).
                    picks = [hf.sample(lg[t], sampler, meta["draws"][t]) for t in range(T)]
                    check(picks == meta["generated_ids"], f"{name}: tokens {meta['generated_ids']} != replay {picks}")
                    if c["strategy"] == "greedy":
                        am = [int(i) for i in lg.float().argmax(dim=1)]
                        check(am == meta["generated_ids"], f"{name}: greedy tokens are not the logits' arg-max")

        # 3. Pairs: shared draws; fp32 eager prefill logits bitwise equal (the same forward over the same prompt).
        import torch
        for key in configs:
            for p in prompts:
                on, off = traces.get((key, p["id"], "on")), traces.get((key, p["id"], "off"))
                if on is None or off is None:
                    continue
                check(on[0]["draws"] == off[0]["draws"], f"{key} {p['id']}: on and off draws differ")
                if key == "fp32":
                    a, b = on[1]["logits"][0], off[1]["logits"][0]
                    check(torch.equal(a.view(torch.int32), b.view(torch.int32)),
                          f"fp32 eager {p['id']}: logits row 0 not bitwise equal between paths")
                    check(on[0]["generated_ids"][0] == off[0]["generated_ids"][0], f"fp32 {p['id']}: first token")
                    check(torch.equal(on[1]["hidden_states"][0].view(torch.int32),
                                      off[1]["hidden_states"][0].view(torch.int32)),
                          f"fp32 eager {p['id']}: hidden_states row 0 not bitwise equal between paths")

        # 4. Bad input: exit 2 and one stderr line naming the file or field.
        missing = os.path.join(tmp, "no-such-model")
        expect_bad_input("missing model folder",
                         run_cli([ADAPTER, "--model", missing, "--prompts", prompts_file, "--out", tmp]), missing)
        not_json = os.path.join(tmp, "prompts.txt")
        with open(not_json, "w") as f:
            f.write("this is not JSON\n")
        expect_bad_input("prompt file not JSON",
                         run_cli([ADAPTER, "--model", model, "--prompts", not_json, "--out", tmp]), not_json)
        big = os.path.join(tmp, "big.json")
        with open(big, "w") as f:
            json.dump({"prompts": [{"id": "x", "text": "", "ids": [1, 32000]}]}, f)
        expect_bad_input("prompt id outside the vocabulary",
                         run_cli([ADAPTER, "--model", model, "--prompts", big, "--n", "1", "--out", tmp]), "ids")
        expect_bad_input("unknown --dtype",
                         run_cli([ADAPTER, "--model", model, "--prompts", prompts_file, "--dtype", "fp8",
                                  "--out", tmp]), "--dtype")
        no_cfg = os.path.join(tmp, "empty-model")
        os.makedirs(no_cfg)
        expect_bad_input("no config.json",
                         run_cli([ADAPTER, "--model", no_cfg, "--prompts", prompts_file, "--out", tmp]), "config.json")

        # 5. read_trace.py refuses a truncated file and another format version.
        src = os.path.join(tmp, "fp16", hf.trace_filename(prompts[0]["id"], "float16", "sdpa", "topk", 3, "on"))
        with open(src, "rb") as f:
            data = f.read()
        trunc = os.path.join(tmp, "truncated.safetensors")
        with open(trunc, "wb") as f:
            f.write(data[:len(data) - 1000])
        try:
            read_trace.load(trunc)
            check(False, "read_trace accepted a truncated file")
        except ValueError as e:
            check(trunc in str(e) and "truncated" in str(e), f"truncated: message {e}")
        proc = run_cli([READER, trunc])
        expect_bad_input("read_trace CLI on a truncated file", proc, trunc)

        from safetensors.torch import save_file
        meta, tensors = traces[("fp16", prompts[0]["id"], "on")]
        v2 = os.path.join(tmp, "format2.safetensors")
        save_file(tensors, v2, metadata={"kvconf.trace": json.dumps({**meta, "format": "kvconf.trace/2"})})
        try:
            read_trace.load(v2)
            check(False, "read_trace accepted format kvconf.trace/2")
        except ValueError as e:
            check(v2 in str(e) and "format" in str(e), f"format 2: message {e}")
        # A token id outside [0, V) and draws of the wrong length are refused too.
        bad_tok = os.path.join(tmp, "badtok.safetensors")
        save_file(tensors, bad_tok, metadata={"kvconf.trace": json.dumps(
            {**meta, "generated_ids": meta["generated_ids"][:-1] + [32000]})})
        try:
            read_trace.load(bad_tok)
            check(False, "read_trace accepted a token id of 32000")
        except ValueError as e:
            check("generated_ids" in str(e), f"bad token: message {e}")

    dt = time.monotonic() - t0
    if failures:
        print(f"test_hf_trace: {len(failures)} check(s) failed ({dt:.1f} s)", file=sys.stderr)
        return 1
    print(f"test_hf_trace: all checks passed ({len(traces)} traces, {dt:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
