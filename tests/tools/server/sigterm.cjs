// Graceful shutdown, with tests/tools/server_tests.sh sending SIGTERM: a stream is started, and
// once its first text arrives the script writes "streaming" to standard output (the signal comes
// then). The stream must end with a finish reason and [DONE]: EXPECT is the reason (length: the
// request finished within --shutdown-grace; cancelled: it was cut at the end of the grace).
//   node sigterm.cjs PORT MAX_TOKENS EXPECT
"use strict";
const { check, equal, stream } = require("./common.cjs");
const [, , , max, expect] = process.argv;

(async () => {
  await check(`SIGTERM during a stream of ${max} tokens: it ends with finish_reason ${expect} and [DONE]`, async () => {
    const s = await stream("/v1/completions", { prompt: "shutdown", max_tokens: Number(max), temperature: 1, seed: 1,
                                                ignore_eos: true }, {
      onChunk: async (c, n) => { if (n === 1) console.log("streaming"); },
    });
    equal(s.status, 200, "status");
    equal(s.done, true, "[DONE]");
    equal(s.chunks.at(-1).choices[0].finish_reason, expect, "finish_reason");
  });
})();
