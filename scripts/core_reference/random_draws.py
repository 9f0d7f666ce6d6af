#!/usr/bin/env python3
"""Reference draws of CPython's random.Random for lrt/eval/py_random.hpp (PyRandom).

Prints tests/data/core/random_draws.txt (tests/unit/eval/test_py_random.cpp replays it):

    python3 scripts/core_reference/random_draws.py > tests/data/core/random_draws.txt

One draw sequence per line, each from a fresh Random(SEED):
    getrandbits SEED K v0 v1 v2 v3 v4      five getrandbits(K) in a row
    randbelow SEED N v0 v1 v2 v3 v4        five _randbelow(N) in a row
    skip SEED S v0 v1 v2                   getrandbits(32) three times after S of them
    shuffle SEED N v0 ... v(N-1)           shuffle(list(range(N)))
    sample SEED N IDX K ALGO v0 ... v(K-1) sample([i for i in range(N) if i != IDX], K)
                                           with SEED = 1234 + IDX (nanochat's CORE few-shot
                                           draw); ALGO: pool or set, by sample's setsize rule
Plain python3, no third-party modules.
"""
import math
import random
import sys

SEEDS = [0, 1, 1337, *range(1234, 1241), 1234 + 999, 2**32 - 1, 2**32, 2**32 + 5,
         2**40 + 3, 2**62 + 7, 2**64 - 1, -5, -(2**63)]
BITS = [1, 7, 31, 32, 33, 53, 64]
BELOW = [1, 2, 3, 10, 1000, 2**31 + 1, 2**40, 2**63 + 1, 2**64 - 1]
SKIPS = [(1337, 620), (1337, 624), (1337, 1000), (0, 1247), (2**40 + 3, 5000)]
SHUFFLE = [0, 1, 2, 5, 100, 1000]
# (N, IDX, K): the population has N - 1 items, drawn from by the pool algorithm up to setsize
# items, else by the set one. setsize is 21 for K <= 5; 21 + 4**3 = 85 for 6 <= K <= 21 (K * 3 =
# 63 < 64); 277 for 22 <= K <= 85 (66 > 64); 1045 for K = 100. Each pair below straddles one.
SAMPLE = [
    (5, 0, 0), (2, 0, 1), (11, 3, 3), (11, 10, 10), (22, 5, 5), (23, 5, 5), (31, 0, 5),
    (101, 7, 3), (1001, 42, 5), (5000, 4321, 5), (23, 2, 6), (39, 1, 6), (86, 1, 6), (87, 1, 6),
    (86, 9, 10), (87, 9, 10), (501, 100, 10), (5000, 4999, 10), (86, 20, 21), (87, 20, 21),
    (278, 21, 22), (279, 21, 22), (1046, 3, 100), (1047, 3, 100), (2001, 0, 100), (1000, 999, 1),
]


def setsize(k):
    s = 21
    if k > 5:
        s += 4 ** math.ceil(math.log(k * 3, 4))  # as Lib/random.py's sample
    return s


def line(*fields):
    print(" ".join(str(f) for f in fields))


def main():
    print("# scripts/core_reference/random_draws.py, Python %s" % sys.version.split()[0])
    for seed in SEEDS:
        for k in BITS:
            rng = random.Random(seed)
            line("getrandbits", seed, k, *[rng.getrandbits(k) for _ in range(5)])
    for seed in SEEDS:
        for n in BELOW:
            rng = random.Random(seed)
            line("randbelow", seed, n, *[rng._randbelow(n) for _ in range(5)])
    for seed, s in SKIPS:
        rng = random.Random(seed)
        for _ in range(s):
            rng.getrandbits(32)
        line("skip", seed, s, *[rng.getrandbits(32) for _ in range(3)])
    for n in SHUFFLE:
        rng = random.Random(1337)
        x = list(range(n))
        rng.shuffle(x)
        line("shuffle", 1337, n, *x)
    for n, idx, k in SAMPLE:
        rng = random.Random(1234 + idx)
        population = [i for i in range(n) if i != idx]
        algo = "pool" if len(population) <= setsize(k) else "set"
        line("sample", 1234 + idx, n, idx, k, algo, *rng.sample(population, k))


if __name__ == "__main__":
    main()
