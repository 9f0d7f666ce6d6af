// expect-error: S is the number of position subsets and must be >= 1
#include <lrt/model/training_schedule.hpp>
int main() { return lrt::Interleaved<0>::subsets; }
