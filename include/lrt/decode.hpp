// lrt/decode.hpp: decoding with a KV cache: Decoder<V, T, D> (prefill modes, one forward pass per
// token, the LRT memory ring, CUDA-graph steps on a GPU) and the sampler (temperature, top-k,
// top-p). Device-neutral like <lrt/model.hpp>.
#pragma once

#include "decode/decoder.hpp"
#include "decode/graph_step.hpp"
#include "decode/sampler.hpp"
