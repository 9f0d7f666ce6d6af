// Registry entry: variant `lrt-release`, schedule MultiRefine<2>:
// what a release checkpoint trained with use_multi_refine, multi_refine_num_passes 2 evaluates with.
#include "../registry.hpp"

namespace tool::pairs {
struct lrt_release_multirefine2 {
  using variant = lrt::variants::LrtRelease;
  using schedule = lrt::MultiRefine<2>;
  static constexpr const char* name = "lrt-release";
};
LRT_TOOL_REGISTER(lrt_release_multirefine2);
}  // namespace tool::pairs
