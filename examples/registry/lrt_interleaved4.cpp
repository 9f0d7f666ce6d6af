// Registry entry: variant `lrt`, schedule Interleaved<4> (one translation unit per pair).
#include "../runner.hpp"

static const tool::Register<lrt::variants::Lrt, lrt::Interleaved<4>> registered_lrt_interleaved4{"lrt"};
