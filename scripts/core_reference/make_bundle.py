#!/usr/bin/python3
r"""Writes a small CORE eval bundle (the layout of nanochat's eval_bundle) made from text lrt ships.

    /usr/bin/python3 scripts/core_reference/make_bundle.py --release DIR [--text FILE] [--out DIR]

Defaults: --text tests/data/tokenizer/lrt_train.txt, --out tests/data/core/bundle.
Writes DIR/core.yaml, DIR/eval_meta_data.csv and DIR/eval_data/<dataset_uri> (JSON lines).
Deterministic: a fixed seed per task. Seven tasks need only the standard library; lrt_greedy is made
with the reference model of release_results.py (so --release, torch).

Tasks (byte-level prompts; the reference model's sequence_len is 32, its rotary cache 320):
  lrt_next_word         multiple_choice    0-shot  short prompts (all fit in 32 tokens); one item's
                                                   choices share two bytes, one's (≤ ≥ ≠ ≡) share
                                                   the first two bytes of a UTF-8 character
  lrt_next_phrase_3shot multiple_choice    3-shot  delimiter "\nAnswer: ", choices of 1-3 words
  lrt_halves            schema             0-shot
  lrt_halves_1shot      schema             1-shot  delimiter ': ' (single-quoted in the YAML)
  lrt_continue          language_modeling  0-shot  contexts with stray leading/trailing blanks
  lrt_continue_2shot    language_modeling  2-shot  delimiter "\n"; its file escapes non-ASCII (\uXXXX)
  lrt_mixed_length      language_modeling  1-shot  mostly tiny items, a third long ones: some
                                                   prompts fit in sequence_len, others do not
  lrt_greedy            language_modeling  0-shot  delimiter "" (empty); continuations the model
                                                   predicts, so that some examples are correct
"""
import argparse
import csv
import io
import json
import os
import random
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.dont_write_bytecode = True  # no __pycache__ in the tree
sys.path.insert(0, HERE)


def load_lines(path):
    """Prose lines of the text: start with a letter, no table or code syntax; markup removed."""
    out = []
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not line[:1].isalpha() or any(c in line for c in "|=<>{}"):
                continue
            line = re.sub(r"\]\([^)]*\)", "]", line)  # drop link targets
            line = re.sub(r"[`*\[\]]", "", line)
            words = line.split()
            if len(words) >= 8:
                out.append(words)
    return out


def bare(word):
    """A word without surrounding punctuation (None if nothing is left)."""
    w = word.strip(".,;:!?()\"'")
    return w or None


def is_prefix_free(options):
    """No option is a prefix of another (else the release's common prefix swallows one option)."""
    enc = [o.encode("utf-8") for o in options]
    return all(not (i != j and b.startswith(a)) for i, a in enumerate(enc) for j, b in enumerate(enc))


class Source:
    def __init__(self, lines):
        self.lines = lines
        self.nonascii = [w for w in lines if any(ord(c) > 127 for c in " ".join(w))]
        vocab = sorted({b for ws in lines for w in ws if (b := bare(w))})
        self.vocab = vocab
        self.by_len = {}
        for w in vocab:
            self.by_len.setdefault(min(len(w), 10), []).append(w)

    def line(self, rng, nonascii=False):
        return list(rng.choice(self.nonascii if nonascii else self.lines))

    def distractor_word(self, rng, avoid):
        while True:
            length = rng.choice(sorted(self.by_len))  # varied lengths: pick the length first
            w = rng.choice(self.by_len[length])
            if w not in avoid:
                return w

    def phrase(self, rng, n):
        ws = self.line(rng)
        i = rng.randrange(0, len(ws) - n + 1)
        return " ".join(ws[i:i + n])


def place_gold(rng, true, others):
    gold = rng.randrange(len(others) + 1)
    options = list(others)
    options.insert(gold, true)
    return options, gold


# ---------------------------------------------------------------------------- tasks

