// Registry entry: variant `baseline`, schedule Standard (one translation unit per pair).
#include "../runner.hpp"

static const tool::Register<lrt::variants::Baseline, lrt::Standard> registered_baseline{"baseline"};
