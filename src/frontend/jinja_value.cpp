// Template values with Python's semantics: str(), repr(), ==, truthiness.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "jinja_internal.hpp"
#include "support/suggest.hpp"

namespace looptrace {

JinjaValue::JinjaValue(JinjaList list, bool tuple)
    : v_(std::make_shared<JinjaList>(std::move(list))), tuple_(tuple) {}

JinjaValue::JinjaValue(JinjaDict dict) : v_(std::make_shared<JinjaDict>(std::move(dict))) {}

JinjaValue JinjaValue::make_namespace(JinjaDict attributes) {
  JinjaValue v(std::move(attributes));
  v.namespace_ = true;
  return v;
}

JinjaValue::Kind JinjaValue::kind() const {
  switch (v_.index()) {
    case 0: return Kind::None;
    case 1: return Kind::Bool;
    case 2: return Kind::Int;
    case 3: return Kind::Float;
    case 4: return Kind::String;
    case 5: return tuple_ ? Kind::Tuple : Kind::List;
    case 6: return Kind::Dict;
    case 7: return Kind::Undefined;
    default: return Kind::Callable;
  }
}

const JinjaValue* JinjaValue::find(const JinjaValue& key) const {
  if (!is_dict()) return nullptr;
  for (const auto& [k, v] : dict())
    if (k == key) return &v;
  return nullptr;
}

const JinjaValue* JinjaValue::find(std::string_view key) const {
  if (!is_dict()) return nullptr;
  for (const auto& [k, v] : dict())
    if (k.is_string() && k.as_string() == key) return &v;
  return nullptr;
}

namespace {

// Python's repr() of a float: the shortest text that reads back the same, in
// scientific notation below 1e-4 and from 1e16 on.
std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string s(buf, r.ptr);  // "-1.2345e+02"
  const bool negative = s[0] == '-';
  if (negative) s.erase(0, 1);
  const std::size_t e = s.find('e');
  std::string digits = s.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exponent = std::stoi(s.substr(e + 1));
  std::string out;
  if (exponent < -4 || exponent >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) {
      out += '.';
      out += digits.substr(1);
    }
    char ebuf[16];
    std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += ebuf;
  } else if (exponent < 0) {
    out = "0.";
    out.append(static_cast<std::size_t>(-exponent - 1), '0');
    out += digits;
  } else {
    const std::size_t int_digits = static_cast<std::size_t>(exponent) + 1;
    if (digits.size() <= int_digits) out = digits + std::string(int_digits - digits.size(), '0') + ".0";
    else {
      out = digits.substr(0, int_digits);
      out += '.';
      out += digits.substr(int_digits);
    }
  }
  return negative ? "-" + out : out;
}

std::string string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == static_cast<unsigned char>(quote)) out += std::string("\\") + quote;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + quote;
}

}  // namespace

std::string JinjaValue::str() const {
  switch (kind()) {
    case Kind::Undefined:
      if (undefined().lenient) return "";
      jinja::fail_undefined(*this);
    case Kind::None: return "None";
    case Kind::Bool: return as_bool() ? "True" : "False";
    case Kind::Int: return std::to_string(as_int());
    case Kind::Float: return float_repr(as_float());
    case Kind::String: return as_string();
    default: return repr();
  }
}

std::string JinjaValue::repr() const {
  switch (kind()) {
    case Kind::String: return string_repr(as_string());
    case Kind::List:
    case Kind::Tuple: {
      std::string out = is_tuple() ? "(" : "[";
      for (std::size_t i = 0; i < list().size(); ++i) out += (i ? ", " : "") + list()[i].repr();
      if (is_tuple() && list().size() == 1) out += ",";
      return out + (is_tuple() ? ")" : "]");
    }
    case Kind::Dict: {
      std::string out = namespace_ ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, v] : dict()) {
        out += (first ? "" : ", ") + k.repr() + ": " + v.repr();
        first = false;
      }
      return out + (namespace_ ? "}>" : "}");
    }
    case Kind::Undefined: return "Undefined";
    case Kind::Callable: return "<function " + callable().name + ">";
    default: return str();
  }
}

std::string JinjaValue::type_name() const {
  switch (kind()) {
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return "list";
    case Kind::Tuple: return "tuple";
    case Kind::Dict: return namespace_ ? "Namespace" : "dict";
    case Kind::Undefined: return "Undefined";
    case Kind::Callable: return "function";
  }
  return "?";
}

bool JinjaValue::truthy() const {
  switch (kind()) {
    case Kind::None: return false;
    case Kind::Bool: return as_bool();
    case Kind::Int: return as_int() != 0;
    case Kind::Float: return as_float() != 0;
    case Kind::String: return !as_string().empty();
    case Kind::List:
    case Kind::Tuple: return !list().empty();
    case Kind::Dict: return namespace_ || !dict().empty();
    case Kind::Undefined:
      if (undefined().lenient) return false;
      jinja::fail_undefined(*this);
    case Kind::Callable: return true;
  }
  return false;
}

