// The doctest runner of lrt_tests (every tests/unit/<layer>/*.cpp links into it).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
