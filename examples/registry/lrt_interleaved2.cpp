// Registry entry: variant `lrt`, schedule Interleaved<2> (one translation unit per pair).
#include "../runner.hpp"

static const tool::Register<lrt::variants::Lrt, lrt::Interleaved<2>> registered_lrt_interleaved2{"lrt"};
