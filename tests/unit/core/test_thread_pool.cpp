// The library's thread pool: coverage of ranges, nesting, exceptions, concurrent callers.
#include <atomic>
#include <thread>

#include "../test_util.hpp"

namespace test_thread_pool {

using lrt::index_t;
using lrt::ThreadPool;

TEST_CASE("parallel_for covers [0, n) exactly once, for several pool sizes and grains") {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    CHECK(pool.size() == threads);
    for (index_t n : {0, 1, 7, 100, 1000}) {
      for (index_t grain : {1, 3, 64}) {
        std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
        pool.parallel_for(n, grain, [&](index_t b, index_t e) {
          CHECK(b < e);
          for (index_t i = b; i < e; ++i) hits[std::size_t(i)]++;
        });
        for (auto& h : hits) CHECK(h.load() == 1);
      }
    }
  }
}

TEST_CASE("nested parallel_for runs serially inside a task; exceptions propagate") {
  ThreadPool pool(3);
  std::atomic<int> total{0};
  pool.parallel_for(6, 1, [&](index_t b, index_t e) {
    for (index_t i = b; i < e; ++i) pool.parallel_for(10, 1, [&](index_t bb, index_t ee) { total += int(ee - bb); });
  });
  CHECK(total == 60);
  CHECK_THROWS_WITH_AS(pool.parallel_for(100, 1,
                                         [&](index_t b, index_t) {
                                           if (b > 0) throw lrt::Error("task", "boom");
                                         }),
                       "[task] boom", lrt::Error);
  // the pool is still usable after an exception
  std::atomic<index_t> s{0};
  pool.parallel_for(1000, 10, [&](index_t b, index_t e) {
    for (index_t i = b; i < e; ++i) s += i;
  });
  CHECK(s == 999 * 1000 / 2);
}

TEST_CASE("several user threads may share one pool") {
  ThreadPool pool(2);
  std::atomic<long> sum{0};
  std::vector<std::thread> users;
  for (int u = 0; u < 4; ++u)
    users.emplace_back([&] {
      for (int rep = 0; rep < 200; ++rep) pool.parallel_for(64, 1, [&](index_t b, index_t e) { sum += long(e - b); });
    });
  for (auto& t : users) t.join();
  CHECK(sum == 4L * 200 * 64);
}

TEST_CASE("the global pool is sized from LRT_NUM_THREADS or the physical cores") {
  const char* env = std::getenv("LRT_NUM_THREADS");
  if (env) {
    CHECK(lrt::num_threads() == std::atoi(env));
  } else {
    CHECK(lrt::num_threads() == lrt::detail::physical_cores());
  }
  CHECK(lrt::detail::physical_cores() >= 1);
}

}  // namespace test_thread_pool
