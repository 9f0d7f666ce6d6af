// --variant lrt --schedule chunked:2
#include "../registry.hpp"

LRT_TOOL_PAIR("lrt", lrt::variants::Lrt, lrt::Chunked<2>);
