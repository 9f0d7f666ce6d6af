// Registry entry: variant `residual`, schedule Interleaved<2> (one translation unit per pair).
#include "../runner.hpp"

static const tool::Register<lrt::variants::ResidualOnly, lrt::Interleaved<2>> registered_residual{"residual"};
