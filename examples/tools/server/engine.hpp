// lrt-server's engine: continuous batching over the lean decoder's rows (decode/lean.hpp,
// Options::rows). One thread owns the decoder. Each of its steps feeds every row in use one
// token: a request's next prompt token while its prompt is being read (exact prefill, one token
// per step, beside the other rows' generation instead of stalling them), else the token just
// sampled from the row's logits. A request joins a free row at the next step and leaves when it
// finishes, is cancelled or runs out of time; beyond the rows, a bounded queue waits. The rows'
// products are batch-invariant, and a request samples with lrt-generate's counter
// (sample_counter(0, position)) and its own seed, so its text does not depend on the requests
// beside it: it is what lrt-generate --stop-at-bos prints for the same arguments.
//
// The engine thread does not wake the requests' threads itself: it lists the requests a step gave
// text (or an end) and hands the list to a second thread, the waker, once per step, before the
// next step's products. A wake-up costs its caller a system call (~7 us on the 2-vCPU machines of
// docs/performance.md: with a tiny model and 4 rows, a tenth of the engine's time when it woke each
// request); now the engine pays one per step however many rows it has.
//
// The prompt cache (prompt_cache.hpp): a request whose prompt begins with a sequence some row was
// fed before joins a row from that sequence's cached states (runtime::Decoding::try_join_state)
// and feeds only the rest of its prompt; every row records the states of the positions it is fed,
// and keeps them in the cache when it leaves. The text and logprobs are the same bits as without
// the cache.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <lrt/runtime/decoding.hpp>
#include <lrt/runtime/text.hpp>

#include "api.hpp"
#include "prompt_cache.hpp"

namespace server {

using lrt::index_t;
using Clock = std::chrono::steady_clock;

/// A checkpoint opened for serving: its decoder's rows, tokenizer and what /v1/models reports.
struct Loaded {
  std::unique_ptr<lrt::runtime::Decoding> model;
  lrt::runtime::Text tokenizer;
  std::string variant;   // the variant's name (lrt, baseline, kv, both/shared/block2, ...)
  std::string format;    // f32, int8, bf16
  std::string identity;  // a hash of the checkpoint file (slots.hpp: model_identity), for saved sessions
};

/// Maps the checkpoint `file` (read by the one loader, read_checkpoint) and lays out a decoder of
/// `rows` rows of `capacity` positions from the runtime's table of this build's variants; an
/// lrt::Error says why not (a damaged file, a variant this build was not made with).
inline Loaded load(const std::string& file, index_t rows, index_t capacity) {
  lrt::runtime::DecodingModel m = lrt::runtime::open_decoding(file, {rows, capacity > 0 ? capacity : -1});
  Loaded out;
  out.tokenizer = lrt::runtime::Text(m.bpe);
  out.variant = m.variant, out.format = m.format;
  out.model = std::move(m.decoding);
  return out;
}

/// A generated token's log-probability under the model (the logits before temperature, top-k and
/// top-p) and the most likely tokens' (logprobs >= 1).
struct TokenLogprob {
  std::string token;  // token_display of its bytes
  std::size_t bytes = 0;
  double logprob = 0;
  std::vector<std::pair<std::string, double>> top;
};

/// One request from its connection to the engine and back. The connection thread reads `out`
/// under `m` (woken by `cv`) and sets `cancel`; the engine fills the rest.
struct Job : std::enable_shared_from_this<Job> {
  // Set before submit().
  Completion req;
  std::vector<index_t> prompt;  // BOS first
  index_t max_new = 0;          // max_tokens, cut to what the context leaves
  lrt::runtime::Sampling sampler;
  Clock::time_point arrived, deadline;

  // The engine's alone.
  index_t row = -1;
  std::size_t fed = 0;         // prompt tokens fed
  std::int64_t generated = 0;  // tokens sampled
  History hist;                // the prompt cache's: the states of the positions fed (their bytes reserved)
  bool recording = false;      // hist grows with each token fed
  index_t cached = 0;          // prompt tokens taken from the cache (read by the connection once finished)
  index_t slot = -1;           // the row it decoded on (read once finished: the answer's id_slot)
  std::string raw;             // the bytes of the generated tokens (stop strings cut off)
  std::size_t done_bytes = 0;  // bytes of raw turned into text
  StopScan stops;