JinjaValue JinjaValue::deep_copy() const {
  if (is_sequence()) {
    JinjaList items;
    for (const auto& x : list()) items.push_back(x.deep_copy());
    return JinjaValue(std::move(items), is_tuple());
  }
  if (is_dict()) {
    JinjaDict items;
    for (const auto& [k, v] : dict()) items.emplace_back(k, v.deep_copy());
    JinjaValue out(std::move(items));
    out.namespace_ = namespace_;
    return out;
  }
  return *this;
}

bool operator==(const JinjaValue& a, const JinjaValue& b) {
  using Kind = JinjaValue::Kind;
  if (a.is_undefined()) jinja::fail_undefined(a);
  if (b.is_undefined()) jinja::fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.is_float() ? a.as_float() : a.is_bool() ? a.as_bool() : double(a.as_int());
      const double y = b.is_float() ? b.as_float() : b.is_bool() ? b.as_bool() : double(b.as_int());
      return x == y;
    }
    const std::int64_t x = a.is_bool() ? a.as_bool() : a.as_int();
    const std::int64_t y = b.is_bool() ? b.as_bool() : b.as_int();
    return x == y;
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::None: return true;
    case Kind::String: return a.as_string() == b.as_string();
    case Kind::List:
    case Kind::Tuple: return a.list() == b.list();
    case Kind::Dict: {
      if (&a.dict() == &b.dict()) return true;
      if (a.dict().size() != b.dict().size()) return false;
      for (const auto& [k, v] : a.dict()) {
        const JinjaValue* other = b.find(k);
        if (!other || !(*other == v)) return false;
      }
      return true;
    }
    case Kind::Callable:
      return a.callable().name == b.callable().name && a.callable().kind == b.callable().kind;
    default: return false;
  }
}

// ---------------------------------------------------------------- -D values

JinjaValue to_jinja(const DefineValue& value) {
  return std::visit(
      [&](const auto& v) -> JinjaValue {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          return JinjaValue();
        } else if constexpr (std::is_same_v<T, DefineValue::List>) {
          JinjaList list;
          for (const DefineValue& item : v) list.push_back(to_jinja(item));
          return JinjaValue(std::move(list), value.is_tuple());
        } else if constexpr (std::is_same_v<T, DefineValue::Dict>) {
          JinjaDict dict;
          for (const auto& [k, item] : v) dict.emplace_back(to_jinja(k), to_jinja(item));
          return JinjaValue(std::move(dict));
        } else {
          return JinjaValue(v);
        }
      },
      value.value());
}

JinjaVariables to_jinja(const Defines& defines) {
  JinjaVariables out;
  for (const auto& [name, value] : defines) out.emplace(name, to_jinja(value));
  return out;
}

DefineValue define_value_from_text(std::string_view text) {
  const std::size_t sign = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
  const bool numeric = text.size() > sign && std::all_of(text.begin() + static_cast<std::ptrdiff_t>(sign),
                                                         text.end(), jinja::is_digit);
  if (numeric) {
    std::int64_t value = 0;
    const bool negative = text[0] == '-';
    for (std::size_t i = sign; i < text.size(); ++i) {
      // Accumulate toward the sign so that INT64_MIN fits.
      const int d = text[i] - '0';
      if (__builtin_mul_overflow(value, 10, &value) ||
          (negative ? __builtin_sub_overflow(value, d, &value) : __builtin_add_overflow(value, d, &value)))
        throw SpecError("the integer " + std::string(text) +
                        " does not fit in 64 bits (-9223372036854775808 to 9223372036854775807)");
    }
    return value;
  }
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "true") return true;
  if (lower == "false") return false;
  return std::string(text);
}

std::pair<std::string, DefineValue> parse_define(std::string_view text) {
  const std::size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0)
    throw SpecError("-D takes KEY=VALUE, not '" + std::string(text) + "'");
  std::string key(text.substr(0, eq));
  try {
    return {key, define_value_from_text(text.substr(eq + 1))};
  } catch (const SpecError& e) {
    throw SpecError("-D " + std::string(text) + ": " + e.message());
  }
}

// ---------------------------------------------------------------- helpers

namespace jinja {

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  const auto best = looptrace::closest(word, candidates);
  return best ? " (did you mean '" + *best + "'?)" : "";
}

std::string an(const JinjaValue& v) {
  const std::string t = v.type_name();
  return (std::string("aeiouAEIOU").find(t[0]) != std::string::npos ? "an " : "a ") + t;
}

[[noreturn]] void fail_undefined(const JinjaValue& v) {
  const JinjaUndefined& u = v.undefined();
  throw JinjaError(u.message.empty() ? "undefined variable '" + u.name + "'" : u.message);
}

const JinjaValue& defined(const JinjaValue& v) {
  if (v.is_undefined()) fail_undefined(v);
  return v;
}

}  // namespace jinja
}  // namespace looptrace
