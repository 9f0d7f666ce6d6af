// Registry entry: variant `lrt-src1`, schedule Interleaved<2> (one translation unit per pair).
#include "../runner.hpp"

static const tool::Register<lrt::Variant<lrt::Injection::Both, lrt::Projection::Shared, lrt::BlockSource<1>>,
                            lrt::Interleaved<2>>
    registered_lrt_src1{"lrt-src1"};
