// What tools.runtime_api's units share: the message of the lrt::Error a call throws. Light: the
// standard library and lrt's error type only.
#pragma once

#include <string>

#include <lrt/core/error.hpp>

namespace runtime_test {

/// The message of the lrt::Error f throws ("" when it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const lrt::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace runtime_test