  // Shared, under m.
  std::mutex m;
  std::condition_variable cv;
  std::string out;                           // text made and not yet taken by the connection
  std::string text;                          // all text made (the non-streaming answer)
  std::vector<TokenLogprob> lp_out, lp_all;  // with req.logprobs >= 0: not yet taken, and all
  bool finished = false;
  std::string finish_reason;  // stop, length, timeout, cancelled
  std::optional<ApiError> error;
  std::int64_t completion_tokens = 0;
  double ttft_s = -1, total_s = 0;
  std::atomic<bool> cancel{false};
};

struct EngineOptions {
  index_t parallel = 4;         // rows
  std::size_t queue = 64;       // requests waiting beyond the rows
  std::size_t cache_bytes = 0;  // the prompt cache's budget (0: no cache)
};

/// Counts for /health and the log.
struct EngineStats {
  std::size_t waiting = 0, active = 0;
  std::uint64_t served = 0, tokens = 0;
};

class Engine {
 public:
  explicit Engine(EngineOptions o) : o_(o) {}
  ~Engine() { stop(); }

  /// Starts decoding with a loaded model (before: every submit is refused as loading).
  void start(Loaded loaded) {
    std::lock_guard<std::mutex> lock(m_);
    loaded_ = std::move(loaded);
    cache_.configure(o_.cache_bytes, loaded_.model->position_state_size());
    slot_tokens_.assign(static_cast<std::size_t>(o_.parallel), {});
    ready_ = true;
    waker_ = std::thread([this] { wake_loop(); });
    thread_ = std::thread([this] { run(); });
  }
  bool ready() const {
    std::lock_guard<std::mutex> lock(m_);
    return ready_;
  }
  /// The model's config and tokenizer (after start()).
  const lrt::ModelConfig& config() const { return loaded_.model->config(); }
  const lrt::runtime::Text& tokenizer() const { return loaded_.tokenizer; }
  const Loaded& loaded() const { return loaded_; }
  index_t capacity() const { return capacity_; }
  index_t parallel() const { return o_.parallel; }
  std::size_t cache_bytes() const { return o_.cache_bytes; }
  void set_capacity(index_t c) { capacity_ = c; }

  /// Queues a job; nullopt, or why it is refused (503: loading, shutting down, the queue full).
  std::optional<ApiError> submit(const std::shared_ptr<Job>& job) {
    std::lock_guard<std::mutex> lock(m_);
    if (!ready_) return ApiError{503, "the model is loading", "server_error", "", "loading"};
    if (stopping_) return ApiError{503, "the server is shutting down", "server_error", "", "shutting_down"};
    if (waiting_.size() + active_.size() >= static_cast<std::size_t>(o_.parallel) + o_.queue)
      return ApiError{503,
                      "the server is busy: " + std::to_string(o_.parallel) + " requests decoding and " +
                          std::to_string(waiting_.size()) + " waiting (--parallel, --queue); retry later",
                      "server_error", "", "queue_full"};
    waiting_.push_back(job);
    cv_.notify_all();
    return std::nullopt;
  }

  CacheStats cache_stats() const { return cache_.stats(); }

  // The slots (POST /slots/{id}): the sequence each row's last request fed, in the prompt cache.
  // Errors are ApiErrors (400: a bad id, an empty slot; 409: evicted; 507: no room).

