// lrt/lrt.hpp: the whole library on the CPU. Safe with any C++20 compiler (no CUDA headers).
//
//   #include <lrt/lrt.hpp>
//   lrt::Tensor<float, 2> a({2, 3}), b({2, 3});
//   a = lrt::uniform<float>(a.shape(), /*seed=*/1);
//   b = a * 2.f + lrt::exp(a);            // one fused pass, no temporaries
//   auto c = lrt::matmul(a, b.t());        // (2, 2), Eigen or OpenBLAS
//   fmt::print("{}\n", c);
//
//   lrt::Model<lrt::variants::Lrt> model(lrt::preset("tiny"), /*seed=*/1);
//   lrt::Trainer<lrt::variants::Lrt, lrt::Interleaved<2>> trainer(model, rows, options);
//
// The layers, each also an umbrella of its own (lower ones first; a header includes only its
// own layer and those below, which tests/tree/include_layers.cpp checks):
//   <lrt/core.hpp>      core/ and tensor/: devices, shapes, errors, tensors, expressions
//   <lrt/cpu.hpp>       + backend/cpu/: Eigen / OpenBLAS GEMM, the thread pool, fused kernels
//   <lrt/tensor.hpp>    + fmt formatting (tensor/format.hpp)
//   <lrt/io.hpp>        io/: JSON, atomic files, safetensors, a YAML subset
//   <lrt/tokenizer.hpp> tokenizer/: byte-level BPE (tiktoken's patterns and ranks), its trainer
//   <lrt/autodiff.hpp>  autodiff/: Graph, Var, the differentiable ops and their backward rules
//   <lrt/data.hpp>      data/: the byte tokenizer, the text tokenizer (bytes or BPE), corpora, rows, the loader
//   <lrt/optim.hpp>     optim/: AdamW, Muon and the learning-rate schedules
//   <lrt/model.hpp>     model/: the GPT/LRT model, presets, training schedules, checkpoints
//   <lrt/decode.hpp>    decode/: the KV-cache decoder and the sampler
//   <lrt/eval.hpp>      eval/: CORE, the in-context-learning evaluation (bundles, Python's random, scoring)
//   <lrt/train.hpp>     train/: the Trainer and evaluation
// <lrt/cuda.hpp> (nvcc) is the same library on an NVIDIA GPU.
//
// Shape letters used in comments: B batch, T time, C channels, H heads, Dh head dim, V vocab,
// L layers, S subsets.
#pragma once

#include "tensor.hpp"

#include "autodiff.hpp"
#include "data.hpp"
#include "io.hpp"
#include "tokenizer.hpp"
#include "model.hpp"
#include "optim.hpp"
#include "decode.hpp"
#include "eval.hpp"
#include "train.hpp"
