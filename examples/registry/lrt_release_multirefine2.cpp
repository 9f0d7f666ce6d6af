// Registry entry: variant `lrt-release`, schedule MultiRefine<2> (one translation unit per pair):
// what a release checkpoint trained with use_multi_refine, multi_refine_num_passes 2 evaluates with.
#include "../runner.hpp"

static const tool::Register<lrt::variants::LrtRelease, lrt::MultiRefine<2>> registered_lrt_release_multirefine2{
    "lrt-release"};