  /// A copy of slot `id`'s tokens and states.
  void slot_copy(index_t id, std::vector<std::int64_t>& tokens, std::vector<float>& states) const {
    std::lock_guard<std::mutex> lock(cache_m_);
    const std::vector<index_t>& seq = slot(id);
    const History* h = cache_.holder(seq);
    if (h == nullptr)
      throw ApiError{409,
                     "slot " + std::to_string(id) +
                         "'s state is no longer in the prompt cache (dropped to make room: "
                         "--cache-mb)",
                     "invalid_request_error", "", "evicted"};
    const auto n = static_cast<index_t>(seq.size()), S = cache_.state_size();
    tokens.assign(seq.begin(), seq.end());
    states.resize(static_cast<std::size_t>(n * S));
    for (index_t p = 0; p < n; ++p)
      std::memcpy(states.data() + p * S, h->state(p), static_cast<std::size_t>(S) * sizeof(float));
  }
  /// Puts a saved sequence in the cache as slot `id`'s (checked by read_slot).
  void slot_restore(index_t id, const std::vector<std::int64_t>& tokens, const std::vector<float>& states) {
    std::lock_guard<std::mutex> lock(cache_m_);
    (void)slot(id, false);
    History h(cache_.state_size());
    const auto n = static_cast<index_t>(tokens.size()), S = cache_.state_size();
    const std::size_t need = h.bytes_for(n);
    if (!cache_.reserve(need))
      throw ApiError{507,
                     "the prompt cache (--cache-mb " + std::to_string(o_.cache_bytes >> 20) + ") cannot hold " +
                         std::to_string(n) + " positions (" + std::to_string(need) + " bytes)",
                     "server_error", "", "cache_full"};
    for (index_t p = 0; p < n; ++p)
      std::memcpy(h.append(static_cast<index_t>(tokens[static_cast<std::size_t>(p)])), states.data() + p * S,
                  static_cast<std::size_t>(S) * sizeof(float));
    slot_tokens_[static_cast<std::size_t>(id)] = h.tokens();
    cache_.insert(std::move(h));
  }
  /// Drops slot `id`'s sequence from the cache (and every entry that extends it); its length.
  index_t slot_erase(index_t id) {
    std::lock_guard<std::mutex> lock(cache_m_);
    (void)slot(id, false);
    std::vector<index_t>& seq = slot_tokens_[static_cast<std::size_t>(id)];
    const auto n = static_cast<index_t>(seq.size());
    if (n > 0) cache_.erase(seq);
    seq.clear();
    return n;
  }
  /// Whether the cache is on (the slots need it).
  bool caching() const { return cache_.enabled(); }

  EngineStats stats() const {
    std::lock_guard<std::mutex> lock(m_);
    return {waiting_.size(), active_.size(), served_, tokens_};
  }

  /// Stops taking requests: those waiting are refused (503), those decoding finish, or are
  /// cancelled once `grace` seconds have passed; returns when the engine's thread has ended.
  void shutdown(double grace) {
    {
      std::lock_guard<std::mutex> lock(m_);
      if (stopping_) return;
      stopping_ = true;
      grace_end_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(grace));
      cv_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
    {
      std::lock_guard<std::mutex> lock(wake_m_);
      waker_stop_ = true;
    }
    wake_cv_.notify_one();
    if (waker_.joinable()) waker_.join();
  }
  void stop() { shutdown(0); }

 private:
  /// Ends a job: its last text, its reason (or error); its connection is woken at the next flush.
  void finish(Job& j, std::string reason, std::optional<ApiError> error = std::nullopt) {
    {
      std::lock_guard<std::mutex> lock(j.m);
      j.finished = true;
      j.completion_tokens = j.generated;
      j.finish_reason = std::move(reason);
      j.error = std::move(error);
      j.total_s = std::chrono::duration<double>(Clock::now() - j.arrived).count();
    }
    woken_.push_back(j.shared_from_this());
  }

  /// Turns the generated bytes up to `upto` into text (all of them when final) and hands it on.
  void publish(Job& j, std::size_t upto, bool final) {
    std::string add;
    j.done_bytes += append_utf8(add, std::string_view(j.raw).substr(j.done_bytes, upto - j.done_bytes), final);
    if (add.empty()) return;
    {
      std::lock_guard<std::mutex> lock(j.m);
      j.out += add, j.text += add;
    }
    woken_.push_back(j.shared_from_this());
  }

  /// Hands the requests listed since the last flush to the waker (one wake-up, if it sleeps).
  void flush_wakes() {
    if (woken_.empty()) return;
    {
      std::lock_guard<std::mutex> lock(wake_m_);
      to_wake_.insert(to_wake_.end(), std::make_move_iterator(woken_.begin()), std::make_move_iterator(woken_.end()));
    }
    woken_.clear();
    wake_cv_.notify_one();
  }

