// Registry entry: variant `lrt-release`, schedule Interleaved<2>.
#include "../registry.hpp"

namespace tool::pairs {
struct lrt_release {
  using variant = lrt::variants::LrtRelease;
  using schedule = lrt::Interleaved<2>;
  static constexpr const char* name = "lrt-release";
};
LRT_TOOL_REGISTER(lrt_release);
}  // namespace tool::pairs
