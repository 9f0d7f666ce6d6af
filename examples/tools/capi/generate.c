/* examples/tools/capi/generate.c: greedy continuation of a prompt through lrt's C API (include/lrt.h),
 * compiled as C. The prompt goes through the checkpoint's tokenizer (bytes or its BPE, lrt_encode);
 * prints the prompt, then each new token's text (lrt_token_text; a BOS as two newlines), then a
 * newline, as lrt-generate --temp 0 does.
 *   lrt-c-generate CHECKPOINT PROMPT N      (--help, --version) */
#include <lrt.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lrt_version.h"

static const char* const usage =
    "usage: lrt-c-generate CHECKPOINT PROMPT N\n"
    "Greedy decoding of N tokens after PROMPT (a BOS in front; the checkpoint's tokenizer) through lrt's C API\n"
    "(include/lrt.h).\n"
    "  CHECKPOINT  a model.safetensors of lrt-train, an int8/bf16 file of lrt-quantize, or a run's directory\n"
    "  N           new tokens, in [0, 1000000]\n"
    "  --help      this text\n"
    "  --version   the program's name and the git description it was built from\n";

int main(int argc, char** argv) {
  if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    fputs(usage, stdout);
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "--version") == 0) {
    lrt_print_version("lrt-c-generate");
    return 0;
  }
  if (argc != 4) {
    fputs(usage, stderr);
    return 2;
  }
  char* end = NULL;
  const long n = strtol(argv[3], &end, 10);
  if (*argv[3] == '\0' || *end != '\0' || n < 0 || n > 1000000) {
    fprintf(stderr, "lrt-c-generate: N must be an integer in [0, 1000000], got '%s'\n", argv[3]);
    return 2;
  }
  lrt_model* m = NULL;
  if (lrt_open(argv[1], &m) != LRT_OK) {
    fprintf(stderr, "lrt-c-generate: %s\n", lrt_last_error());
    return 1;
  }
  const size_t len = strlen(argv[2]);
  int32_t* prompt = (int32_t*)malloc((len + 1) * sizeof(int32_t)); /* a BPE gives at most len ids */
  size_t cap = 256, got = 0, n_ids = 0;
  char* text = (char*)malloc(cap);
  if (!prompt || !text) return 1;
  prompt[0] = lrt_bos(m);
  int rc = lrt_encode(m, argv[2], len, prompt + 1, len, &n_ids) != LRT_OK;
  fputs(argv[2], stdout);
  if (!rc && lrt_prefill(m, prompt, n_ids + 1) != LRT_OK) rc = 1;
  for (long i = 0; !rc && i < n; ++i) {
    int32_t tok = 0;
    if (lrt_sample(m, 0.0f, 0, 1.0f, 0, &tok) != LRT_OK) {
      rc = 1;
      break;
    }
    if (tok == lrt_bos(m)) {
      fputs("\n\n", stdout);
    } else {
      if (lrt_token_text(m, tok, text, cap, &got) != LRT_OK && got > cap) { /* a longer token: grow */
        char* bigger = (char*)realloc(text, got);
        if (!bigger) {
          rc = 1;
          break;
        }
        text = bigger, cap = got;
        if (lrt_token_text(m, tok, text, cap, &got) != LRT_OK) got = 0;
      }
      fwrite(text, 1, got, stdout);
    }
    if (i + 1 < n && lrt_step(m, tok) != LRT_OK) rc = 1;
  }
  putchar('\n');
  if (rc) fprintf(stderr, "lrt-c-generate: %s\n", lrt_last_error());
  free(prompt);
  free(text);
  lrt_close(m);
  return rc;
}
