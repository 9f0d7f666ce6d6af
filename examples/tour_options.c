/* examples/tour_options.c: --help and --version for the tours, lrt-quickstart, lrt-tour and
 * lrt-runtime-quickstart, whose main()s stay as short as the README and docs show them. The
 * options are answered before main: glibc calls the functions of .init_array with (argc, argv,
 * envp). Any other option is refused (exit status 2) instead of being ignored by a run that then
 * starts, and lrt-runtime-quickstart takes at most its one OUT_DIR. LRT_TOUR_NAME (set by
 * examples/CMakeLists.txt for each tour) picks the tour. Without glibc nothing happens here and
 * the tours ignore their arguments. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lrt_version.h"

#if defined(__GLIBC__)

struct lrt_tour {
  const char* name;
  const char* usage;
  int positionals; /* how many arguments that are not options it takes */
};

static const struct lrt_tour lrt_tours[] = {
    {"lrt-quickstart",
     "usage: lrt-quickstart\n"
     "  The README's quick start (examples/quickstart.cpp), on lrt's templates: trains a tiny LRT\n"
     "  with the interleaved schedule on a repeated sentence for 40 steps, printing the loss, then\n"
     "  decodes 24 bytes greedily. It takes no options.\n",
     0},
    {"lrt-tour",
     "usage: lrt-tour\n"
     "  A tour of the tensor layer (examples/tour.cpp): tensors, fused expressions, GEMM and\n"
     "  reductions; prints what each step computes and exits non-zero if a self-check fails. It\n"
     "  takes no options.\n",
     0},
    {"lrt-runtime-quickstart",
     "usage: lrt-runtime-quickstart [OUT_DIR]\n"
     "  The quick start on the runtime library (examples/runtime_quickstart.cpp): trains the same\n"
     "  model through lrt's light headers, saves it in OUT_DIR (default runs/runtime-quickstart),\n"
     "  scores it both ways and samples from the saved run.\n",
     1},
};

static void lrt_tour_options(int argc, char** argv, char** envp) {
  (void)envp;
  const struct lrt_tour* tour = NULL;
  for (size_t i = 0; i < sizeof lrt_tours / sizeof lrt_tours[0]; ++i)
    if (strcmp(lrt_tours[i].name, LRT_TOUR_NAME) == 0) tour = &lrt_tours[i];
  if (tour == NULL || argv == NULL) return;
  int positionals = 0;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      printf("%s  --help     this text\n  --version  the program's name and the git description it was built from\n",
             tour->usage);
      exit(0);
    }
    if (strcmp(a, "--version") == 0) {
      lrt_print_version(tour->name);
      exit(0);
    }
    if (a[0] == '-' && a[1] != '\0') {
      fprintf(stderr, "%s: unknown option '%s' (%s); see --help\n", tour->name, a,
              tour->positionals ? "it takes only --help and --version" : "it takes no options");
      exit(2);
    }
    if (++positionals > tour->positionals) {
      if (tour->positionals == 0)
        fprintf(stderr, "%s: unexpected argument '%s' (it takes none); see --help\n", tour->name, a);
      else
        fprintf(stderr, "%s: unexpected argument '%s' (it takes at most %d); see --help\n", tour->name, a,
                tour->positionals);
      exit(2);
    }
  }
}

typedef void (*lrt_init_fn)(int, char**, char**);
__attribute__((section(".init_array"), used)) static const lrt_init_fn lrt_tour_options_entry = lrt_tour_options;

#endif
