#!/usr/bin/python3
"""Renders every prompt of the bundle's tasks with the release's own code (nanochat/core_eval.py).

    /usr/bin/python3 scripts/core_reference/render_prompts.py --release DIR [--bundle DIR] [--out FILE]

Defaults: --bundle tests/data/core/bundle, --out tests/data/core/prompts.jsonl.

For every task of core.yaml (yaml.safe_load, as scripts/base_eval.py reads it): the data read as
evaluate_core reads it (json.loads per line), shuffled with random.Random(1337); then for every
example idx the few-shot indices exactly as evaluate_example draws them
(random.Random(1234 + idx).sample([i for i in range(len(data)) if i != idx], k)) and the prompts of
render_prompts_mc / render_prompts_schema / render_prompts_lm. One JSON object a line:

  {"task": label, "max_per_task": -1, "idx": -1, "order": [line numbers of the shuffled data]}
  {"task": label, "max_per_task": -1, "idx": i, "fewshot": [...], "prompts": [...]}

and the same again with "max_per_task": 5 (data cut to its first 5 after the shuffle, as
evaluate_core does with --max-per-task 5, so the few-shot population is those 5) for MAX5_TASKS.
"""
import argparse
import json
import os
import random
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.dont_write_bytecode = True  # no __pycache__ in the tree
sys.path.insert(0, HERE)
import release_env  # noqa: E402

MAX5_TASKS = ["lrt_next_phrase_3shot", "lrt_continue_2shot"]


def load_tasks(bundle):
    with open(os.path.join(bundle, "core.yaml"), "r", encoding="utf-8") as f:
        config = yaml.safe_load(f)
    tasks = []
    for task in config["icl_tasks"]:
        task_meta = {
            "task_type": task["icl_task_type"],
            "dataset_uri": task["dataset_uri"],
            "num_fewshot": task["num_fewshot"][0],
            "continuation_delimiter": task.get("continuation_delimiter", " "),
        }
        tasks.append((task["label"], task_meta))
    return tasks


def load_data(bundle, task_meta, max_per_task=-1):
    """(data, order): evaluate_core's data (shuffled, cut) and the original line number of each item."""
    with open(os.path.join(bundle, "eval_data", task_meta["dataset_uri"]), "r", encoding="utf-8") as f:
        data = [json.loads(line.strip()) for line in f]
    original = list(data)
    order = list(range(len(data)))
    random.Random(1337).shuffle(data)
    random.Random(1337).shuffle(order)  # the same permutation: shuffle depends only on the length
    assert data == [original[i] for i in order]
    if max_per_task > 0:
        data, order = data[:max_per_task], order[:max_per_task]
    return data, order


def fewshot_indices(idx, n, num_fewshot):
    """evaluate_example's draw."""
    if num_fewshot <= 0:
        return []
    rng = random.Random(1234 + idx)
    available_indices = [i for i in range(n) if i != idx]
    return rng.sample(available_indices, num_fewshot)


def render(core_eval, item, task_meta, fewshot_examples):
    fn = {
        "multiple_choice": core_eval.render_prompts_mc,
        "schema": core_eval.render_prompts_schema,
        "language_modeling": core_eval.render_prompts_lm,
    }[task_meta["task_type"]]
    return fn(item, task_meta["continuation_delimiter"], fewshot_examples)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--release", required=True, help="a checkout (export) of the release")
    ap.add_argument("--bundle", default=os.path.join(ROOT, "tests/data/core/bundle"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/data/core/prompts.jsonl"))
    args = ap.parse_args()
    rel = release_env.load_release(args.release)

    tasks = load_tasks(args.bundle)
    lines = []
    runs = [(label, meta, -1) for label, meta in tasks] + [(label, meta, 5) for label, meta in tasks if label in MAX5_TASKS]
    for label, task_meta, max_per_task in runs:
        data, order = load_data(args.bundle, task_meta, max_per_task)
        lines.append({"task": label, "max_per_task": max_per_task, "idx": -1, "order": order})
        for idx in range(len(data)):
            fs = fewshot_indices(idx, len(data), task_meta["num_fewshot"])
            prompts = render(rel.core_eval, data[idx], task_meta, [data[i] for i in fs])
            lines.append({"task": label, "max_per_task": max_per_task, "idx": idx, "fewshot": fs, "prompts": prompts})
        print(f"{label} (max_per_task {max_per_task}): {len(data)} examples")
    with open(args.out, "w", encoding="utf-8", newline="\n") as f:
        for obj in lines:
            f.write(json.dumps(obj, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
