// --variant baseline (its natural schedule: standard)
#include "../registry.hpp"

LRT_TOOL_PAIR("baseline", lrt::variants::Baseline, lrt::Standard);
