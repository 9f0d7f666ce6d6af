#!/usr/bin/python3
"""A tiny release LRT checkpoint and the release's own CORE results on the bundle, example for example.

    /usr/bin/python3 scripts/core_reference/release_results.py --release DIR [--bundle DIR] [--out DIR]

Defaults: --bundle tests/data/core/bundle, --out tests/data/core. Writes to --out:

  release_lrt.safetensors   the model in the release's state_dict layout (F32, rotary cos/sin not
                            stored), "__metadata__": {"model_config": <GPTConfig fields as JSON>}
                            (written by hand: the safetensors package is not used)
  release_lrt_config.json   the GPTConfig fields
  release_results.tsv       per example: task, idx (in the shuffled data), correct (0/1), margin,
                            details (see the header comment it carries)
  release_core.json         what the release's scripts/base_eval.py evaluate_core returns for the
                            bundle ({"results", "centered_results", "core_metric"})

The model: the release's GPT with use_interleaved=True (the LRT: interleaved projections, init value
embeds, interleaved lambdas, triple gates), built on the CPU, initialised by its init_weights() under
torch.manual_seed(0), then N(0, 0.05^2) noise from torch.Generator().manual_seed(1234) added to every
parameter in state_dict order (so that gates, lambdas and the zero-initialised projections matter),
evaluated in float32 (rotary tables in bfloat16, as the release builds them). evaluate_example
forwards the model with h_final_prev=None (the zero-memory pass). The tokenizer is bytes: ids 0..255
are the UTF-8 bytes, BOS = 256.
"""
import argparse
import dataclasses
import json
import os
import struct
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.dont_write_bytecode = True  # no __pycache__ in the tree
sys.path.insert(0, HERE)
import release_env  # noqa: E402
from render_prompts import fewshot_indices, load_data, load_tasks, render  # noqa: E402

RELEASE_COMMIT = "e0d0f6e647c07a93d2b4b6f5bd328a8d5afbc7be"

MODEL_CONFIG = dict(
    sequence_len=32, vocab_size=257, n_layer=2, n_head=2, n_kv_head=1, n_embd=32,
    window_pattern="SL", use_interleaved=True,
)
NOISE_STD = 0.05
NOISE_SEED = 1234


class ByteTokenizer:
    """The release tokenizer's interface (as core_eval uses it) over UTF-8 bytes, BOS = 256."""

    bos = 256

    def get_bos_token_id(self):
        return self.bos

    def get_vocab_size(self):
        return 257

    def _encode(self, text, prepend):
        ids = list(text.encode("utf-8"))
        if prepend is not None:
            ids.insert(0, self.bos if prepend == "<|bos|>" else int(prepend))
        return ids

    def __call__(self, text, prepend=None, num_threads=None):
        if isinstance(text, str):
            return self._encode(text, prepend)
        return [self._encode(t, prepend) for t in text]

    encode = __call__


def build_model(gpt):
    config = gpt.GPTConfig(**MODEL_CONFIG)
    model = gpt.GPT(config)
    torch.manual_seed(0)
    model.init_weights()
    gen = torch.Generator().manual_seed(NOISE_SEED)
    with torch.no_grad():
        params = dict(model.named_parameters())
        for name, t in model.state_dict().items():
            assert name in params, f"{name}: a state_dict entry that is not a parameter"
            params[name].add_(torch.randn(t.shape, generator=gen) * NOISE_STD)
    model.eval()
    assert model.cos.dtype == torch.bfloat16 and model.cos.size(1) == 10 * config.sequence_len
    assert not hasattr(model, "max_seq_len"), "evaluate_example would crop the prompts"
    return config, model


