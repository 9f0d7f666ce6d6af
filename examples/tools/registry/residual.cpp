// --variant residual (its natural schedule: interleaved:2)
#include "../registry.hpp"

LRT_TOOL_PAIR("residual", lrt::variants::ResidualOnly, lrt::Interleaved<2>);
