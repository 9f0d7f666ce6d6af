# Cross-compiling for 64-bit Arm Linux with Debian's g++-aarch64-linux-gnu (scripts/setup.sh
# --cross installs it and qemu-user-static):
#   cmake -S tests/cross -B build-aarch64 --toolchain cmake/toolchains/aarch64-linux-gnu.cmake
# Programs run under qemu-user when CMake finds it (CMAKE_CROSSCOMPILING_EMULATOR: ctest and
# add_custom_command use it). lrt is header-only; Debian's arm64 libraries live under
# /usr/aarch64-linux-gnu, and only they are searched for libraries and packages.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
find_program(LRT_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(LRT_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${LRT_QEMU_AARCH64}")
endif()
