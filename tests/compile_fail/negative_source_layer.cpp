// expect-error: the source layer is a block index and must be >= 0
#include <lrt/model/gpt.hpp>
using Bad = lrt::Variant<lrt::Injection::Both, lrt::Projection::Shared, lrt::BlockSource<-1>>;
int main() { return Bad::source_layer; }
