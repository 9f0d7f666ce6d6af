// lrt/model.hpp: the GPT backbone and the LRT blocks (model/gpt.hpp), their configuration and
// presets, the training schedules (Standard, Interleaved<S>, ...) and their losses, checkpoints
// in the release's safetensors layout, and the structure of a variant as checkpoints record it.
// Device-neutral: include a backend (<lrt/cpu.hpp>, or <lrt/cuda.hpp> under nvcc) as well, or
// simply <lrt/lrt.hpp>.
#pragma once

#include "model/checkpoint.hpp"
#include "model/config.hpp"
#include "model/gpt.hpp"
#include "model/training_schedule.hpp"
#include "model/variant_structure.hpp"
