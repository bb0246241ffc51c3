// Feed a looptrace stream to an LRU cache model and report hit rates per tensor.
//
//   build/examples/lru_cache CAPACITY SPEC.yaml... [-D KEY=VALUE]...
//
// The cache holds CAPACITY elements (of any tensor); an access hits when its element
// is resident. The trace is pulled lazily, so any schedule length works.
#include <charconv>
#include <fstream>
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

namespace {

struct UsageError {
  std::string message;
};

struct Arguments {
  std::size_t capacity = 0;
  std::vector<std::string> files;
  looptrace::Defines vars;
};

// Checked as looptrace checks its own: CAPACITY a whole number of at least 1 (strtoull
// would read "abc" as 0), files that exist, -D KEY=VALUE, no unknown option.
Arguments parse_arguments(int argc, char** argv) {
  if (argc < 3) throw UsageError{argc < 2 ? "no CAPACITY and no spec file" : "no spec file"};
  Arguments out;
  const std::string capacity = argv[1];
  const auto [end, error] = std::from_chars(capacity.data(), capacity.data() + capacity.size(), out.capacity);
  if (error == std::errc::result_out_of_range) throw UsageError{"CAPACITY '" + capacity + "' is too large"};
  if (error != std::errc() || end != capacity.data() + capacity.size() || out.capacity == 0)
    throw UsageError{"CAPACITY must be a whole number of elements, at least 1, not '" + capacity + "'"};
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-D") {
      if (i + 1 == argc) throw UsageError{"-D takes KEY=VALUE"};
      try {  // parse_define names the variable on a bad value
        out.vars.insert(looptrace::parse_define(argv[++i]));
      } catch (const looptrace::SpecError& e) {
        throw UsageError{e.message()};
      }
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw UsageError{"unknown option '" + arg + "'"};
    } else if (!std::ifstream(arg)) {
      throw UsageError{"cannot read the spec file '" + arg + "'"};
    } else {
      out.files.push_back(arg);
    }
  }
  if (out.files.empty()) throw UsageError{"no spec file"};
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Arguments args = parse_arguments(argc, argv);
    const looptrace::Schedule schedule = looptrace::compile_schedule(looptrace::load_spec(args.files, args.vars));
    LruCache cache(args.capacity);
    std::map<std::string, std::pair<std::int64_t, std::int64_t>> stats;  // tensor -> hits, accesses
    looptrace::AccessStream stream(schedule);
    for (const looptrace::Access& a : stream) {
      auto& [hits, total] = stats[std::string(a.tensor)];
      hits += cache.touch(schedule.traces[a.trace].tensor_index, a.element);
      ++total;
    }
    std::cout << "LRU cache of " << args.capacity << " elements over " << schedule.n_timesteps
              << " timesteps\n";
    for (const auto& [tensor, s] : stats)
      std::cout << "  " << tensor << ": " << s.first << " hits / " << s.second << " accesses ("
                << (s.second ? 100.0 * double(s.first) / double(s.second) : 0.0) << "% hit rate)\n";
  } catch (const UsageError& e) {  // bad arguments: exit status 2, as looptrace's
    std::cerr << "lru_cache: error: " << e.message << "\n"
              << "usage: lru_cache CAPACITY SPEC.yaml... [-D KEY=VALUE]...\n";
    return 2;
  } catch (const looptrace::SpecError& e) {
    std::cerr << "lru_cache: error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