  /// The waker's loop: wakes the connections of the requests the engine listed, until shutdown.
  void wake_loop() {
    std::vector<std::shared_ptr<Job>> batch;
    std::unique_lock<std::mutex> lock(wake_m_);
    for (;;) {
      wake_cv_.wait(lock, [&] { return waker_stop_ || !to_wake_.empty(); });
      if (to_wake_.empty()) return;  // stopping, nothing left
      batch.swap(to_wake_);
      lock.unlock();
      for (const auto& j : batch) j->cv.notify_all();
      batch.clear();
      lock.lock();
    }
  }

  /// A sampled token: its bytes, the stop strings, the length. Returns whether the job goes on.
  bool take(Job& j, index_t tok) {
    const lrt::ModelConfig& c = config();
    if (tok == c.bos() && !j.req.ignore_eos) {  // the model starts a new document: the completion ends
      publish(j, j.raw.size(), true);
      finish(j, "stop");
      return false;
    }
    const std::size_t before = j.raw.size();
    if (tok == c.bos())  // with ignore_eos: as lrt-generate prints it
      j.raw += "\n\n";
    else  // padding ids past the vocabulary have no text
      j.raw += loaded_.tokenizer.token_text(tok);
    if (const std::size_t at = j.stops.scan(j.raw, before); at != std::string::npos) {
      j.raw.resize(at);
      publish(j, j.raw.size(), true);
      finish(j, "stop");
      return false;
    }
    if (j.generated >= j.max_new) {
      publish(j, j.raw.size(), true);
      finish(j, "length");
      return false;
    }
    publish(j, j.stops.safe(j.raw), false);
    return true;
  }

  /// The engine's loop; an exception out of a step (not expected: every input was checked) ends
  /// the requests decoding with a 500 and frees their rows, and the loop goes on.
  void run() {
    for (;;) {
      try {
        loop();
        flush_wakes();
        return;
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(m_);
        for (auto& j : active_) {
          finish(*j, "", ApiError{500, std::string("engine: ") + e.what(), "server_error", "", ""});
          try {
            if (j->row >= 0) loaded_.model->leave(j->row);
          } catch (...) {
          }
          drop_history(*j);
        }
        active_.clear();
      }
      flush_wakes();
    }
  }

