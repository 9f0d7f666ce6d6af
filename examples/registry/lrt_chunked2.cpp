// Registry entry: variant `lrt`, schedule Chunked<2> (one translation unit per pair).
#include "../runner.hpp"

static const tool::Register<lrt::variants::Lrt, lrt::Chunked<2>> registered_lrt_chunked2{"lrt"};
