// Data-parallel training in one process: dist::Zero1 over a group of threads (a dist::Group whose
// collectives meet at a barrier), driven by lrt::Trainer::set_group. N ranks with one micro-batch
// each must give the bits of one process with N micro-batches (weights, losses and the checkpoint
// files), the ranks must refuse to start when they do not run the same thing, and the optimizer
// state of a gathered checkpoint must come out in one process's order. tools.mpi checks the same
// over MPI with lrt-train; this runs in every unit-test build, the sanitizers' included.
#include <lrt/lrt.hpp>

#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

namespace test_zero1 {

using lrt::index_t;
namespace fs = std::filesystem;

/// What the ranks of a ThreadGroup share: one slot per rank and a barrier.
struct Hub {
  explicit Hub(int n) : size(n), sync(n), floats(static_cast<std::size_t>(n)), bytes(static_cast<std::size_t>(n)) {}
  int size;
  std::barrier<> sync;
  std::vector<const float*> floats;
  std::vector<std::string> bytes;
};

/// A dist::Group of threads in host memory, with the reduction order of the contract (rank order).
class ThreadGroup final : public lrt::dist::Group {
 public:
  ThreadGroup(Hub& hub, int rank) : hub_(&hub), rank_(rank) {}
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return hub_->size; }
  const char* name() const noexcept override { return "threads"; }
  bool host_memory() const noexcept override { return true; }
  void reduce_scatter(const float* send, const std::vector<index_t>& counts, float* recv, const char* what) override {
    check_counts(counts, "reduce_scatter", what);
    post(send);
    index_t off = 0;
    for (int o = 0; o < rank_; ++o) off += counts[static_cast<std::size_t>(o)];
    for (index_t k = 0; k < counts[static_cast<std::size_t>(rank_)]; ++k) {
      float v = hub_->floats[0][off + k];
      for (int r = 1; r < size(); ++r) v += hub_->floats[static_cast<std::size_t>(r)][off + k];
      recv[k] = v;
    }
    hub_->sync.arrive_and_wait();
  }
  void all_gather(const float* send, const std::vector<index_t>& counts, float* recv, const char* what) override {
    check_counts(counts, "all_gather", what);
    post(send);
    index_t off = 0;
    for (int r = 0; r < size(); ++r) {
      const index_t n = counts[static_cast<std::size_t>(r)];
      if (n > 0) std::memcpy(recv + off, hub_->floats[static_cast<std::size_t>(r)], sizeof(float) * n);
      off += n;
    }
    hub_->sync.arrive_and_wait();
  }
  void add(float* dst, const float* src, index_t n) override { lrt::dist::detail::add_host(dst, src, n); }
  std::vector<std::string> exchange(const std::string& mine, const char*) override {
    hub_->bytes[static_cast<std::size_t>(rank_)] = mine;
    hub_->sync.arrive_and_wait();
    std::vector<std::string> all = hub_->bytes;
    hub_->sync.arrive_and_wait();
    return all;
  }
  void abort(int) noexcept override {}

 private:
  void post(const float* p) {
    hub_->floats[static_cast<std::size_t>(rank_)] = p;
    hub_->sync.arrive_and_wait();
  }
  Hub* hub_;
  int rank_;
};

lrt::ModelConfig config() {
  lrt::ModelConfig c;
  c.n_layer = 2, c.n_embd = 32, c.n_head = 2, c.n_kv_head = 1, c.sequence_len = 16, c.vocab_size = 257;
  c.window_pattern = "SL";
  c.ve_layout = lrt::VELayout::Alternating;
  return c;
}

lrt::data::TokenRows rows() {
  std::mt19937 rng(11);
  const char* words[] = {"the ", "cat ", "sat ", "on ", "a ", "mat ", "and ", "dog ", "ran.\n", "far "};
  std::string s;
  while (s.size() < 6000) s += words[rng() % 10];
  return lrt::data::TokenRows::build({{"d", s}}, 16);
}

lrt::TrainOptions options(index_t micro_rows) {
  lrt::TrainOptions o;
  o.batch_rows = 4, o.micro_rows = micro_rows, o.steps = 4, o.seed = 5;
  return o;
}

using Lrt = lrt::variants::Lrt;
using Sched = lrt::Interleaved<2>;
using Model = lrt::Model<Lrt, float>;
using Trainer = lrt::Trainer<Lrt, Sched, float>;

std::vector<std::vector<float>> weights(const Model& m) {
  std::vector<std::vector<float>> w;
  m.for_each_param([&](auto& p) {
    const float* v = p.value().data();
    w.emplace_back(v, v + p.value().numel());
  });
  return w;
}

