// --variant lrt --schedule multirefine:2
#include "../registry.hpp"

LRT_TOOL_PAIR("lrt", lrt::variants::Lrt, lrt::MultiRefine<2>);
