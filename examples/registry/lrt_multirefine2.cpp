// Registry entry: variant `lrt`, schedule MultiRefine<2> (one translation unit per pair).
#include "../runner.hpp"

static const tool::Register<lrt::variants::Lrt, lrt::MultiRefine<2>> registered_lrt_multirefine2{"lrt"};