def write_safetensors(path, state_dict, metadata):
    header = {"__metadata__": metadata}
    blobs, offset = [], 0
    for name, t in state_dict.items():
        t = t.detach().to(torch.float32).contiguous()
        data = struct.pack(f"<{t.numel()}f", *t.flatten().tolist())
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """Reads the file back (checks the writer): {name: tensor}, metadata."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__")
    out = {}
    for name, e in header.items():
        a, b = e["data_offsets"]
        vals = struct.unpack(f"<{(b - a) // 4}f", raw[8 + n + a:8 + n + b])
        out[name] = torch.tensor(vals, dtype=torch.float32).view(e["shape"])
    return out, meta


def example_details(ce, model, tok, data, idx, task_meta):
    """The steps of evaluate_example, with the release's own functions, keeping what it discards:
    returns (correct, margin, details, n_tokens_longest)."""
    item = data[idx]
    fs = fewshot_indices(idx, len(data), task_meta["num_fewshot"])
    prompts = render(ce, item, task_meta, [data[i] for i in fs])
    ttype = task_meta["task_type"]
    batch = {"multiple_choice": ce.batch_sequences_mc, "schema": ce.batch_sequences_schema,
             "language_modeling": ce.batch_sequences_lm}[ttype]
    tokens, start_idxs, end_idxs = batch(tok, prompts)
    input_ids = ce.stack_sequences(tokens, tok.get_bos_token_id())
    losses, predictions = ce.forward_model(model, input_ids)
    longest = max(len(t) for t in tokens)
    if ttype == "language_modeling":
        si, ei = start_idxs[0], end_idxs[0]
        with torch.no_grad():
            logits = model(input_ids)
        top2 = logits[0, si - 1:ei - 1].topk(2, dim=-1).values
        margin = (top2[:, 0] - top2[:, 1]).min().item()
        correct = bool(torch.all(predictions[0, si - 1:ei - 1] == input_ids[0, si:ei]).item())
        return correct, margin, f"{si},{ei}", longest
    mean_losses = [losses[i, si - 1:ei - 1].mean().item() for i, (si, ei) in enumerate(zip(start_idxs, end_idxs))]
    assert all(x == x for x in mean_losses), "an option with no continuation tokens (NaN mean loss)"
    pred_idx = mean_losses.index(min(mean_losses))
    s = sorted(mean_losses)
    return pred_idx == item["gold"], s[1] - s[0], ",".join(f"{x:.9g}" for x in mean_losses), longest


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--release", required=True, help=f"a checkout (export) of the release at {RELEASE_COMMIT[:7]}")
    ap.add_argument("--bundle", default=os.path.join(ROOT, "tests/data/core/bundle"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/data/core"))
    args = ap.parse_args()
    torch.set_num_threads(1)  # one summation order, whatever the machine
    rel = release_env.load_release(args.release, with_base_eval=True)
    ce = rel.core_eval
    print(f"torch {torch.__version__}; stand-ins: {', '.join(release_env.STAND_INS) or 'none'}")

    config, model = build_model(rel.gpt)
    cfg = dataclasses.asdict(config)
    sd = model.state_dict()
    assert "cos" not in sd and "sin" not in sd
    st_path = os.path.join(args.out, "release_lrt.safetensors")
    write_safetensors(st_path, sd, {"model_config": json.dumps(cfg, separators=(",", ":"))})
    back, meta = read_safetensors(st_path)
    assert list(back) == list(sd) and all(torch.equal(back[k], sd[k]) for k in sd)
    assert json.loads(meta["model_config"]) == cfg
    with open(os.path.join(args.out, "release_lrt_config.json"), "w", encoding="utf-8", newline="\n") as f:
        f.write(json.dumps(cfg, indent=2) + "\n")

    tok = ByteTokenizer()
    rows, per_task = [], {}
    max_len = 0
    for label, task_meta in load_tasks(args.bundle):
        data, _order = load_data(args.bundle, task_meta)
        flags, over = [], 0
        for idx in range(len(data)):
            res = bool(ce.evaluate_example(idx, model, tok, data, "cpu", task_meta))
            correct, margin, details, longest = example_details(ce, model, tok, data, idx, task_meta)
            assert correct == res, f"{label} {idx}: recomputed {correct}, evaluate_example {res}"
            flags.append(res)
            over += longest > config.sequence_len
            max_len = max(max_len, longest)
            rows.append(f"{label}\t{idx}\t{int(res)}\t{margin:.9g}\t{details}")
        per_task[label] = (flags, over)

    assert max_len <= 10 * config.sequence_len, f"a prompt of {max_len} tokens overruns the rotary cache"

    # The release's evaluate_core over the bundle (NANOCHAT_BASE_DIR/eval_bundle -> the bundle).
    with tempfile.TemporaryDirectory() as base:
        os.symlink(os.path.abspath(args.bundle), os.path.join(base, "eval_bundle"))
        os.environ["NANOCHAT_BASE_DIR"] = base
        core = rel.base_eval.evaluate_core(model, tok, "cpu", max_per_task=-1)
    for label, (flags, _over) in per_task.items():
        acc = torch.tensor([float(x) for x in flags], dtype=torch.float32).mean().item()
        assert acc == core["results"][label], (label, acc, core["results"][label])

    with open(os.path.join(args.out, "release_results.tsv"), "w", encoding="utf-8", newline="\n") as f:
        f.write(f"# made by scripts/core_reference/release_results.py: the release {RELEASE_COMMIT} (nanochat/core_eval.py\n")
        f.write(f"# evaluate_example) on torch {torch.__version__}, CPU, float32; model release_lrt.safetensors;\n")
        f.write("# data: bundle/, each task shuffled with random.Random(1337), no max_per_task.\n")
        f.write("# task<TAB>idx<TAB>correct<TAB>margin<TAB>details; margin: multiple_choice/schema = the difference\n")
        f.write("# of the two smallest option mean losses, language_modeling = the smallest top-1 minus top-2 logit\n")
        f.write("# over the continuation positions; details: the option mean losses (9 significant digits), or\n")
        f.write("# the continuation's start,end token indices (BOS included) for language_modeling.\n")
        for r in rows:
            f.write(r + "\n")
    with open(os.path.join(args.out, "release_core.json"), "w", encoding="utf-8", newline="\n") as f:
        f.write(json.dumps(core, indent=2) + "\n")

    margins = [float(r.split("\t")[3]) for r in rows]
    print(f"config: {json.dumps(cfg)}")
    print(f"longest prompt: {max_len} tokens; margins < 1e-5: {sum(m < 1e-5 for m in margins)} of {len(margins)}")
    for label, (flags, over) in per_task.items():
        print(f"{label}: {len(flags)} examples, accuracy {core['results'][label]:.4f}, "
              f"centered {core['centered_results'][label]:.4f}, {over} longer than sequence_len")
    print(f"CORE {core['core_metric']:.6f}")


if __name__ == "__main__":
    main()
