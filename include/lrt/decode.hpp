// lrt/decode.hpp: decoding with a KV cache: Decoder<V, T, D> (prefill modes, one forward pass per
// token, the LRT memory ring, CUDA-graph steps on a GPU) and the sampler (temperature, top-k,
// top-p). Device-neutral like <lrt/model.hpp>, but for the CPU's LeanDecoder<V, T> (decode/lean.hpp:
// one row, the kernels called directly, every buffer laid out once; lean_weights() views a model).
#pragma once

#include "decode/decoder.hpp"
#include "decode/graph_step.hpp"
#include "decode/lean.hpp"
#include "decode/lean_file.hpp"
#include "decode/lean_model.hpp"
#include "decode/prefill_mode.hpp"
#include "decode/sampler.hpp"
