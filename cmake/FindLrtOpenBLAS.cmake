# FindLrtOpenBLAS.cmake -- locate OpenBLAS with its C interface (cblas.h).
#
# Result variables:
#   LrtOpenBLAS_FOUND, LrtOpenBLAS_LIBRARY, LrtOpenBLAS_INCLUDE_DIR
# Imported target:
#   lrt::openblas  (INTERFACE IMPORTED: the library and the directory holding cblas.h)
#
# Debian/Ubuntu install several BLAS flavours side by side: libopenblas.so is an
# alternatives link, and OpenBLAS's own cblas.h sits in
# /usr/include/<multiarch>/openblas-<flavour>/ (the plain <multiarch>/cblas.h is an
# alternatives link that may point at another BLAS). Prefer the OpenBLAS directories.
# Hints: OpenBLAS_ROOT / OPENBLAS_ROOT (CMake or environment variable).

set(_lrt_openblas_hints)
foreach(_v OpenBLAS_ROOT OPENBLAS_ROOT)
  if(DEFINED ${_v})
    list(APPEND _lrt_openblas_hints "${${_v}}")
  endif()
  if(DEFINED ENV{${_v}})
    list(APPEND _lrt_openblas_hints "$ENV{${_v}}")
  endif()
endforeach()

find_library(LrtOpenBLAS_LIBRARY
  NAMES openblas openblas64 openblasp
  HINTS ${_lrt_openblas_hints}
  PATH_SUFFIXES lib lib64)

find_path(LrtOpenBLAS_INCLUDE_DIR
  NAMES cblas.h
  HINTS ${_lrt_openblas_hints}
  PATH_SUFFIXES
    openblas-pthread openblas-openmp openblas-serial openblas
    include/openblas-pthread include/openblas-openmp include/openblas-serial include/openblas
    include)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(LrtOpenBLAS
  REQUIRED_VARS LrtOpenBLAS_LIBRARY LrtOpenBLAS_INCLUDE_DIR)
mark_as_advanced(LrtOpenBLAS_LIBRARY LrtOpenBLAS_INCLUDE_DIR)

if(LrtOpenBLAS_FOUND AND NOT TARGET lrt::openblas)
  add_library(lrt::openblas INTERFACE IMPORTED)
  set_target_properties(lrt::openblas PROPERTIES
    INTERFACE_LINK_LIBRARIES "${LrtOpenBLAS_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${LrtOpenBLAS_INCLUDE_DIR}")
endif()
unset(_lrt_openblas_hints)