def task_next_word(src, n):
    """MC 0-shot: query = two words, choices = the true next word and 1-3 other words.
    Item 5 has two choices sharing their first two bytes; item 9 has choices among the
    relation signs ≤ ≥ ≠ ≡ (E2 89 xx in UTF-8), so the common prefix ends inside a character."""
    rng = random.Random(101)
    signs = ["≤", "≥", "≠", "≡"]
    sign_spots = [(ws[i - 2], ws[i - 1], ws[i]) for ws in src.lines for i in range(2, len(ws)) if ws[i] in signs]
    items = []
    while len(items) < n:
        k = len(items)
        if k == 9:
            a, b, true = rng.choice(sign_spots)
            query = f"{a} {b}"
            others = rng.sample([x for x in signs if x != true], 2)
        else:
            ws = src.line(rng, nonascii=(k % 6 == 2))
            i = rng.randrange(2, len(ws))
            true = bare(ws[i])
            if true is None:
                continue
            query = f"{ws[i - 2]} {ws[i - 1]}"
            if len(query.encode()) > 18:
                continue
            if k == 5:
                if len(true) < 3:
                    continue
                others = [true[:2] + "x" + true[2:]]
            else:
                others = []
                while len(others) < 1 + k % 3:
                    others.append(src.distractor_word(rng, avoid={true, *others}))
        choices, gold = place_gold(rng, true, others)
        if not is_prefix_free(choices):
            continue
        items.append({"query": query, "choices": choices, "gold": gold})
    return items


def task_next_phrase(src, n):
    """MC 3-shot: choices are phrases of 1-3 words."""
    rng = random.Random(202)
    items = []
    while len(items) < n:
        k = len(items)
        ws = src.line(rng, nonascii=(k % 5 == 1))
        i = rng.randrange(2, len(ws) - 1)
        m = rng.randint(1, min(3, len(ws) - i))
        true = " ".join(ws[i:i + m])
        query = f"After '{ws[i - 2]} {ws[i - 1]}'?"
        if len(query.encode()) > 28 or len(true.encode()) > 24:
            continue
        others = []
        while len(others) < 1 + k % 3:
            p = src.phrase(rng, rng.randint(1, 3))
            if p != true and p not in others and len(p.encode()) <= 24:
                others.append(p)
        choices, gold = place_gold(rng, true, others)
        if not is_prefix_free(choices):
            continue
        items.append({"query": query, "choices": choices, "gold": gold})
    return items


def task_halves(src, n, seed, max_half):
    """Schema: the true first half of a word window and 1-3 other first halves, shared second half."""
    rng = random.Random(seed)
    items = []
    while len(items) < n:
        k = len(items)
        ws = src.line(rng, nonascii=(k % 5 == 3))
        w = rng.randint(4, 6)
        i = rng.randrange(0, len(ws) - w + 1)
        cut = rng.randint(2, w - 2)
        first, second = " ".join(ws[i:i + cut]), " ".join(ws[i + cut:i + w])
        if len(first.encode()) > max_half or len(second.encode()) > max_half:
            continue
        others = []
        while len(others) < 1 + k % 3:
            p = src.phrase(rng, rng.randint(1, 3))
            if p != first and p not in others and len(p.encode()) <= max_half:
                others.append(p)
        options, gold = place_gold(rng, first, others)
        items.append({"context_options": options, "continuation": second, "gold": gold})
    return items


PADS = ["", " ", "\n", " \n", "  ", "\t", "\n\n"]


def task_continue(src, n, seed, max_ctx, max_cont):
    """LM: a prefix of a line and its next 1-3 words; some contexts padded with blanks."""
    rng = random.Random(seed)
    items = []
    while len(items) < n:
        k = len(items)
        ws = src.line(rng, nonascii=(k % 5 == 4))
        c = rng.randint(2, 4)
        m = rng.randint(1, 3)
        if c + m > len(ws):
            continue
        i = rng.randrange(0, len(ws) - c - m + 1)
        context = " ".join(ws[i:i + c])
        continuation = " ".join(ws[i + c:i + c + m])
        if len(context.encode()) > max_ctx or len(continuation.encode()) > max_cont:
            continue
        lead = " " if k % 7 == 3 else ""
        context = lead + context + PADS[k % len(PADS)]
        items.append({"context": context, "continuation": continuation})
    return items


