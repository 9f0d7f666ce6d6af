/* A C program on the installed C API (lrt::c, or pkg-config's lrt-c): greedy text after a prompt.
 *   c_decode CHECKPOINT PROMPT N */
#include <lrt.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  if (argc != 4) return fputs("usage: c_decode CHECKPOINT PROMPT N\n", stderr), 2;
  lrt_model* m = NULL;
  if (lrt_open(argv[1], &m) != LRT_OK) return fprintf(stderr, "c_decode: %s\n", lrt_last_error()), 1;
  const size_t len = strlen(argv[2]);
  int32_t* ids = (int32_t*)malloc((len + 1) * sizeof(int32_t));
  size_t n = 0;
  ids[0] = lrt_bos(m);
  int rc = lrt_encode(m, argv[2], len, ids + 1, len, &n) != LRT_OK || lrt_prefill(m, ids, n + 1) != LRT_OK;
  fputs(argv[2], stdout);
  for (long i = 0; !rc && i < atol(argv[3]); ++i) {
    int32_t tok = 0;
    char text[256];
    size_t got = 0;
    rc = lrt_sample(m, 0.0f, 0, 1.0f, 0, &tok) != LRT_OK;
    if (!rc && tok == lrt_bos(m))
      fputs("\n\n", stdout);
    else if (!rc && lrt_token_text(m, tok, text, sizeof text, &got) == LRT_OK)
      fwrite(text, 1, got, stdout);
    if (!rc) rc = lrt_step(m, tok) != LRT_OK;
  }
  putchar('\n');
  if (rc) fprintf(stderr, "c_decode: %s\n", lrt_last_error());
  free(ids);
  lrt_close(m);
  return rc;
}
