// lrt/core/device.hpp: devices are compile-time tag types constrained by the Device concept.
// A backend provides DeviceTraits<D> (memory) and Executor<D> (loops) specialisations; the
// primary templates turn use of a device without its backend into one readable compile error.
#pragma once

#include <concepts>
#include <cstddef>
#include <type_traits>

#include "config.hpp"

namespace lrt {
inline namespace v0 {

namespace cpu {
/// The host: memory from the system allocator, loops on lrt's thread pool, GEMM via Eigen/OpenBLAS.
struct Device {
  static constexpr const char* name = "cpu";
  static constexpr bool host_accessible = true;
};
}  // namespace cpu

namespace cuda {
/// An NVIDIA GPU. Its backend lives in <lrt/cuda.hpp> (nvcc only).
struct Device {
  static constexpr const char* name = "cuda";
  static constexpr bool host_accessible = false;
};
}  // namespace cuda

/// Marks expressions without storage (scalars, generators): they run on the destination's device.
struct AnyDevice {
  static constexpr const char* name = "any";
  static constexpr bool host_accessible = true;
};

/// A device tag: names itself and says whether the host can dereference its pointers.
template <class D>
concept Device = requires {
  { D::name } -> std::convertible_to<const char*>;
  { D::host_accessible } -> std::convertible_to<bool>;
};

/// Memory services of a device. Specialised by each backend.
template <class D>
struct DeviceTraits {
  static_assert(detail::always_false<D>,
                "no backend for this device: include <lrt/cuda.hpp> and compile with nvcc "
                "to use lrt::cuda::Device");
  static void* allocate(std::size_t bytes);
  static void deallocate(void* p, std::size_t bytes) noexcept;
  static void zero(void* p, std::size_t bytes);
  static void copy_from_host(void* dst, const void* src, std::size_t bytes);
  static void copy_to_host(void* dst, const void* src, std::size_t bytes);
  static void copy_within(void* dst, const void* src, std::size_t bytes);
  static void synchronize();  // returns when the work queued on the device is done
};

/// Loops over expressions on a device. Specialised by each backend.
template <class D>
struct Executor {
  static_assert(detail::always_false<D>,
                "no kernel for this device: include <lrt/cuda.hpp> and compile with nvcc "
                "to run expressions on lrt::cuda::Device");
};

namespace detail {
/// The device two expression operands run on; AnyDevice adapts to the other one.
template <class A, class B>
struct common_device {
  static constexpr bool ok = std::is_same_v<A, B>;
  using type = A;
};
template <class B>
struct common_device<AnyDevice, B> {
  static constexpr bool ok = true;
  using type = B;
};
template <class A>
struct common_device<A, AnyDevice> {
  static constexpr bool ok = true;
  using type = A;
};
template <>
struct common_device<AnyDevice, AnyDevice> {
  static constexpr bool ok = true;
  using type = AnyDevice;
};
}  // namespace detail

}  // namespace v0
}  // namespace lrt