  /// The engine thread alone writes active_ (under m_, since submit() and stats() read its size);
  /// it reads it without the lock.
  void loop() {
    lrt::runtime::Decoding& model = *loaded_.model;
    std::vector<index_t> rows, toks;
    std::vector<Job*> stepped;  // the jobs of rows[i]
    std::vector<std::shared_ptr<Job>> admit;
    for (;;) {
      admit.clear();
      flush_wakes();  // before waiting: what the last turn ended
      {
        std::unique_lock<std::mutex> lock(m_);
        cv_.wait(lock, [&] { return stopping_ || !active_.empty() || !waiting_.empty(); });
        if (stopping_) {
          for (auto& j : waiting_)
            finish(*j, "", ApiError{503, "the server is shutting down", "server_error", "", "shutting_down"});
          waiting_.clear();
          if (active_.empty()) return;
          if (Clock::now() >= grace_end_)
            for (auto& j : active_) j->cancel = true;
        }
        while (!waiting_.empty() && active_.size() + admit.size() < static_cast<std::size_t>(o_.parallel)) {
          admit.push_back(std::move(waiting_.front()));
          waiting_.pop_front();
        }
      }
      const Clock::time_point now = Clock::now();
      for (auto& j : admit) {
        if (j->cancel || now >= j->deadline || j->max_new == 0) {
          finish(*j, j->cancel ? "cancelled" : now >= j->deadline ? "timeout" : "length");
          count_served(*j);
          continue;
        }
        j->stops.stops = j->req.stop;
        const lrt::Status s = join(*j);
        j->slot = j->row;
        if (!s.ok()) {
          finish(*j, "", ApiError{500, std::string("decoder: ") + s.message(), "server_error", "", ""});
          continue;
        }
        std::lock_guard<std::mutex> lock(m_);
        active_.push_back(std::move(j));
      }
      // One step: the next prompt token of rows still reading theirs, a sampled token of the rest.
      rows.clear(), toks.clear(), stepped.clear();
      bool ended = false;
      for (const auto& jp : active_) {
        Job& j = *jp;
        bool goes_on = true;
        if (j.cancel) {
          finish(j, "cancelled"), goes_on = false;
        } else if (Clock::now() >= j.deadline) {
          publish(j, j.raw.size(), true), finish(j, "timeout"), goes_on = false;
        } else if (j.fed < j.prompt.size()) {
          rows.push_back(j.row), toks.push_back(j.prompt[j.fed++]), stepped.push_back(&j);
        } else {
          if (j.generated == 0) {
            std::lock_guard<std::mutex> lock(j.m);
            j.ttft_s = std::chrono::duration<double>(Clock::now() - j.arrived).count();
          }
          const index_t tok = lrt::runtime::sample(model.logits(j.row), j.sampler, model.position(j.row));
          ++j.generated;
          if (j.req.logprobs >= 0) record_logprobs(j, model.logits(j.row), tok);
          goes_on = take(j, tok);
          if (goes_on) rows.push_back(j.row), toks.push_back(tok), stepped.push_back(&j);
        }
        if (!goes_on) {
          model.leave(j.row);
          retire(j);
          j.row = -1;
          count_served(j);
          ended = true;
        }
      }
      if (ended) {
        std::lock_guard<std::mutex> lock(m_);
        std::erase_if(active_, [](const std::shared_ptr<Job>& j) { return j->row < 0; });
      }
      if (rows.empty()) continue;
      flush_wakes();  // the connections send this step's text while the next one is computed
      const lrt::Status s = model.try_step(rows, toks);
      if (!s.ok()) {  // not expected: every row was checked; end those rows' requests with the reason
        std::lock_guard<std::mutex> lock(m_);
        for (auto& j : active_) {
          finish(*j, "", ApiError{500, std::string("decoder: ") + s.message(), "server_error", "", ""});
          model.leave(j->row);
          drop_history(*j);
        }
        active_.clear();
        continue;
      }
      for (std::size_t i = 0; i < stepped.size(); ++i) record(*stepped[i], toks[i]);
    }
  }

  /// Takes a row for j: joined from the longest cached prefix of its prompt (at most all but its
  /// last token, whose step gives the first logits), else fed its first token; starts its
  /// recording (unless the cache is off, for the server or the request).
  lrt::Status join(Job& j) {
    lrt::runtime::Decoding& model = *loaded_.model;
    const auto P = static_cast<index_t>(j.prompt.size());
    const bool use = cache_.enabled() && j.req.cache_prompt;
    index_t q = 0;
    std::unique_lock<std::mutex> lock(cache_m_);
    const History* hit = use ? cache_.lookup(j.prompt, P - 1, q) : nullptr;
    if (hit == nullptr) lock.unlock();
    if (hit != nullptr) {
      hit->pointers(q, pointers_);
      lrt::Status s = model.try_join_state(std::span<const index_t>(j.prompt.data(), static_cast<std::size_t>(q)),
                                           pointers_, j.row);
      if (!s.ok()) return s;
      j.fed = static_cast<std::size_t>(q), j.cached = q;
      if (q == hit->size()) {  // the prompt extends the entry: the entry becomes this row's history
        j.hist = cache_.take(hit), j.recording = true;
      } else if (cache_.reserve(hit->bytes_for(q), hit)) {  // a prefix shared with the entry: copied
        j.hist = hit->prefix(q), j.recording = true;
      }
      return s;
    }
    lrt::Status s = model.try_join(std::span<const index_t>(j.prompt.data(), 1), j.row);
    if (!s.ok()) return s;
    j.fed = 1;
    if (use) {
      j.hist = History(cache_.state_size()), j.recording = true;
      record(j, j.prompt[0]);
    }
    return s;
  }

  /// The state of the position j's row was just fed `tok` at, into its history (while there is room).
  void record(Job& j, index_t tok) {
    if (!j.recording) return;
    if (j.hist.full()) {
      std::lock_guard<std::mutex> lock(cache_m_);
      if (!cache_.reserve(j.hist.chunk_bytes())) {  // no room: the history stops here
        j.recording = false;
        return;
      }
    }
    float* at = j.hist.append(tok);
    if (!loaded_.model->try_save_position(j.row, std::span<float>(at, static_cast<std::size_t>(cache_.state_size())))
             .ok())
      j.hist.pop_back(), j.recording = false;  // not expected: the row is in use
  }

