// Feed a looptrace stream to an LRU cache model and report hit rates per tensor.
//
//   build/examples/lru_cache CAPACITY SPEC.yaml... [-D KEY=VALUE]...
//
// The cache holds CAPACITY elements (of any tensor); an access hits when its element
// is resident. The trace is pulled lazily, so any schedule length works.
#include <cstdlib>
#include <iostream>
#include <list>
#include <map>
#include <string>
#include <unordered_map>

#include "looptrace/stream.hpp"

namespace {

class LruCache {
 public:
  explicit LruCache(std::size_t capacity) : capacity_(capacity) {}

  // Touches (tensor, element); returns whether it was resident.
  bool touch(int tensor, std::int64_t element) {
    const Key key{tensor, element};
    auto it = where_.find(key);
    if (it != where_.end()) {
      order_.splice(order_.begin(), order_, it->second);
      return true;
    }
    order_.push_front(key);
    where_[key] = order_.begin();
    if (order_.size() > capacity_) {
      where_.erase(order_.back());
      order_.pop_back();
    }
    return false;
  }

 private:
  struct Key {
    int tensor;
    std::int64_t element;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const {
      return std::hash<std::int64_t>()(k.element * 31 + k.tensor);
    }
  };
  std::size_t capacity_;
  std::list<Key> order_;
  std::unordered_map<Key, std::list<Key>::iterator, KeyHash> where_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: lru_cache CAPACITY SPEC.yaml... [-D KEY=VALUE]...\n";
    return 2;
  }
  const std::size_t capacity = std::strtoull(argv[1], nullptr, 10);
  std::vector<std::string> files;
  looptrace::JinjaVariables vars;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-D" && i + 1 < argc) {
      std::string kv = argv[++i];
      auto eq = kv.find('=');
      vars[kv.substr(0, eq)] = looptrace::jinja_value_from_text(kv.substr(eq + 1));
    } else {
      files.push_back(arg);
    }
  }
  try {
    const looptrace::Schedule schedule = looptrace::compile_schedule(looptrace::load_spec(files, vars));
    LruCache cache(capacity);
    std::map<std::string, std::pair<std::int64_t, std::int64_t>> stats;  // tensor -> hits, accesses
    looptrace::AccessStream stream(schedule);
    for (const looptrace::Access& a : stream) {
      auto& [hits, total] = stats[std::string(a.tensor)];
      hits += cache.touch(schedule.traces[a.trace].tensor_index, a.element);
      ++total;
    }
    std::cout << "LRU cache of " << capacity << " elements over " << schedule.n_timesteps
              << " timesteps\n";
    for (const auto& [tensor, s] : stats)
      std::cout << "  " << tensor << ": " << s.first << " hits / " << s.second << " accesses ("
                << (s.second ? 100.0 * double(s.first) / double(s.second) : 0.0) << "% hit rate)\n";
  } catch (const looptrace::SpecError& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
  return 0;
}
