// Registry entry: variant `baseline`, schedule Standard.
#include "../registry.hpp"

namespace tool::pairs {
struct baseline {
  using variant = lrt::variants::Baseline;
  using schedule = lrt::Standard;
  static constexpr const char* name = "baseline";
};
LRT_TOOL_REGISTER(baseline);
}  // namespace tool::pairs
