# Checks that README.md shows examples/quickstart.cpp verbatim (from its first #include on).
#   cmake -DSOURCE_DIR=<repo> -P readme_snippet.cmake
file(READ "${SOURCE_DIR}/examples/quickstart.cpp" code)
file(READ "${SOURCE_DIR}/README.md" readme)
string(FIND "${code}" "#include" start)
string(SUBSTRING "${code}" ${start} -1 code)
string(FIND "${readme}" "${code}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "README.md does not contain examples/quickstart.cpp verbatim (from its first #include): update the README's snippet")
endif()
message(STATUS "README snippet matches examples/quickstart.cpp")
