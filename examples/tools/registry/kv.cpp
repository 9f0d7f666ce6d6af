// Registry entry: variant `kv`, schedule Interleaved<2>.
#include "../registry.hpp"

namespace tool::pairs {
struct kv {
  using variant = lrt::variants::KVOnly;
  using schedule = lrt::Interleaved<2>;
  static constexpr const char* name = "kv";
};
LRT_TOOL_REGISTER(kv);
}  // namespace tool::pairs
