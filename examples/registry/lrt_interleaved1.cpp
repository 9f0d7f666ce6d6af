// Registry entry: variant `lrt`, schedule Interleaved<1> (one translation unit per pair).
#include "../runner.hpp"

static const tool::Register<lrt::variants::Lrt, lrt::Interleaved<1>> registered_lrt_interleaved1{"lrt"};
