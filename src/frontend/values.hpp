// The values of AccelForge's spec language as the template engine holds them (Python's:
// None, bool, int, float, str, list, tuple, dict, and callables and undefined names).
// Internal: callers pass -D values as DefineValue (looptrace/frontend/defines.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "looptrace/support/error.hpp"
#include "looptrace/frontend/defines.hpp"

namespace looptrace {

class JinjaValue;
using JinjaList = std::vector<JinjaValue>;
using JinjaDict = std::vector<std::pair<JinjaValue, JinjaValue>>;  // insertion order, as Python
struct JinjaCallable;                                                // a function value (internal)

// An undefined name, kept so that `is defined` and `default` can see it and anything
// else can say what was undefined.
struct JinjaUndefined {
  std::string name;     // the variable, or "d.key" for a missing attribute or item
  std::string message;  // what using it says: "undefined variable 'x' (did you mean 'y'?)"
  // Jinja's plain Undefined (what `a if c` gives when c is false): prints as "", is
  // false and iterates as empty; anything else still fails.
  bool lenient = false;
};

class JinjaValue {
 public:
  enum class Kind { None, Bool, Int, Float, String, List, Tuple, Dict, Undefined, Callable };

  JinjaValue() = default;  // None
  JinjaValue(bool b) : v_(b) {}
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  JinjaValue(T i) : v_(static_cast<std::int64_t>(i)) {}
  JinjaValue(double d) : v_(d) {}
  JinjaValue(std::string s) : v_(std::move(s)) {}
  JinjaValue(std::string_view s) : v_(std::string(s)) {}
  JinjaValue(const char* s) : v_(std::string(s)) {}
  JinjaValue(JinjaList list, bool tuple = false);
  JinjaValue(JinjaDict dict);
  JinjaValue(JinjaUndefined u) : v_(std::make_shared<const JinjaUndefined>(std::move(u))) {}
  explicit JinjaValue(std::shared_ptr<const JinjaCallable> f) : v_(std::move(f)) {}

  Kind kind() const;
  bool is_none() const { return kind() == Kind::None; }
  bool is_undefined() const { return kind() == Kind::Undefined; }
  bool is_bool() const { return kind() == Kind::Bool; }
  bool is_int() const { return kind() == Kind::Int; }      // not bool
  bool is_float() const { return kind() == Kind::Float; }
  bool is_number() const { return is_bool() || is_int() || is_float(); }
  bool is_string() const { return kind() == Kind::String; }
  bool is_list() const { return kind() == Kind::List; }
  bool is_tuple() const { return kind() == Kind::Tuple; }
  bool is_sequence() const { return is_list() || is_tuple(); }
  bool is_dict() const { return kind() == Kind::Dict; }
  bool is_namespace() const { return is_dict() && namespace_; }
  bool is_callable() const { return kind() == Kind::Callable; }

  bool as_bool() const { return std::get<bool>(v_); }
  std::int64_t as_int() const { return std::get<std::int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  const std::string& as_string() const { return std::get<std::string>(v_); }
  // Lists, tuples and dicts are shared, as Python objects are: `d.update()` and
  // `l.append()` change every name that refers to them.
  JinjaList& list() const { return *std::get<std::shared_ptr<JinjaList>>(v_); }
  JinjaDict& dict() const { return *std::get<std::shared_ptr<JinjaDict>>(v_); }
  const JinjaUndefined& undefined() const { return *std::get<std::shared_ptr<const JinjaUndefined>>(v_); }
  const JinjaCallable& callable() const { return *std::get<std::shared_ptr<const JinjaCallable>>(v_); }

  static JinjaValue make_namespace(JinjaDict attributes);
  // The value of `key` in a dict, or nullptr.
  const JinjaValue* find(const JinjaValue& key) const;
  const JinjaValue* find(std::string_view key) const;
  const JinjaValue* find(const std::string& key) const { return find(std::string_view(key)); }
  const JinjaValue* find(const char* key) const { return find(std::string_view(key)); }

  std::string str() const;   // Python's str(): what {{ }} prints
  std::string repr() const;  // Python's repr(): how a list prints its items
  std::string type_name() const;  // "int", "str", "list", ...
  bool truthy() const;            // Python's bool(); an undefined value throws
  JinjaValue deep_copy() const;   // lists and dicts copied, not shared

  // Python's ==: 1 == 1.0 == True, lists and dicts by content, different types unequal.
  friend bool operator==(const JinjaValue& a, const JinjaValue& b);
  friend bool operator!=(const JinjaValue& a, const JinjaValue& b) { return !(a == b); }

 private:
  std::variant<std::monostate, bool, std::int64_t, double, std::string, std::shared_ptr<JinjaList>,
               std::shared_ptr<JinjaDict>, std::shared_ptr<const JinjaUndefined>,
               std::shared_ptr<const JinjaCallable>>
      v_;
  bool tuple_ = false;      // a list that prints as (a, b)
  bool namespace_ = false;  // a dict whose attributes `set ns.x = ...` may assign
};

using JinjaVariables = std::map<std::string, JinjaValue, std::less<>>;

// A -D value as the engine holds it (lists and dicts fresh, not shared).
JinjaValue to_jinja(const DefineValue& value);
JinjaVariables to_jinja(const Defines& defines);

}  // namespace looptrace