def task_mixed_length(src, n):
    """LM 1-shot: two thirds tiny items (a short word and the next), a third long ones."""
    rng = random.Random(707)
    items = []
    while len(items) < n:
        k = len(items)
        ws = src.line(rng, nonascii=(k % 8 == 5))
        if k % 3 == 2:  # long: a 10-14 word context, 2-3 words on
            c, m = rng.randint(10, 14), rng.randint(2, 3)
            if c + m > len(ws):
                continue
            i = rng.randrange(0, len(ws) - c - m + 1)
            context, continuation = " ".join(ws[i:i + c]), " ".join(ws[i + c:i + c + m])
            if len(context.encode()) > 100:
                continue
        else:  # tiny: one word of at most 4 bytes, the next word of at most 4 bytes
            i = rng.randrange(0, len(ws) - 1)
            context, continuation = ws[i], ws[i + 1]
            if len(context.encode()) > 4 or len(continuation.encode()) > 4:
                continue
        items.append({"context": context + (" " if k % 4 == 1 else ""), "continuation": continuation})
    return items


def task_greedy(src, n, release):
    """LM 0-shot with an empty delimiter, made with the reference model (release_results.py's): a
    context and the 1-3 bytes the model itself predicts greedily after it (printable ASCII, each
    top-1 logit at least GREEDY_GAP above the runner-up), so that evaluate_example finds these
    correct; every third item has its last byte changed, so that it is wrong by one byte. (The other
    language-modelling tasks are all wrong for a random byte-level model.)"""
    import torch
    import release_env
    import release_results
    rel = release_env.load_release(release)
    torch.set_num_threads(1)
    _config, model = release_results.build_model(rel.gpt)
    tok = release_results.ByteTokenizer()
    rng = random.Random(808)
    items, seen = [], set()
    while len(items) < n:
        k = len(items)
        ws = src.line(rng, nonascii=(k % 5 == 1))
        c = rng.randint(1, 4)
        i = rng.randrange(0, len(ws) - c + 1)
        context = " ".join(ws[i:i + c]).strip()
        if len(context.encode()) > 24 or context in seen:
            continue
        ids = tok(context, prepend=tok.get_bos_token_id())
        greedy = []
        for _ in range(1 + k % 3):
            with torch.no_grad():
                logits = model(torch.tensor([ids + greedy]))[0, -1]
            top2 = logits.topk(2)
            b = top2.indices[0].item()
            if (top2.values[0] - top2.values[1]).item() < GREEDY_GAP or not 0x21 <= b <= 0x7E:
                break
            greedy.append(b)
        else:
            if k % 3 == 2:  # wrong in the last byte only
                greedy[-1] = 0x21 + (greedy[-1] - 0x21 + 1 + rng.randrange(93)) % 94
            seen.add(context)
            items.append({"context": context + PADS[k % len(PADS)], "continuation": bytes(greedy).decode("ascii")})
    return items


GREEDY_GAP = 0.02

# ---------------------------------------------------------------------------- writing