  void drop_history(Job& j) {
    std::lock_guard<std::mutex> lock(cache_m_);
    cache_.release(j.hist.bytes());
    j.hist = History(), j.recording = false;
  }

  /// A row's request leaves: its history goes into the cache, and is what the row (the slot)
  /// holds for /slots.
  void retire(Job& j) {
    std::lock_guard<std::mutex> lock(cache_m_);
    slot_tokens_[static_cast<std::size_t>(j.row)] = j.hist.tokens();
    cache_.insert(std::move(j.hist));
    j.hist = History(), j.recording = false;
  }

  /// log p(tok) and the req.logprobs most likely tokens' (ties: the lower id first), in double.
  void record_logprobs(Job& j, std::span<const float> logits, index_t tok) {
    const float mx = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (const float x : logits) sum += std::exp(static_cast<double>(x) - mx);
    const double lse = mx + std::log(sum);
    const auto show = [&](index_t id) {
      if (id == config().bos()) return std::string("<|bos|>");
      return token_display(loaded_.tokenizer.token_text(id));
    };
    TokenLogprob t;
    t.token = show(tok);
    t.bytes = tok == config().bos() ? (j.req.ignore_eos ? 2 : 0) : loaded_.tokenizer.token_text(tok).size();
    t.logprob = logits[static_cast<std::size_t>(tok)] - lse;
    const auto n = std::min<std::size_t>(static_cast<std::size_t>(j.req.logprobs), logits.size());
    order_.resize(logits.size());
    for (std::size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<index_t>(i);
    std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(n), order_.end(),
                      [&](index_t a, index_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    for (std::size_t i = 0; i < n; ++i) t.top.emplace_back(show(order_[i]), logits[order_[i]] - lse);
    std::lock_guard<std::mutex> lock(j.m);
    j.lp_out.push_back(t);
    j.lp_all.push_back(std::move(t));
  }

  void count_served(const Job& j) {
    std::lock_guard<std::mutex> lock(m_);
    ++served_;
    tokens_ += static_cast<std::uint64_t>(j.generated);
  }

  EngineOptions o_;
  Loaded loaded_;
  index_t capacity_ = 0;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> waiting_;
  std::vector<std::shared_ptr<Job>> active_;
  bool ready_ = false, stopping_ = false;
  Clock::time_point grace_end_;
  std::uint64_t served_ = 0, tokens_ = 0;
  std::thread thread_;
  std::vector<index_t> order_;  // record_logprobs' scratch
  // The prompt cache and the slots' sequences: the engine thread, and /slots' request threads,
  // under cache_m_ (the engine holds it for a lookup, a reservation, a row's retirement).
  PromptCache cache_;
  std::vector<std::vector<index_t>> slot_tokens_;
  mutable std::mutex cache_m_;
  std::vector<const float*> pointers_;  // join's scratch

  /// Slot id's sequence (under cache_m_); a 400 for an id outside the rows, or (`filled`) an
  /// empty slot.
  const std::vector<index_t>& slot(index_t id, bool filled = true) const {
    if (id < 0 || id >= o_.parallel)
      throw ApiError{400,
                     "slot id " + std::to_string(id) + " outside [0, " + std::to_string(o_.parallel) + ") (--parallel)",
                     "invalid_request_error", "id_slot", "invalid_value"};
    const std::vector<index_t>& seq = slot_tokens_[static_cast<std::size_t>(id)];
    if (filled && seq.empty())
      throw ApiError{400,
                     "slot " + std::to_string(id) +
                         " holds no state: no request has finished on it since the server started (or it was "
                         "erased)",
                     "invalid_request_error", "", "empty_slot"};
    return seq;
  }
  // The waker: the engine thread fills woken_ (its own) and moves it to to_wake_ (under wake_m_).
  std::vector<std::shared_ptr<Job>> woken_, to_wake_;
  std::mutex wake_m_;
  std::condition_variable wake_cv_;
  bool waker_stop_ = false;
  std::thread waker_;
};

}  // namespace server
