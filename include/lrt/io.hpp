// lrt/io.hpp: file I/O without Eigen or fmt: strict JSON (lrt::json), atomic file writes, and
// the safetensors format (lrt::st), weight-only quantization (int8, bf16).
#pragma once

#include "io/file.hpp"
#include "io/json.hpp"
#include "io/quantize.hpp"
#include "io/safetensors.hpp"
#include "io/yaml.hpp"
