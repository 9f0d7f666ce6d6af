// lrt/backend/cuda/nn.cuh: NnBackend<cuda::Device>, the transformer's fused kernels on the GPU
// (RMSNorm, RoPE, softmax, softcapped cross-entropy, embedding, causal attention), forward and
// backward, float and double. Semantics are those of backend/cpu/{nn,attention}.hpp; only the
// floating-point summation order differs.
//
// - Row kernels (rmsnorm, softmax, cross-entropy, embedding): one block per row, each thread
//   folds a strided subset of the row in order, then a fixed warp-shuffle + shared-memory tree
//   combines them. Block sizes depend only on the shapes, so results are deterministic.
// - RoPE: one thread per (b, t, h, j < Dh/2) pair, grid-stride.
// - Embedding backward: ids are copied to the host and counting-sorted (rows grouped by id, in
//   increasing row order); one block per distinct id adds its rows into the table's gradient in
//   row order, as the CPU does. No atomics: deterministic.
// - Attention: one warp per (b, h, query); lane l owns head dims l, l + 32, ... (Dh <= 256).
//   The forward walks the query's keys 4 at a time with an online softmax (running max and
//   rescaled accumulator) and saves lse. The backward computes dq (and delta = rowsum(dO * O))
//   with one warp per (b, h, query), and dk, dv with one warp per (b, KV head, key) that walks
//   the query heads of its group and the (contiguous, found by binary search) queries that see
//   the key. Every output element is written by exactly one warp: deterministic, no atomics,
//   exact zeros for keys no query sees. qpos is copied to the host and validated as on the CPU.
// All views may be strided (e.g. KV-cache slices). Outputs must not overlap inputs, except
// that the row kernels and RoPE may run in place (output view == input view).
// Launches (cuda::detail::launch) run on cuda::stream() and are checked; kernels run
// asynchronously.
// Not here: tensor-core tiles, half precision, Dh > 256 in attention.
//
// One file per op: rmsnorm.cuh, rope.cuh (RoPE and RoPE + RMSNorm), softmax.cuh,
// cross_entropy.cuh, embedding.cuh, attention.cuh (+ attention_gemm.cuh); nn_common.cuh holds
// what they share, nn_backend.cuh the NnBackend<cuda::Device> class. This header includes them
// all; the argument checks shared with the CPU are backend/nn_checks.hpp's.
#pragma once

#include "attention.cuh"
#include "attention_gemm.cuh"
#include "cross_entropy.cuh"
#include "embedding.cuh"
#include "nn_backend.cuh"
#include "nn_common.cuh"
#include "rmsnorm.cuh"
#include "rope.cuh"
#include "softmax.cuh"