std::string bytes_of(const std::string& path) { return lrt::read_file(path, "test"); }

fs::path temp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("lrt_test_zero1_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p;
}

/// Runs f(rank, group) on `n` threads, one rank each; rethrows the first rank's error.
void on_ranks(int n, const std::function<void(int, ThreadGroup&)>& f) {
  Hub hub(n);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      ThreadGroup g(hub, r);
      try {
        f(r, g);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

TEST_CASE("zero1: 2 ranks x 1 micro-batch == 1 process x 2 micro-batches, bit for bit, checkpoint files too") {
  const auto data = rows();
  const fs::path one_dir = temp_dir("one"), two_dir = temp_dir("two");

  // One process: 4 rows a step in 2 micro-batches of 2.
  Model one(config(), 3);
  Trainer tone(one, data, options(2));
  std::vector<double> one_losses;
  for (int s = 0; s < 4; ++s) one_losses.push_back(tone.train_step().loss);
  tone.save(one_dir.string());

  // The same run on two ranks, each with its own copy of the model and 2 rows (one micro-batch).
  std::vector<std::vector<std::vector<float>>> rank_weights(2);
  std::vector<std::vector<double>> rank_losses(2);
  std::vector<std::vector<int>> owners(2);
  on_ranks(2, [&](int r, ThreadGroup& g) {
    Model m(config(), 3);
    Trainer t(m, data, options(0));  // micro_rows 0: batch_rows / N each
    t.set_group(&g);
    owners[static_cast<std::size_t>(r)] = t.owners();
    for (int s = 0; s < 4; ++s) rank_losses[static_cast<std::size_t>(r)].push_back(t.train_step().loss);
    t.save(two_dir.string());  // collective; rank 0 writes
    rank_weights[static_cast<std::size_t>(r)] = weights(m);
  });
  // Both ranks own something, and agree on who owns what.
  CHECK(owners[0] == owners[1]);
  CHECK(std::count(owners[0].begin(), owners[0].end(), 0) > 0);
  CHECK(std::count(owners[0].begin(), owners[0].end(), 1) > 0);

  const auto w1 = weights(one);
  CHECK(rank_weights[0] == w1);
  CHECK(rank_weights[1] == w1);
  CHECK(rank_losses[0] == one_losses);
  CHECK(rank_losses[1] == one_losses);
  const std::string a = lrt::find_checkpoint(one_dir.string()).dir, b = lrt::find_checkpoint(two_dir.string()).dir;
  CHECK(bytes_of(a + "/model.safetensors") == bytes_of(b + "/model.safetensors"));
  // The gathered optimizer state is written in one process's order: the same file.
  CHECK(bytes_of(a + "/optim.safetensors") == bytes_of(b + "/optim.safetensors"));

  // And a 2-rank checkpoint resumes in one process onto the same run.
  Model back(config(), 99);
  Trainer tback(back, data, options(2));
  tback.resume(two_dir.string());
  CHECK(tback.step() == 4);
  CHECK(weights(back) == w1);
  fs::remove_all(one_dir);
  fs::remove_all(two_dir);
}

TEST_CASE("zero1: ranks that do not run the same options refuse to start, naming the difference") {
  const auto data = rows();
  std::vector<std::string> messages(2);
  on_ranks(2, [&](int r, ThreadGroup& g) {
    Model m(config(), 3);
    lrt::TrainOptions o = options(0);
    if (r == 1) o.seed = 6;
    Trainer t(m, data, o);
    try {
      t.set_group(&g);
    } catch (const lrt::Error& e) {
      messages[static_cast<std::size_t>(r)] = e.what();
    }
  });
  for (const std::string& m : messages) {
    INFO(m);
    CHECK(m.find("rank 1 of 2 does not run what rank 0 runs") != std::string::npos);
    CHECK(m.find("train options") != std::string::npos);
  }
}

TEST_CASE("zero1: a batch that does not split over the ranks is refused before any step") {
  const auto data = rows();
  std::vector<std::string> messages(3);
  on_ranks(3, [&](int r, ThreadGroup& g) {
    Model m(config(), 3);
    Trainer t(m, data, options(0));
    try {
      t.set_group(&g);
    } catch (const lrt::Error& e) {
      messages[static_cast<std::size_t>(r)] = e.what();
    }
  });
  for (const std::string& m : messages) CHECK(m.find("does not divide by the 3 ranks") != std::string::npos);
}

}  // namespace test_zero1
