// Registry entry: variant `residual`, schedule Interleaved<2>.
#include "../registry.hpp"

namespace tool::pairs {
struct residual {
  using variant = lrt::variants::ResidualOnly;
  using schedule = lrt::Interleaved<2>;
  static constexpr const char* name = "residual";
};
LRT_TOOL_REGISTER(residual);
}  // namespace tool::pairs
