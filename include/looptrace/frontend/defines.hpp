// -D values: what a caller passes to load_spec for the spec files' Jinja templates,
// as Python values (AccelForge's jinja_parse_data): None, bool, int, float, str, and
// lists, tuples and dicts of them. The template engine's own values (callables,
// undefined names, lists shared between names) are internal to it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace looptrace {

class DefineValue {
 public:
  using List = std::vector<DefineValue>;
  using Dict = std::vector<std::pair<DefineValue, DefineValue>>;  // insertion order, as Python
  using Variant = std::variant<std::monostate, bool, std::int64_t, double, std::string, List, Dict>;

  DefineValue() = default;  // None
  DefineValue(bool b) : v_(b) {}
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  DefineValue(T i) : v_(static_cast<std::int64_t>(i)) {}
  DefineValue(double d) : v_(d) {}
  DefineValue(std::string s) : v_(std::move(s)) {}
  DefineValue(std::string_view s) : v_(std::string(s)) {}
  DefineValue(const char* s) : v_(std::string(s)) {}
  DefineValue(List list, bool tuple = false) : v_(std::move(list)), tuple_(tuple) {}
  DefineValue(Dict dict) : v_(std::move(dict)) {}

  // std::visit it: monostate is None, List a list (a tuple when is_tuple()).
  const Variant& value() const { return v_; }
  bool is_tuple() const { return tuple_; }

  friend bool operator==(const DefineValue&, const DefineValue&) = default;

 private:
  Variant v_;
  bool tuple_ = false;
};

// The -D values of one load, by name.
using Defines = std::map<std::string, DefineValue, std::less<>>;

// "-D KEY=VALUE" text to a value: True/False (any case) give booleans; text that looks
// like an integer gives an integer and throws SpecError when it does not fit in 64
// bits; anything else is a string.
DefineValue define_value_from_text(std::string_view text);

// "KEY=VALUE" to (KEY, value), as every caller of -D should read it. Throws SpecError
// naming the variable (or the text, when there is no KEY=).
std::pair<std::string, DefineValue> parse_define(std::string_view text);

}  // namespace looptrace
