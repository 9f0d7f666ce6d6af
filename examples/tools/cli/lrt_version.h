/* examples/tools/cli/lrt_version.h: what lrt's programs print for --version (C and C++). The definitions are
 * generated at build time by cmake/version.cmake (the library lrt_version, which every program
 * links); the library's own headers never include this one. */
#ifndef LRT_VERSION_H
#define LRT_VERSION_H

#ifdef __cplusplus
extern "C" {
#endif

/* The source tree's `git describe --always --dirty --tags` when the program was built (e.g.
 * "9f8cdb5", "v0.1.0-3-g9f8cdb5-dirty"), or "unknown" (no git, not a checkout). */
const char* lrt_version_string(void);

/* Prints "PROGRAM DESCRIPTION\n" on stdout (e.g. "lrt-train 9f8cdb5"). */
void lrt_print_version(const char* program);

#ifdef __cplusplus
}
#endif

#endif
