// Registry entry: variant `lrt-release`, schedule Interleaved<2> (one translation unit per pair).
#include "../runner.hpp"

static const tool::Register<lrt::variants::LrtRelease, lrt::Interleaved<2>> registered_lrt_release{"lrt-release"};
