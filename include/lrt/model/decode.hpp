// lrt/model/decode.hpp: forwards to the decoder's parts in lrt/decode/ (decoder, graph step, sampler).
#pragma once
#include "../decode/decoder.hpp"
#include "../decode/graph_step.hpp"
#include "../decode/sampler.hpp"