TASKS = [
    # label, dataset_uri, type, shots, delimiter (None = absent), yaml spelling, builder, category
    ("lrt_next_word", "lrt_text/next_word.jsonl", "multiple_choice", 0, None, None,
     lambda s: task_next_word(s, 20), "language understanding"),
    ("lrt_next_phrase_3shot", "lrt_text/next_phrase.jsonl", "multiple_choice", 3, "\nAnswer: ", '"\\nAnswer: "',
     lambda s: task_next_phrase(s, 16), "language understanding"),
    ("lrt_halves", "lrt_text/halves.jsonl", "schema", 0, None, None,
     lambda s: task_halves(s, 16, 303, 20), "commonsense reasoning"),
    ("lrt_halves_1shot", "lrt_text/halves_1shot.jsonl", "schema", 1, ": ", "': '",
     lambda s: task_halves(s, 14, 404, 22), "commonsense reasoning"),
    ("lrt_continue", "lrt_text/continue.jsonl", "language_modeling", 0, None, None,
     lambda s: task_continue(s, 20, 505, 24, 16), "language understanding"),
    ("lrt_continue_2shot", "lrt_text/continue_2shot.jsonl", "language_modeling", 2, "\n", '"\\n"',
     lambda s: task_continue(s, 16, 606, 30, 20), "symbolic problem solving, lrt text"),
    ("lrt_mixed_length", "lrt_text/mixed_length.jsonl", "language_modeling", 1, None, None,
     lambda s: task_mixed_length(s, 24), "reading comprehension"),
    ("lrt_greedy", "lrt_text/greedy.jsonl", "language_modeling", 0, "", '""',
     lambda s: task_greedy(s, 15, ARGS.release), "language understanding"),
]
ARGS = None

ASCII_ONLY = {"lrt_continue_2shot"}  # written with \uXXXX escapes: json.loads must decode them


def baseline(task_type, items):
    if task_type == "language_modeling":
        return 0.0
    key = "choices" if task_type == "multiple_choice" else "context_options"
    return round(100.0 * sum(1.0 / len(it[key]) for it in items) / len(items), 1)


def fmt_baseline(b):
    return str(int(b)) if b == int(b) else repr(b)


def write_yaml(path):
    out = io.StringIO()
    out.write("# CORE tasks for lrt's tests, in the layout of DCLM's core.yaml (made by\n")
    out.write("# scripts/core_reference/make_bundle.py from tests/data/tokenizer/lrt_train.txt).\n")
    out.write("icl_tasks:\n")
    for label, uri, ttype, shots, _delim, spelled, _b, _c in TASKS:
        out.write(f"- label: {label}\n")
        out.write(f"  dataset_uri: {uri}\n")
        out.write(f"  num_fewshot: [{shots}]\n")
        out.write(f"  icl_task_type: {ttype}\n")
        if spelled is not None:
            comment = "  # separates questions from answers" if label == "lrt_next_phrase_3shot" else ""
            out.write(f"  continuation_delimiter: {spelled}{comment}\n")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(out.getvalue())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--text", default=os.path.join(ROOT, "tests/data/tokenizer/lrt_train.txt"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/data/core/bundle"))
    ap.add_argument("--release", required=True,
                    help="a checkout (export) of the release: task lrt_greedy is made with the reference model")
    global ARGS
    args = ARGS = ap.parse_args()

    src = Source(load_lines(args.text))
    os.makedirs(os.path.join(args.out, "eval_data"), exist_ok=True)
    meta_rows = []
    for label, uri, ttype, shots, _delim, _spelled, build, category in TASKS:
        items = build(src)
        path = os.path.join(args.out, "eval_data", uri)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            for it in items:
                f.write(json.dumps(it, ensure_ascii=label in ASCII_ONLY) + "\n")
        meta_rows.append([label, category, ttype.replace("_", " "), str(shots), fmt_baseline(baseline(ttype, items)),
                          "" if ttype == "language_modeling" else "yes"])
        print(f"{label}: {len(items)} items -> {os.path.relpath(path, args.out)}")

    write_yaml(os.path.join(args.out, "core.yaml"))
    # The real eval_meta_data.csv lists its rows in its own order and has rows for tasks core.yaml
    # does not run; so does this one (reversed order, one extra row).
    rows = list(reversed(meta_rows))
    rows.insert(3, ["lrt_not_in_core_yaml", "world knowledge", "language modeling", "5", "0", ""])
    with open(os.path.join(args.out, "eval_meta_data.csv"), "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["Eval Task", "Task Category", "Task Type", "#shots", "Random baseline", "Centered Metric?"])
        w.writerows(rows)


if __name__ == "__main__":
    main()
