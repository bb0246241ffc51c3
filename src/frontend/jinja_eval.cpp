// Evaluating Jinja expressions with Python's semantics: operators, attributes and
// items, function calls, Jinja's filters and tests, Python's math functions.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <numeric>
#include <cstdio>
#include <limits>

#include "jinja_internal.hpp"

namespace looptrace::jinja {

namespace {

using Kwargs = std::vector<std::pair<std::string, JinjaValue>>;

[[noreturn]] void type_error(const std::string& message) { throw JinjaError(message); }

bool is_integral(const JinjaValue& v) { return v.is_int() || v.is_bool(); }

std::int64_t int_of(const JinjaValue& v) { return v.is_bool() ? v.as_bool() : v.as_int(); }

double float_of(const JinjaValue& v) { return v.is_float() ? v.as_float() : double(int_of(v)); }

[[noreturn]] void overflow() { throw JinjaError("integer overflow (looptrace computes with 64-bit integers)"); }

std::int64_t add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) overflow();
  return r;
}
std::int64_t sub(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) overflow();
  return r;
}
std::int64_t mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) overflow();
  return r;
}

std::int64_t floor_div(std::int64_t x, std::int64_t y) {
  if (y == 0) throw JinjaError("division by zero");
  if (x == std::numeric_limits<std::int64_t>::min() && y == -1) overflow();
  std::int64_t q = x / y;
  if (x % y != 0 && ((x < 0) != (y < 0))) --q;
  return q;
}

std::int64_t floor_mod(std::int64_t x, std::int64_t y) {
  if (y == 0) throw JinjaError("division by zero");
  if (y == -1) return 0;  // x % -1 overflows for INT64_MIN in C++
  std::int64_t r = x % y;
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return r;
}

std::int64_t int_pow(std::int64_t base, std::int64_t exp) {
  std::int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) result = mul(result, base);
    exp >>= 1;
    if (exp) base = mul(base, base);
  }
  return result;
}

std::string repeat(const std::string& s, std::int64_t n) {
  if (n <= 0 || s.empty()) return {};
  if (static_cast<std::size_t>(n) > kMaxString / s.size()) throw JinjaError("string too long");
  std::string out;
  out.reserve(s.size() * static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) out += s;
  return out;
}

[[noreturn]] void unsupported(const std::string& op, const JinjaValue& a, const JinjaValue& b) {
  type_error("unsupported operand types for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

// Python's int(): from bools, ints, floats (truncating) and integer text.
std::int64_t to_int(const JinjaValue& v, int base = 10) {
  if (is_integral(v)) return int_of(v);
  if (v.is_float()) {
    const double d = v.as_float();
    if (!std::isfinite(d)) type_error("cannot convert " + v.str() + " to an integer");
    if (d >= 9.2233720368547758e18 || d < -9.2233720368547758e18) overflow();
    return static_cast<std::int64_t>(d);
  }
  if (v.is_string()) {
    std::string s = v.as_string();
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    std::size_t b = 0, e = s.size();
    while (b < e && is_space(s[b])) ++b;
    while (e > b && is_space(s[e - 1])) --e;
    s = s.substr(b, e - b);
    errno = 0;
    char* end = nullptr;
    const long long r = std::strtoll(s.c_str(), &end, base);
    if (!s.empty() && end == s.c_str() + s.size()) {
      if (errno == ERANGE) overflow();
      return r;
    }
  }
  type_error("invalid literal for int(): " + v.repr());
}

double to_float(const JinjaValue& v) {
  if (v.is_number()) return float_of(v);
  if (v.is_string()) {
    const std::string& s = v.as_string();
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size()) return d;
  }
  type_error("could not convert " + v.repr() + " to float");
}

// Python's round(): half to even.
double round_half_even(double x, std::int64_t digits) {
  const double scale = std::pow(10.0, static_cast<double>(digits));
  const double y = x * scale;
  double r = std::nearbyint(y);  // the default rounding mode is to nearest, ties to even
  return r / scale;
}

const JinjaValue* kwarg(const Kwargs& kwargs, std::string_view name) {
  for (const auto& [k, v] : kwargs)
    if (k == name) return &v;
  return nullptr;
}

// Argument `index` or keyword `name`, or `fallback`.
JinjaValue arg(const std::vector<JinjaValue>& args, const Kwargs& kwargs, std::size_t index,
               std::string_view name, JinjaValue fallback = {}) {
  if (index < args.size()) return args[index];
  if (const JinjaValue* v = kwarg(kwargs, name)) return *v;
  return fallback;
}

void expect_args(const std::string& f, const std::vector<JinjaValue>& args, std::size_t lo, std::size_t hi) {
  if (args.size() < lo || args.size() > hi)
    type_error(f + "() takes " + (lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi)) +
               " argument" + (hi == 1 ? "" : "s") + ", not " + std::to_string(args.size()));
}

// The strings of a list of UTF-8 code points.
std::vector<std::string> characters(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    n = std::min(n, s.size() - i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string strip(const std::string& s, const std::string* chars, bool left, bool right) {
  auto strippable = [&](char c) { return chars ? chars->find(c) != std::string::npos : is_space(c); };
  std::size_t b = 0, e = s.size();
  if (left)
    while (b < e && strippable(s[b])) ++b;
  if (right)
    while (e > b && strippable(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, std::int64_t count) {
  if (from.empty()) {
    // Python inserts `to` around every character.
    std::string out;
    std::int64_t n = 0;
    for (const auto& ch : characters(s)) {
      if (count < 0 || n++ < count) out += to;
      out += ch;
    }
    if (count < 0 || n < count) out += to;
    return out;
  }
  std::string out;
  std::size_t pos = 0;
  std::int64_t n = 0;
  for (std::size_t hit; (count < 0 || n < count) && (hit = s.find(from, pos)) != std::string::npos; ++n) {
    out += s.substr(pos, hit - pos) + to;
    if (out.size() > kMaxString) throw JinjaError("string too long");
    pos = hit + from.size();
  }
  return out + s.substr(pos);
}

std::vector<std::string> split(const std::string& s, const JinjaValue& sep, std::int64_t max_split) {
  std::vector<std::string> out;
  if (sep.is_none()) {
    std::size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && is_space(s[i])) ++i;
      if (i >= s.size()) break;
      if (max_split >= 0 && std::int64_t(out.size()) == max_split) {
        std::size_t e = s.size();
        while (e > i && is_space(s[e - 1])) --e;
        out.push_back(s.substr(i, e - i));
        break;
      }
      std::size_t j = i;
      while (j < s.size() && !is_space(s[j])) ++j;
      out.push_back(s.substr(i, j - i));
      i = j;
    }
    return out;
  }
  const std::string& d = defined(sep).is_string() ? sep.as_string() : (type_error("split() needs a string separator"), sep.as_string());
  if (d.empty()) type_error("empty separator");
  std::size_t pos = 0;
  for (std::size_t hit; (max_split < 0 || std::int64_t(out.size()) < max_split) &&
                        (hit = s.find(d, pos)) != std::string::npos;) {
    out.push_back(s.substr(pos, hit - pos));
    pos = hit + d.size();
  }
  out.push_back(s.substr(pos));
  return out;
}

JinjaValue string_list(const std::vector<std::string>& items) {
  JinjaList out;
  for (const auto& s : items) out.emplace_back(s);
  return JinjaValue(std::move(out));
}

// Sorting and min/max: numbers with numbers, strings with strings (optionally ignoring
// case), sequences lexicographically.
bool less_than(const JinjaValue& a, const JinjaValue& b, bool case_sensitive = true) {
  if (!case_sensitive && a.is_string() && b.is_string()) return lower(a.as_string()) < lower(b.as_string());
  return compare_op("<", a, b);
}

JinjaValue attribute_of(Evaluator& ev, const JinjaValue& item, const JinjaValue& attribute) {
  if (attribute.is_none()) return item;
  if (attribute.is_int()) return ev.get_item(item, attribute);
  JinjaValue v = item;
  for (const auto& part : split(defined(attribute).str(), JinjaValue("."), -1))
    v = ev.get_item(v, !part.empty() && std::all_of(part.begin(), part.end(), is_digit)
                           ? JinjaValue(std::stoll(part))
                           : JinjaValue(part));
  return v;
}

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '<': out += "\\u003c"; break;  // Jinja's tojson is HTML-safe
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      case '\'': out += "\\u0027"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string to_json(const JinjaValue& v, int indent, int level) {
  const std::string nl = indent > 0 ? "\n" + std::string(std::size_t(indent * (level + 1)), ' ') : "";
  const std::string close = indent > 0 ? "\n" + std::string(std::size_t(indent * level), ' ') : "";
  const std::string sep = indent > 0 ? "," : ", ";
  switch (v.kind()) {
    case JinjaValue::Kind::None: return "null";
    case JinjaValue::Kind::Bool: return v.as_bool() ? "true" : "false";
    case JinjaValue::Kind::Int: return v.str();
    case JinjaValue::Kind::Float: {
      const double d = v.as_float();
      return std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : v.str();
    }
    case JinjaValue::Kind::String: return json_quote(v.as_string());
    case JinjaValue::Kind::List:
    case JinjaValue::Kind::Tuple: {
      if (v.list().empty()) return "[]";
      std::string out = "[";
      for (std::size_t i = 0; i < v.list().size(); ++i) out += (i ? sep : "") + nl + to_json(v.list()[i], indent, level + 1);
      return out + close + "]";
    }
    case JinjaValue::Kind::Dict: {
      if (v.dict().empty()) return "{}";
      std::vector<std::pair<std::string, const JinjaValue*>> items;  // sorted by key, as Jinja does
      for (const auto& [k, x] : v.dict()) items.emplace_back(k.str(), &x);
      std::sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      std::string out = "{";
      for (std::size_t i = 0; i < items.size(); ++i)
        out += (i ? sep : "") + nl + json_quote(items[i].first) + ": " + to_json(*items[i].second, indent, level + 1);
      return out + close + "}";
    }
    case JinjaValue::Kind::Undefined: fail_undefined(v);
    default: type_error(an(v) + " cannot be written as JSON");
  }
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string title_case(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    const bool alpha = std::isalpha(static_cast<unsigned char>(c)) != 0;
    c = static_cast<char>(start ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
    start = !alpha;
  }
  return out;
}

std::string capitalize(const std::string& s) {
  std::string out = lower(s);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

JinjaValue items_of(const JinjaValue& d) {
  JinjaList out;
  for (const auto& [k, v] : d.dict()) out.push_back(JinjaValue(JinjaList{k, v}, true));
  return JinjaValue(std::move(out));
}

// str.format with {}, {0} and {name} fields (no format specs).
std::string python_format(const std::string& f, const std::vector<JinjaValue>& args, const Kwargs& kwargs) {
  std::string out;
  std::size_t auto_index = 0;
  for (std::size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '{' && i + 1 < f.size() && f[i + 1] == '{') { out += '{'; ++i; continue; }
    if (f[i] == '}' && i + 1 < f.size() && f[i + 1] == '}') { out += '}'; ++i; continue; }
    if (f[i] != '{') { out += f[i]; continue; }
    const std::size_t close = f.find('}', i);
    if (close == std::string::npos) type_error("format(): a '{' is not closed");
    const std::string field = f.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!") != std::string::npos) type_error("format(): format specs are not supported");
    const JinjaValue* v = nullptr;
    if (field.empty()) {
      if (auto_index < args.size()) v = &args[auto_index++];
    } else if (std::all_of(field.begin(), field.end(), is_digit)) {
      const std::size_t k = std::stoul(field);
      if (k < args.size()) v = &args[k];
    } else {
      v = kwarg(kwargs, field);
    }
    if (!v) type_error("format(): no argument for {" + field + "}");
    out += defined(*v).str();
    i = close;
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------- operators

JinjaValue binary_op(const std::string& op, const JinjaValue& a_, const JinjaValue& b_) {
  const JinjaValue& a = defined(a_);
  const JinjaValue& b = defined(b_);
  if (op == "~") {
    std::string s = a.str() + b.str();
    if (s.size() > kMaxString) throw JinjaError("string too long");
    return s;
  }
  if (a.is_number() && b.is_number()) {
    if (op == "/") {
      const double y = float_of(b);
      if (y == 0) throw JinjaError("division by zero");
      return float_of(a) / y;
    }
    if (is_integral(a) && is_integral(b)) {
      const std::int64_t x = int_of(a), y = int_of(b);
      if (op == "+") return add(x, y);
      if (op == "-") return sub(x, y);
      if (op == "*") return mul(x, y);
      if (op == "//") return floor_div(x, y);
      if (op == "%") return floor_mod(x, y);
      if (op == "**") {
        if (y >= 0) return int_pow(x, y);
        if (x == 0) throw JinjaError("0 cannot be raised to a negative power");
        return std::pow(double(x), double(y));
      }
    } else {
      const double x = float_of(a), y = float_of(b);
      if (op == "+") return x + y;
      if (op == "-") return x - y;
      if (op == "*") return x * y;
      if (op == "//" || op == "%") {
        if (y == 0) throw JinjaError("division by zero");
        double m = std::fmod(x, y);
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        if (op == "%") return m;
        return std::floor((x - m) / y + 0.5);  // exact floor division, as Python's divmod
      }
      if (op == "**") {
        if (x == 0 && y < 0) throw JinjaError("0 cannot be raised to a negative power");
        return std::pow(x, y);
      }
    }
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      if (a.as_string().size() + b.as_string().size() > kMaxString) throw JinjaError("string too long");
      return a.as_string() + b.as_string();
    }
    if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
      if (a.list().size() + b.list().size() > kMaxItems) throw JinjaError("list too long");
      JinjaList out = a.list();
      out.insert(out.end(), b.list().begin(), b.list().end());
      return JinjaValue(std::move(out), a.is_tuple());
    }
  }
  if (op == "*") {
    const JinjaValue* seq = a.is_string() || a.is_sequence() ? &a : b.is_string() || b.is_sequence() ? &b : nullptr;
    const JinjaValue* count = seq == &a ? &b : &a;
    if (seq && is_integral(*count)) {
      const std::int64_t n = int_of(*count);
      if (seq->is_string()) return repeat(seq->as_string(), n);
      JinjaList out;
      if (n > 0 && !seq->list().empty()) {
        if (static_cast<std::size_t>(n) > kMaxItems / seq->list().size()) throw JinjaError("list too long");
        for (std::int64_t i = 0; i < n; ++i) out.insert(out.end(), seq->list().begin(), seq->list().end());
      }
      return JinjaValue(std::move(out), seq->is_tuple());
    }
  }
  if (op == "%" && a.is_string()) return printf_format(a.as_string(), b);
  unsupported(op, a, b);
}

bool compare_op(const std::string& op, const JinjaValue& a_, const JinjaValue& b_) {
  const JinjaValue& a = defined(a_);
  const JinjaValue& b = defined(b_);
  if (op == "==") return a == b;
  if (op == "!=") return !(a == b);
  if (op == "in") return contains(b, a);
  if (op == "not in") return !contains(b, a);
  int c = 0;
  if (a.is_number() && b.is_number()) {
    if (is_integral(a) && is_integral(b)) c = int_of(a) < int_of(b) ? -1 : int_of(a) > int_of(b);
    else {
      const double x = float_of(a), y = float_of(b);
      if (std::isnan(x) || std::isnan(y)) return false;
      c = x < y ? -1 : x > y;
    }
  } else if (a.is_string() && b.is_string()) {
    c = a.as_string().compare(b.as_string());
  } else if (a.kind() == b.kind() && a.is_sequence()) {
    const JinjaList &x = a.list(), &y = b.list();
    std::size_t i = 0;
    while (i < x.size() && i < y.size() && x[i] == y[i]) ++i;
    if (i < x.size() && i < y.size()) return compare_op(op, x[i], y[i]);
    c = x.size() < y.size() ? -1 : x.size() > y.size();
  } else {
    type_error("'" + op + "' is not supported between " + an(a) + " and " + an(b));
  }
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

bool contains(const JinjaValue& container, const JinjaValue& item) {
  defined(container);
  defined(item);
  if (container.is_string()) {
    if (!item.is_string()) type_error("'in <string>' needs a string on the left, not " + an(item));
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_sequence())
    return std::any_of(container.list().begin(), container.list().end(), [&](const JinjaValue& x) { return x == item; });
  if (container.is_dict()) return container.find(item) != nullptr;
  type_error(an(container) + " is not a container ('in' needs a string, list, tuple or dict)");
}

// printf-style formatting: `"%d items" % n`, `"%s-%s" % (a, b)`, `"%(x)s" % d`.
std::string printf_format(const std::string& format, const JinjaValue& args_) {
  const JinjaValue& args = defined(args_);
  const bool by_name = args.is_dict();
  std::vector<JinjaValue> items = args.is_tuple() ? args.list() : std::vector<JinjaValue>{args};
  std::size_t next = 0;
  std::string out;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i >= format.size()) type_error("incomplete format");
    if (format[i] == '%') {
      out += '%';
      continue;
    }
    const JinjaValue* value = nullptr;
    if (format[i] == '(') {
      const std::size_t close = format.find(')', i);
      if (close == std::string::npos || !by_name) type_error("format requires a mapping");
      value = args.find(format.substr(i + 1, close - i - 1));
      if (!value) type_error("no key '" + format.substr(i + 1, close - i - 1) + "' for the format");
      i = close + 1;
    }
    std::string spec = "%";
    while (i < format.size() && std::strchr("-+ #0", format[i])) spec += format[i++];
    while (i < format.size() && (is_digit(format[i]) || format[i] == '.')) spec += format[i++];
    if (i >= format.size()) type_error("incomplete format");
    const char conv = format[i];
    if (!value) {
      if (next >= items.size()) type_error("not enough arguments for the format string");
      value = &items[next++];
    }
    defined(*value);
    char buf[512];
    if (std::strchr("diu", conv)) {
      spec += "lld";
      std::snprintf(buf, sizeof buf, spec.c_str(), static_cast<long long>(is_integral(*value) ? int_of(*value) : to_int(*value)));
      out += buf;
    } else if (std::strchr("xXo", conv)) {
      spec += std::string("ll") + conv;
      std::snprintf(buf, sizeof buf, spec.c_str(), static_cast<long long>(to_int(*value)));
      out += buf;
    } else if (std::strchr("eEfFgG", conv)) {
      spec += conv;
      std::snprintf(buf, sizeof buf, spec.c_str(), to_float(*value));
      out += buf;
    } else if (conv == 's' || conv == 'r' || conv == 'a') {
      const std::string s = conv == 's' ? value->str() : value->repr();
      spec += 's';
      if (spec == "%s") out += s;
      else {
        std::snprintf(buf, sizeof buf, spec.c_str(), s.c_str());
        out += buf;
      }
    } else {
      type_error(std::string("unsupported format character '") + conv + "'");
    }
    if (out.size() > kMaxString) throw JinjaError("string too long");
  }
  if (!by_name && next < items.size() && args.is_tuple())
    type_error("not all arguments converted during string formatting");
  return out;
}

// ---------------------------------------------------------------- evaluation

void Evaluator::charge(std::int64_t n) {
  if (!budget_) return;
  if (n > *budget_) throw JinjaError("more than " + std::to_string(limit_) + " loop iterations in total");
  *budget_ -= n;
}

JinjaList Evaluator::iterate(const JinjaValue& v) {
  if (v.is_undefined() && v.undefined().lenient) return {};
  switch (defined(v).kind()) {
    case JinjaValue::Kind::List:
    case JinjaValue::Kind::Tuple: return v.list();
    case JinjaValue::Kind::Dict: {
      JinjaList keys;
      for (const auto& [k, x] : v.dict()) keys.push_back(k);
      return keys;
    }
    case JinjaValue::Kind::String: {
      JinjaList out;
      for (auto& c : characters(v.as_string())) out.emplace_back(std::move(c));
      return out;
    }
    default: type_error(an(v) + " is not iterable");
  }
}

bool has_method(const JinjaValue& self, std::string_view name);  // below, by the method tables

JinjaValue Evaluator::get_attr(const JinjaValue& obj, const std::string& name) {
  defined(obj);
  // A namespace's attributes are its keys; a tuple has only index and count.
  const bool is_method = !obj.is_namespace() && has_method(obj, name) &&
                         (!obj.is_tuple() || name == "index" || name == "count");
  if (is_method)
    return JinjaValue(std::make_shared<const JinjaCallable>(JinjaCallable{JinjaCallable::Kind::Method, name, obj, nullptr}));
  if (obj.is_dict())
    if (const JinjaValue* v = obj.find(name)) return *v;
  std::vector<std::string> keys;
  if (obj.is_dict())
    for (const auto& [k, v] : obj.dict())
      if (k.is_string()) keys.push_back(k.as_string());
  return JinjaUndefined{name, an(obj) + " has no attribute '" + name + "'" + did_you_mean(name, keys)};
}

JinjaValue Evaluator::get_item(const JinjaValue& obj, const JinjaValue& key) {
  defined(obj);
  defined(key);
  if (obj.is_dict()) {
    if (const JinjaValue* v = obj.find(key)) return *v;
    if (key.is_string() && !obj.is_namespace()) return get_attr(obj, key.as_string());
    std::vector<std::string> keys;
    for (const auto& [k, v] : obj.dict())
      if (k.is_string()) keys.push_back(k.as_string());
    return JinjaUndefined{key.str(), "the dict has no key " + key.repr() + (key.is_string() ? did_you_mean(key.as_string(), keys) : "")};
  }
  if ((obj.is_sequence() || obj.is_string()) && is_integral(key)) {
    const std::int64_t n = obj.is_string() ? std::int64_t(obj.as_string().size()) : std::int64_t(obj.list().size());
    std::int64_t i = int_of(key);
    if (i < 0) i += n;
    if (i < 0 || i >= n)
      return JinjaUndefined{key.str(), "index " + key.str() + " is out of range (the " + obj.type_name() +
                                           " has " + std::to_string(n) + " items)"};
    if (obj.is_string()) return obj.as_string().substr(std::size_t(i), 1);
    return obj.list()[std::size_t(i)];
  }
  if (key.is_string()) return get_attr(obj, key.as_string());
  return JinjaUndefined{key.str(), an(obj) + " cannot be indexed with " + an(key)};
}

namespace {

// A name -> function table, sorted by name so that a lookup is a binary search.
template <class F>
struct Named {
  std::string_view name;
  F fn;
};

template <class E, std::size_t N>
constexpr bool sorted_by_name(const E (&table)[N]) {
  return std::is_sorted(std::begin(table), std::end(table), [](const E& a, const E& b) { return a.name < b.name; });
}

// The entry of `table` named `name`, or null.
template <class E, std::size_t N>
const E* find_named(const E (&table)[N], std::string_view name) {
  const E* it = std::lower_bound(std::begin(table), std::end(table), name,
                                 [](const E& e, std::string_view n) { return e.name < n; });
  return it != std::end(table) && it->name == name ? it : nullptr;
}

// A name that no variable has: a built-in function or, in Python, one of math's constants.
JinjaValue unbound_name(const std::string& name, const JinjaValue& undefined, bool python) {
  if (is_builtin_global(name, python)) {
    return JinjaValue(std::make_shared<const JinjaCallable>(JinjaCallable{JinjaCallable::Kind::Builtin, name, {}, nullptr}));
  }
  if (python) {
    if (name == "pi") return M_PI;
    if (name == "e") return M_E;
    if (name == "tau") return 2 * M_PI;
    if (name == "inf") return std::numeric_limits<double>::infinity();
    if (name == "nan") return std::numeric_limits<double>::quiet_NaN();
    fail_undefined(undefined);  // Python fails at once
  }
  return undefined;
}

JinjaValue dict_literal(Evaluator& ev, const Expr& e) {
  JinjaValue out{JinjaDict{}};
  for (std::size_t i = 0; i + 1 < e.children.size(); i += 2) {
    JinjaValue k = defined(ev.eval(*e.children[i]));
    if (k.is_sequence() && !k.is_tuple()) type_error("a list cannot be a dict key");
    JinjaValue v = defined(ev.eval(*e.children[i + 1]));
    bool replaced = false;
    for (auto& [ok, ov] : out.dict())
      if (ok == k) { ov = v; replaced = true; }
    if (!replaced) out.dict().emplace_back(std::move(k), std::move(v));
  }
  return out;
}

JinjaValue slice_of(Evaluator& ev, const Expr& e) {
  const JinjaValue obj = defined(ev.eval(*e.children[0]));
  if (!obj.is_sequence() && !obj.is_string()) type_error(an(obj) + " cannot be sliced");
  auto part = [&](int k) -> std::optional<std::int64_t> {
    if (!e.children[std::size_t(k)]) return std::nullopt;
    JinjaValue v = defined(ev.eval(*e.children[std::size_t(k)]));
    if (v.is_none()) return std::nullopt;
    if (!is_integral(v)) type_error("slice indices must be integers");
    return int_of(v);
  };
  const std::optional<std::int64_t> start = part(1), stop = part(2), step_opt = part(3);
  const std::int64_t step = step_opt.value_or(1);
  if (step == 0) type_error("slice step cannot be zero");
  std::vector<JinjaValue> chars;
  const JinjaList& items = obj.is_string() ? (chars = ev.iterate(obj)) : obj.list();
  const std::int64_t n = std::int64_t(items.size());
  auto clamp = [&](std::optional<std::int64_t> i, std::int64_t fallback) {
    if (!i) return fallback;
    std::int64_t v = *i < 0 ? *i + n : *i;
    if (step > 0) return std::clamp<std::int64_t>(v, 0, n);
    return std::clamp<std::int64_t>(v, -1, n - 1);
  };
  const std::int64_t b = clamp(start, step > 0 ? 0 : n - 1), stop_i = clamp(stop, step > 0 ? n : -1);
  JinjaList out;
  for (std::int64_t i = b; step > 0 ? i < stop_i : i > stop_i; i += step) out.push_back(items[std::size_t(i)]);
  if (obj.is_string()) {
    std::string s;
    for (const auto& c : out) s += c.as_string();
    return s;
  }
  return JinjaValue(std::move(out), obj.is_tuple());
}

}  // namespace

JinjaValue Evaluator::eval(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Literal: return e.value;
    case ExprKind::Name: {
      JinjaValue v = lookup(e.name);
      return v.is_undefined() ? unbound_name(e.name, v, python_) : v;
    }
    case ExprKind::List:
    case ExprKind::Tuple: {
      JinjaList items;
      for (const auto& c : e.children) items.push_back(defined(eval(*c)));
      return JinjaValue(std::move(items), e.kind == ExprKind::Tuple);
    }
    case ExprKind::Dict: return dict_literal(*this, e);
    case ExprKind::Unary: {
      const JinjaValue v = defined(eval(*e.children[0]));
      if (!v.is_number()) type_error("bad operand type for unary " + e.name + ": '" + v.type_name() + "'");
      if (e.name == "+") return v.is_bool() ? JinjaValue(int_of(v)) : v;
      if (v.is_float()) return -v.as_float();
      return sub(0, int_of(v));
    }
    case ExprKind::Binary: return binary_op(e.name, eval(*e.children[0]), eval(*e.children[1]));
    case ExprKind::And: {
      JinjaValue lhs = eval(*e.children[0]);
      return lhs.truthy() ? eval(*e.children[1]) : lhs;
    }
    case ExprKind::Or: {
      JinjaValue lhs = eval(*e.children[0]);
      return lhs.truthy() ? lhs : eval(*e.children[1]);
    }
    case ExprKind::Not: return !eval(*e.children[0]).truthy();
    case ExprKind::Compare: {
      JinjaValue lhs = eval(*e.children[0]);
      for (std::size_t i = 0; i < e.ops.size(); ++i) {
        JinjaValue rhs = eval(*e.children[i + 1]);
        if (!compare_op(e.ops[i], lhs, rhs)) return false;
        lhs = std::move(rhs);
      }
      return true;
    }
    case ExprKind::Cond: {
      if (eval(*e.children[1]).truthy()) return eval(*e.children[0]);
      if (e.children[2]) return eval(*e.children[2]);
      return JinjaUndefined{"if", "an inline 'if' without 'else' was false, and its value is used", true};
    }
    case ExprKind::GetAttr: return get_attr(eval(*e.children[0]), e.name);
    case ExprKind::GetItem: return get_item(eval(*e.children[0]), eval(*e.children[1]));
    case ExprKind::Slice: return slice_of(*this, e);
    case ExprKind::Call: return eval_call(e);
    case ExprKind::Filter: return eval_filter(e);
    case ExprKind::Test: return eval_test(e);
  }
  return {};
}

JinjaValue Evaluator::eval_call(const Expr& e) {
  const JinjaValue f = eval(*e.children[0]);
  if (f.is_undefined()) {
    // Say what is missing: `ceil(x)` in a template names ceil, not a NoneType.
    fail_undefined(f);
  }
  if (!f.is_callable()) type_error(an(f) + " is not callable");
  std::vector<JinjaValue> args;
  for (std::size_t i = 1; i < e.children.size(); ++i) args.push_back(eval(*e.children[i]));
  Kwargs kwargs;
  for (const auto& [k, v] : e.kwargs) kwargs.emplace_back(k, eval(*v));
  return call(f, std::move(args), std::move(kwargs));
}

JinjaValue Evaluator::call(const JinjaValue& f, std::vector<JinjaValue> args, Kwargs kwargs) {
  const JinjaCallable& c = f.callable();
  switch (c.kind) {
    case JinjaCallable::Kind::Builtin:
      for (const auto& a : args) defined(a);
      return call_builtin(c.name, args, kwargs);
    case JinjaCallable::Kind::Method:
      for (const auto& a : args) defined(a);
      return call_method(c.self, c.name, args, kwargs);
    case JinjaCallable::Kind::Host:
      for (const auto& a : args) defined(a);
      for (const auto& [k, v] : kwargs) defined(v);
      return call_host(c, std::move(args), std::move(kwargs));
    case JinjaCallable::Kind::Macro:
      return call_macro(c, std::move(args), std::move(kwargs));
  }
  return {};
}

// ---------------------------------------------------------------- built-in functions

namespace {

// One call of a built-in function: its name (for messages) and its evaluated arguments.
struct BuiltinCall {
  Evaluator& ev;
  const std::string& name;
  std::vector<JinjaValue>& args;
  Kwargs& kwargs;
  std::int64_t* budget;  // for range(), which refuses what the loop budget could never run
  std::int64_t limit;

  void expect(std::size_t lo, std::size_t hi) const { expect_args(name, args, lo, hi); }
  const JinjaValue& number(std::size_t i) const {
    if (i >= args.size()) type_error(name + "() needs more arguments");
    if (!args[i].is_number()) type_error(name + "() needs a number, not " + an(args[i]));
    return args[i];
  }
  std::int64_t integer(std::size_t i) const {
    if (i >= args.size()) type_error(name + "() needs more arguments");
    if (!is_integral(args[i])) type_error(name + "() needs an integer, not " + an(args[i]));
    return int_of(args[i]);
  }
  JinjaValue from_double(double d) const {
    if (!std::isfinite(d)) type_error(name + "() of " + JinjaValue(d).str() + " is not an integer");
    return to_int(JinjaValue(d));
  }
};

using Builtin = JinjaValue (*)(const BuiltinCall&);

JinjaValue builtin_range(const BuiltinCall& c) {
  c.expect(1, 3);
  std::int64_t start = 0, stop = 0, step = 1;
  if (c.args.size() == 1) stop = c.integer(0);
  else {
    start = c.integer(0);
    stop = c.integer(1);
    if (c.args.size() == 3) step = c.integer(2);
  }
  if (step == 0) type_error("range() step must not be zero");
  const __int128 span = step > 0 ? __int128{stop} - start : __int128{start} - stop;
  const __int128 count = span <= 0 ? 0 : (span - 1) / (step > 0 ? __int128{step} : -__int128{step}) + 1;
  // A for loop charges its iterations; range() only refuses what could never run.
  if (c.budget && count > *c.budget) throw JinjaError("more than " + std::to_string(c.limit) + " loop iterations in total");
  if (count > static_cast<__int128>(kMaxItems)) type_error("range() of more than " + std::to_string(kMaxItems) + " items");
  JinjaList out;
  for (__int128 k = 0; k < count; ++k) out.emplace_back(static_cast<std::int64_t>(start + k * step));
  return JinjaValue(std::move(out));
}

// The items of dict() and namespace(): a dict or pairs, then the keywords; a later key wins.
JinjaDict dict_items(const BuiltinCall& c) {
  JinjaDict out;
  auto put = [&](JinjaValue k, JinjaValue v) {
    for (auto& [ok, ov] : out)
      if (ok == k) { ov = std::move(v); return; }
    out.emplace_back(std::move(k), std::move(v));
  };
  if (c.args.size() > 1) type_error(c.name + "() takes at most 1 positional argument");
  if (!c.args.empty()) {
    if (c.args[0].is_dict()) {
      for (const auto& [k, v] : c.args[0].dict()) put(k, v);
    } else {
      for (const auto& item : c.ev.iterate(c.args[0])) {
        if (!item.is_sequence() || item.list().size() != 2) type_error(c.name + "() needs pairs");
        put(item.list()[0], item.list()[1]);
      }
    }
  }
  for (const auto& [k, v] : c.kwargs) put(k, v);
  return out;
}

JinjaValue builtin_dict(const BuiltinCall& c) { return JinjaValue(dict_items(c)); }
JinjaValue builtin_namespace(const BuiltinCall& c) { return JinjaValue::make_namespace(dict_items(c)); }

// Python's builtins and math functions (Python expressions only).

// ceil, floor and trunc: an int stays, a float becomes an int.
JinjaValue to_whole(const BuiltinCall& c, double (*whole)(double)) {
  c.expect(1, 1);
  const JinjaValue& x = c.number(0);
  if (is_integral(x)) return int_of(x);
  return c.from_double(whole(x.as_float()));
}

JinjaValue builtin_ceil(const BuiltinCall& c) { return to_whole(c, [](double d) { return std::ceil(d); }); }
JinjaValue builtin_floor(const BuiltinCall& c) { return to_whole(c, [](double d) { return std::floor(d); }); }
JinjaValue builtin_trunc(const BuiltinCall& c) { return to_whole(c, [](double d) { return std::trunc(d); }); }

JinjaValue builtin_abs(const BuiltinCall& c) {
  c.expect(1, 1);
  const JinjaValue& x = c.number(0);
  if (x.is_float()) return std::fabs(x.as_float());
  return int_of(x) < 0 ? sub(0, int_of(x)) : int_of(x);
}

JinjaValue builtin_round(const BuiltinCall& c) {
  c.expect(1, 2);
  const JinjaValue& x = c.number(0);
  if (c.args.size() == 1 || c.args[1].is_none()) {
    if (is_integral(x)) return int_of(x);
    return c.from_double(round_half_even(x.as_float(), 0));
  }
  const std::int64_t digits = c.integer(1);
  if (is_integral(x)) return int_of(x);
  return round_half_even(x.as_float(), digits);
}

// min() and max() of the arguments, or of the items of a single one.
JinjaValue extreme(const BuiltinCall& c, bool min) {
  JinjaList items = c.args.size() == 1 ? c.ev.iterate(c.args[0]) : c.args;
  if (items.empty()) type_error(c.name + "() of an empty sequence");
  JinjaValue best = items[0];
  for (std::size_t i = 1; i < items.size(); ++i)
    if (min ? less_than(items[i], best) : less_than(best, items[i])) best = items[i];
  return best;
}

JinjaValue builtin_min(const BuiltinCall& c) { return extreme(c, true); }
JinjaValue builtin_max(const BuiltinCall& c) { return extreme(c, false); }

// sum() and prod(): `op` over the items, from the argument or keyword `start`.
JinjaValue fold(const BuiltinCall& c, const std::string& op, JinjaValue start) {
  c.expect(1, 2);
  JinjaValue total = arg(c.args, c.kwargs, 1, "start", std::move(start));
  for (const auto& x : c.ev.iterate(c.args[0])) total = binary_op(op, total, x);
  return total;
}

JinjaValue builtin_sum(const BuiltinCall& c) { return fold(c, "+", 0); }
JinjaValue builtin_prod(const BuiltinCall& c) { return fold(c, "*", 1); }

JinjaValue builtin_len(const BuiltinCall& c) {
  c.expect(1, 1);
  const JinjaValue& x = c.args[0];
  if (x.is_string()) return std::int64_t(x.as_string().size());
  if (x.is_sequence()) return std::int64_t(x.list().size());
  if (x.is_dict()) return std::int64_t(x.dict().size());
  type_error(an(x) + " has no len()");
}

JinjaValue builtin_int(const BuiltinCall& c) {
  c.expect(0, 2);
  if (c.args.empty()) return 0;
  return to_int(c.args[0], c.args.size() > 1 ? int(c.integer(1)) : 10);
}

JinjaValue builtin_float(const BuiltinCall& c) {
  c.expect(0, 1);
  return c.args.empty() ? 0.0 : to_float(c.args[0]);
}

JinjaValue builtin_str(const BuiltinCall& c) { return c.args.empty() ? std::string() : c.args[0].str(); }
JinjaValue builtin_bool(const BuiltinCall& c) { return !c.args.empty() && c.args[0].truthy(); }

JinjaValue items_as(const BuiltinCall& c, bool tuple) {
  c.expect(0, 1);
  return JinjaValue(c.args.empty() ? JinjaList{} : c.ev.iterate(c.args[0]), tuple);
}

JinjaValue builtin_list(const BuiltinCall& c) { return items_as(c, false); }
JinjaValue builtin_tuple(const BuiltinCall& c) { return items_as(c, true); }

JinjaValue builtin_pow(const BuiltinCall& c) {
  c.expect(2, 3);
  JinjaValue r = binary_op("**", c.number(0), c.number(1));
  if (c.args.size() == 3) r = binary_op("%", r, c.number(2));
  return r;
}

// |argument i| for gcd() and lcm(); the most negative int64 has none.
std::int64_t magnitude(const BuiltinCall& c, std::size_t i) {
  const std::int64_t x = c.integer(i);
  if (x == std::numeric_limits<std::int64_t>::min()) overflow();
  return std::abs(x);
}

JinjaValue builtin_gcd(const BuiltinCall& c) {
  std::int64_t r = 0;
  for (std::size_t i = 0; i < c.args.size(); ++i) r = std::gcd(r, magnitude(c, i));
  return r;
}

JinjaValue builtin_lcm(const BuiltinCall& c) {
  std::int64_t r = 1;
  for (std::size_t i = 0; i < c.args.size(); ++i) {
    const std::int64_t a = magnitude(c, i);
    if (a == 0 || r == 0) r = 0;
    else r = mul(r / std::gcd(r, a), a);
  }
  return r;
}

JinjaValue builtin_isqrt(const BuiltinCall& c) {
  c.expect(1, 1);
  const std::int64_t x = c.integer(0);
  if (x < 0) type_error("isqrt() of a negative number");
  std::int64_t r = static_cast<std::int64_t>(std::sqrt(double(x)));
  while (r > 0 && static_cast<__int128>(r) * r > x) --r;
  while (static_cast<__int128>(r + 1) * (r + 1) <= x) ++r;
  return r;
}

// n and k of factorial(), comb() and perm(): k is n unless given.
std::pair<std::int64_t, std::int64_t> counts(const BuiltinCall& c, bool takes_k) {
  const std::int64_t n = c.integer(0);
  const std::int64_t k = takes_k && c.args.size() > 1 ? c.integer(1) : n;
  if (n < 0 || k < 0) type_error(c.name + "() of a negative number");
  return {n, k};
}

// n * (n - 1) * ... * (n - k + 1).
JinjaValue falling_factorial(std::int64_t n, std::int64_t k) {
  if (k > n) return 0;
  std::int64_t r = 1;
  for (std::int64_t i = n - k + 1; i <= n; ++i) r = mul(r, i);
  return r;
}

JinjaValue builtin_factorial(const BuiltinCall& c) {
  const auto [n, k] = counts(c, false);
  return falling_factorial(n, k);
}

JinjaValue builtin_perm(const BuiltinCall& c) {
  const auto [n, k] = counts(c, true);
  return falling_factorial(n, k);
}

JinjaValue builtin_comb(const BuiltinCall& c) {
  const auto [n, k] = counts(c, true);
  if (k > n) return 0;
  std::int64_t r = 1;
  const std::int64_t kk = std::min(k, n - k);
  for (std::int64_t i = 1; i <= kk; ++i) {
    __int128 w = static_cast<__int128>(r) * (n - kk + i) / i;
    if (w > std::numeric_limits<std::int64_t>::max()) overflow();
    r = static_cast<std::int64_t>(w);
  }
  return r;
}

// The float functions check their first argument before anything of their own.
double first_float(const BuiltinCall& c) { return float_of(c.number(0)); }

JinjaValue builtin_sqrt(const BuiltinCall& c) {
  const double x = first_float(c);
  if (x < 0) type_error("math domain error: sqrt of a negative number");
  return std::sqrt(x);
}

JinjaValue builtin_exp(const BuiltinCall& c) { return std::exp(first_float(c)); }

double log_argument(const BuiltinCall& c) {
  const double x = first_float(c);
  if (x <= 0) type_error("math domain error: log of a number <= 0");
  return x;
}

JinjaValue builtin_log(const BuiltinCall& c) {
  const double x = log_argument(c);
  if (c.args.size() > 1) return std::log(x) / std::log(float_of(c.number(1)));
  return std::log(x);
}

JinjaValue builtin_log2(const BuiltinCall& c) { return std::log2(log_argument(c)); }
JinjaValue builtin_log10(const BuiltinCall& c) { return std::log10(log_argument(c)); }

JinjaValue builtin_fmod(const BuiltinCall& c) {
  const double x = first_float(c);
  return std::fmod(x, float_of(c.number(1)));
}

JinjaValue builtin_copysign(const BuiltinCall& c) {
  const double x = first_float(c);
  return std::copysign(x, float_of(c.number(1)));
}

JinjaValue builtin_hypot(const BuiltinCall& c) {
  first_float(c);
  double s = 0;
  for (std::size_t i = 0; i < c.args.size(); ++i) s += float_of(c.number(i)) * float_of(c.number(i));
  return std::sqrt(s);
}

constexpr Named<Builtin> kBuiltins[] = {
    {"abs", builtin_abs}, {"bool", builtin_bool}, {"ceil", builtin_ceil}, {"comb", builtin_comb},
    {"copysign", builtin_copysign}, {"dict", builtin_dict}, {"exp", builtin_exp}, {"factorial", builtin_factorial},
    {"float", builtin_float}, {"floor", builtin_floor}, {"fmod", builtin_fmod}, {"gcd", builtin_gcd},
    {"hypot", builtin_hypot}, {"int", builtin_int}, {"isqrt", builtin_isqrt}, {"lcm", builtin_lcm},
    {"len", builtin_len}, {"list", builtin_list}, {"log", builtin_log}, {"log10", builtin_log10},
    {"log2", builtin_log2}, {"max", builtin_max}, {"min", builtin_min}, {"namespace", builtin_namespace},
    {"perm", builtin_perm}, {"pow", builtin_pow}, {"prod", builtin_prod}, {"range", builtin_range},
    {"round", builtin_round}, {"sqrt", builtin_sqrt}, {"str", builtin_str}, {"sum", builtin_sum},
    {"trunc", builtin_trunc}, {"tuple", builtin_tuple},
};
static_assert(sorted_by_name(kBuiltins));

}  // namespace

// Python expressions see every built-in but Jinja's namespace(); Jinja templates only
// its own three globals.
bool is_builtin_global(std::string_view name, bool python_mode) {
  if (python_mode) return name != "namespace" && find_named(kBuiltins, name) != nullptr;
  return name == "range" || name == "dict" || name == "namespace";
}

JinjaValue Evaluator::call_builtin(const std::string& name, std::vector<JinjaValue>& args, Kwargs& kwargs) {
  const BuiltinCall c{*this, name, args, kwargs, budget_, limit_};
  if (const Named<Builtin>* f = find_named(kBuiltins, name)) return f->fn(c);
  first_float(c);  // an unknown name has always failed the float functions' check first
  type_error("unknown function '" + name + "'");
}

// ---------------------------------------------------------------- methods

namespace {

// One call of a method of a dict, list, tuple or string: `self.name(args)`.
struct MethodCall {
  Evaluator& ev;
  const std::string& name;
  const JinjaValue& self;
  std::vector<JinjaValue>& args;
  Kwargs& kwargs;

  void expect(std::size_t lo, std::size_t hi) const { expect_args(name, args, lo, hi); }
};

using Method = JinjaValue (*)(const MethodCall&);

JinjaValue dict_items_method(const MethodCall& c) { return items_of(c.self); }

JinjaValue dict_keys(const MethodCall& c) {
  JinjaList out;
  for (const auto& [k, v] : c.self.dict()) out.push_back(k);
  return JinjaValue(std::move(out));
}

JinjaValue dict_values(const MethodCall& c) {
  JinjaList out;
  for (const auto& [k, v] : c.self.dict()) out.push_back(v);
  return JinjaValue(std::move(out));
}

JinjaValue dict_get(const MethodCall& c) {
  c.expect(1, 2);
  if (const JinjaValue* v = c.self.find(c.args[0])) return *v;
  return c.args.size() > 1 ? c.args[1] : JinjaValue();
}

JinjaValue dict_copy(const MethodCall& c) { return JinjaValue(JinjaDict(c.self.dict())); }

JinjaValue dict_update(const MethodCall& c) {
  JinjaDict& d = c.self.dict();
  JinjaValue other = c.args.empty() ? JinjaValue(JinjaDict{}) : c.args[0];
  JinjaDict incoming = other.is_dict() ? other.dict() : JinjaDict{};
  for (const auto& [k, v] : c.kwargs) incoming.emplace_back(k, v);
  for (const auto& [k, v] : incoming) {
    bool found = false;
    for (auto& [ok, ov] : d)
      if (ok == k) { ov = v; found = true; }
    if (!found) d.emplace_back(k, v);
  }
  return {};
}

JinjaValue dict_pop(const MethodCall& c) {
  c.expect(1, 2);
  JinjaDict& d = c.self.dict();
  for (auto it = d.begin(); it != d.end(); ++it)
    if (it->first == c.args[0]) {
      JinjaValue v = it->second;
      d.erase(it);
      return v;
    }
  if (c.args.size() > 1) return c.args[1];
  type_error("pop(): no key " + c.args[0].repr());
}

JinjaValue dict_setdefault(const MethodCall& c) {
  c.expect(1, 2);
  JinjaDict& d = c.self.dict();
  for (const auto& [k, v] : d)
    if (k == c.args[0]) return v;
  d.emplace_back(c.args[0], c.args.size() > 1 ? c.args[1] : JinjaValue());
  return d.back().second;
}

constexpr Named<Method> kDictMethods[] = {
    {"copy", dict_copy}, {"get", dict_get}, {"items", dict_items_method}, {"keys", dict_keys}, {"pop", dict_pop},
    {"setdefault", dict_setdefault}, {"update", dict_update}, {"values", dict_values},
};
static_assert(sorted_by_name(kDictMethods));

JinjaValue list_index(const MethodCall& c) {
  const JinjaList& l = c.self.list();
  for (std::size_t i = 0; i < l.size(); ++i)
    if (!c.args.empty() && l[i] == c.args[0]) return std::int64_t(i);
  type_error("index(): the item is not in the list");
}

JinjaValue list_count(const MethodCall& c) {
  c.expect(1, 1);
  const JinjaList& l = c.self.list();
  return std::int64_t(std::count(l.begin(), l.end(), c.args[0]));
}

// The list that append, extend and insert grow: a full one refuses before the arguments are checked.
JinjaList& growable(const MethodCall& c) {
  JinjaList& l = c.self.list();
  if (l.size() >= kMaxItems) throw JinjaError("list too long");
  return l;
}

JinjaValue list_append(const MethodCall& c) {
  JinjaList& l = growable(c);
  c.expect(1, 1);
  l.push_back(c.args[0]);
  return {};
}

JinjaValue list_extend(const MethodCall& c) {
  JinjaList& l = growable(c);
  c.expect(1, 1);
  for (auto& x : c.ev.iterate(c.args[0])) l.push_back(std::move(x));
  return {};
}

JinjaValue list_insert(const MethodCall& c) {
  JinjaList& l = growable(c);
  c.expect(2, 2);
  std::int64_t i = to_int(c.args[0]), n = std::int64_t(l.size());
  if (i < 0) i = std::max<std::int64_t>(0, i + n);
  l.insert(l.begin() + std::min(i, n), c.args[1]);
  return {};
}

JinjaValue list_pop(const MethodCall& c) {
  JinjaList& l = c.self.list();
  if (l.empty()) type_error("pop() from an empty list");
  std::int64_t i = c.args.empty() ? -1 : to_int(c.args[0]), n = std::int64_t(l.size());
  if (i < 0) i += n;
  if (i < 0 || i >= n) type_error("pop() index out of range");
  JinjaValue v = l[std::size_t(i)];
  l.erase(l.begin() + i);
  return v;
}

JinjaValue list_remove(const MethodCall& c) {
  JinjaList& l = c.self.list();
  for (auto it = l.begin(); it != l.end(); ++it)
    if (!c.args.empty() && *it == c.args[0]) {
      l.erase(it);
      return {};
    }
  type_error("remove(): the item is not in the list");
}

JinjaValue list_reverse(const MethodCall& c) {
  JinjaList& l = c.self.list();
  std::reverse(l.begin(), l.end());
  return {};
}

JinjaValue list_sort(const MethodCall& c) {
  JinjaList& l = c.self.list();
  std::stable_sort(l.begin(), l.end(), [](const JinjaValue& a, const JinjaValue& b) { return less_than(a, b); });
  if (const JinjaValue* r = kwarg(c.kwargs, "reverse"); r && r->truthy()) std::reverse(l.begin(), l.end());
  return {};
}

JinjaValue list_copy(const MethodCall& c) { return JinjaValue(JinjaList(c.self.list())); }

// Tuples share this table: get_attr offers them only index and count.
constexpr Named<Method> kListMethods[] = {
    {"append", list_append}, {"copy", list_copy}, {"count", list_count}, {"extend", list_extend},
    {"index", list_index}, {"insert", list_insert}, {"pop", list_pop}, {"remove", list_remove},
    {"reverse", list_reverse}, {"sort", list_sort},
};
static_assert(sorted_by_name(kListMethods));

const std::string& str_arg(const MethodCall& c, std::size_t i) {
  if (i >= c.args.size() || !c.args[i].is_string()) type_error(c.name + "() needs a string argument");
  return c.args[i].as_string();
}

JinjaValue str_upper(const MethodCall& c) { return upper(c.self.as_string()); }
JinjaValue str_lower(const MethodCall& c) { return lower(c.self.as_string()); }
JinjaValue str_title(const MethodCall& c) { return title_case(c.self.as_string()); }
JinjaValue str_capitalize(const MethodCall& c) { return capitalize(c.self.as_string()); }

JinjaValue stripped(const MethodCall& c, bool left, bool right) {
  const std::string* chars = !c.args.empty() && c.args[0].is_string() ? &c.args[0].as_string() : nullptr;
  return strip(c.self.as_string(), chars, left, right);
}

JinjaValue str_strip(const MethodCall& c) { return stripped(c, true, true); }
JinjaValue str_lstrip(const MethodCall& c) { return stripped(c, true, false); }
JinjaValue str_rstrip(const MethodCall& c) { return stripped(c, false, true); }

JinjaValue str_split(const MethodCall& c) {
  const JinjaValue sep = arg(c.args, c.kwargs, 0, "sep");
  const std::int64_t max_split = to_int(arg(c.args, c.kwargs, 1, "maxsplit", -1));
  return string_list(split(c.self.as_string(), sep, max_split));
}

JinjaValue str_rsplit(const MethodCall& c) {
  const std::string& s = c.self.as_string();
  const JinjaValue sep = arg(c.args, c.kwargs, 0, "sep");
  const std::int64_t max_split = to_int(arg(c.args, c.kwargs, 1, "maxsplit", -1));
  if (max_split < 0) return string_list(split(s, sep, max_split));
  // Split from the right: split all, then join the leftmost ones back.
  std::vector<std::string> all = split(s, sep, -1);
  if (std::int64_t(all.size()) <= max_split + 1) return string_list(all);
  const std::string joiner = sep.is_none() ? " " : sep.as_string();
  std::string head = all[0];
  const std::size_t keep = all.size() - std::size_t(max_split);
  for (std::size_t i = 1; i < keep; ++i) head += joiner + all[i];
  std::vector<std::string> out{head};
  out.insert(out.end(), all.begin() + std::ptrdiff_t(keep), all.end());
  return string_list(out);
}

JinjaValue str_splitlines(const MethodCall& c) {
  return string_list(split(replace_all(c.self.as_string(), "\r\n", "\n", -1), JinjaValue("\n"), -1));
}

JinjaValue str_join(const MethodCall& c) {
  const std::string& s = c.self.as_string();
  std::string out;
  bool first = true;
  for (const auto& x : c.ev.iterate(arg(c.args, c.kwargs, 0, "iterable"))) {
    if (!x.is_string()) type_error("join() needs strings, not " + an(x));
    out += (first ? "" : s) + x.as_string();
    first = false;
    if (out.size() > kMaxString) throw JinjaError("string too long");
  }
  return out;
}

JinjaValue str_startswith(const MethodCall& c) {
  const std::string& s = c.self.as_string();
  const std::string& p = str_arg(c, 0);
  return p.size() <= s.size() && s.compare(0, p.size(), p) == 0;
}

JinjaValue str_endswith(const MethodCall& c) {
  const std::string& s = c.self.as_string();
  const std::string& p = str_arg(c, 0);
  return p.size() <= s.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

JinjaValue str_replace(const MethodCall& c) {
  return replace_all(c.self.as_string(), str_arg(c, 0), str_arg(c, 1), c.args.size() > 2 ? to_int(c.args[2]) : -1);
}

JinjaValue str_find(const MethodCall& c) {
  const std::size_t hit = c.self.as_string().find(str_arg(c, 0));
  return hit == std::string::npos ? std::int64_t(-1) : std::int64_t(hit);
}

JinjaValue str_index(const MethodCall& c) {
  const std::size_t hit = c.self.as_string().find(str_arg(c, 0));
  if (hit == std::string::npos) type_error("index(): substring not found");
  return std::int64_t(hit);
}

JinjaValue str_count(const MethodCall& c) {
  const std::string& s = c.self.as_string();
  const std::string& p = str_arg(c, 0);
  if (p.empty()) return std::int64_t(characters(s).size() + 1);
  std::int64_t n = 0;
  for (std::size_t pos = s.find(p); pos != std::string::npos; pos = s.find(p, pos + p.size())) ++n;
  return n;
}

// isdigit() and the like: a non-empty string of such characters.
bool all_chars(const MethodCall& c, int (*pred)(int)) {
  const std::string& s = c.self.as_string();
  return !s.empty() && std::all_of(s.begin(), s.end(), [pred](char ch) { return pred(static_cast<unsigned char>(ch)) != 0; });
}

JinjaValue str_isdigit(const MethodCall& c) { return all_chars(c, std::isdigit); }
JinjaValue str_isalpha(const MethodCall& c) { return all_chars(c, std::isalpha); }
JinjaValue str_isalnum(const MethodCall& c) { return all_chars(c, std::isalnum); }

JinjaValue str_isupper(const MethodCall& c) {
  const std::string& s = c.self.as_string();
  return s != lower(s) && s == upper(s);
}

JinjaValue str_islower(const MethodCall& c) {
  const std::string& s = c.self.as_string();
  return s != upper(s) && s == lower(s);
}

JinjaValue str_zfill(const MethodCall& c) {
  const std::string& s = c.self.as_string();
  const std::int64_t width = to_int(arg(c.args, c.kwargs, 0, "width", 0));
  if (width <= std::int64_t(s.size())) return s;
  if (std::size_t(width) > kMaxString) throw JinjaError("string too long");
  const std::size_t sign = !s.empty() && (s[0] == '-' || s[0] == '+');
  return s.substr(0, sign) + std::string(std::size_t(width) - s.size(), '0') + s.substr(sign);
}

JinjaValue str_format(const MethodCall& c) { return python_format(c.self.as_string(), c.args, c.kwargs); }

constexpr Named<Method> kStringMethods[] = {
    {"capitalize", str_capitalize}, {"count", str_count}, {"endswith", str_endswith}, {"find", str_find},
    {"format", str_format}, {"index", str_index}, {"isalnum", str_isalnum}, {"isalpha", str_isalpha},
    {"isdigit", str_isdigit}, {"islower", str_islower}, {"isupper", str_isupper}, {"join", str_join},
    {"lower", str_lower}, {"lstrip", str_lstrip}, {"replace", str_replace}, {"rsplit", str_rsplit},
    {"rstrip", str_rstrip}, {"split", str_split}, {"splitlines", str_splitlines}, {"startswith", str_startswith},
    {"strip", str_strip}, {"title", str_title}, {"upper", str_upper}, {"zfill", str_zfill},
};
static_assert(sorted_by_name(kStringMethods));

// The method `name` of a value of self's kind, or null.
Method find_method(const JinjaValue& self, std::string_view name) {
  const Named<Method>* m = self.is_dict()       ? find_named(kDictMethods, name)
                           : self.is_sequence() ? find_named(kListMethods, name)
                           : self.is_string()   ? find_named(kStringMethods, name)
                                                : nullptr;
  return m ? m->fn : nullptr;
}

}  // namespace

bool has_method(const JinjaValue& self, std::string_view name) { return find_method(self, name) != nullptr; }

JinjaValue Evaluator::call_method(const JinjaValue& self, const std::string& name, std::vector<JinjaValue>& args,
                                  Kwargs& kwargs) {
  if (const Method m = find_method(self, name)) return m(MethodCall{*this, name, self, args, kwargs});
  type_error(an(self) + " has no method '" + name + "'");
}

// ---------------------------------------------------------------- filters and tests

JinjaValue Evaluator::eval_filter(const Expr& e) {
  JinjaValue v = eval(*e.children[0]);
  std::vector<JinjaValue> args;
  for (std::size_t i = 1; i < e.children.size(); ++i) args.push_back(eval(*e.children[i]));
  Kwargs kwargs;
  for (const auto& [k, x] : e.kwargs) kwargs.emplace_back(k, eval(*x));
  return apply_filter(e.name, v, args, kwargs);
}

namespace {

// Free functions, not Evaluator's private members, so that filters (map, select) can call them.
JinjaValue filter_value(Evaluator& ev, const std::string& name, const JinjaValue& v, std::vector<JinjaValue>& args,
                        Kwargs& kwargs);
bool test_value(const std::string& name, const JinjaValue& v, std::vector<JinjaValue>& args);

// One use of a filter, `v | name(args)`.
struct FilterCall {
  Evaluator& ev;
  const std::string& name;
  const JinjaValue& v;
  std::vector<JinjaValue>& args;
  Kwargs& kwargs;
};

using Filter = JinjaValue (*)(const FilterCall&);

JinjaValue filter_default(const FilterCall& c) {
  const JinjaValue fallback = arg(c.args, c.kwargs, 0, "default_value", std::string());
  const bool boolean = arg(c.args, c.kwargs, 1, "boolean", false).truthy();
  if (c.v.is_undefined() || (boolean && !c.v.truthy())) return fallback;
  return c.v;
}

// The min and max filters: the item whose attribute (or itself) is least or greatest.
JinjaValue extreme_item(const FilterCall& c, bool min) {
  const JinjaValue attribute = arg(c.args, c.kwargs, 1, "attribute");
  const bool cs = arg(c.args, c.kwargs, 0, "case_sensitive", false).truthy();
  JinjaList items = c.ev.iterate(c.v);
  if (items.empty()) return JinjaUndefined{c.name, c.name + " of an empty sequence"};
  JinjaValue best = items[0], best_key = attribute_of(c.ev, items[0], attribute);
  for (std::size_t i = 1; i < items.size(); ++i) {
    JinjaValue k = attribute_of(c.ev, items[i], attribute);
    if (min ? less_than(k, best_key, cs) : less_than(best_key, k, cs)) {
      best = items[i];
      best_key = k;
    }
  }
  return best;
}

JinjaValue filter_min(const FilterCall& c) { return extreme_item(c, true); }
JinjaValue filter_max(const FilterCall& c) { return extreme_item(c, false); }

JinjaValue filter_sum(const FilterCall& c) {
  const JinjaValue attribute = arg(c.args, c.kwargs, 0, "attribute");
  JinjaValue total = arg(c.args, c.kwargs, 1, "start", 0);
  for (const auto& x : c.ev.iterate(c.v)) total = binary_op("+", total, attribute_of(c.ev, x, attribute));
  return total;
}

JinjaValue filter_length(const FilterCall& c) {
  if (c.v.is_string()) return std::int64_t(characters(c.v.as_string()).size());
  if (c.v.is_sequence()) return std::int64_t(c.v.list().size());
  if (c.v.is_dict()) return std::int64_t(c.v.dict().size());
  type_error(an(c.v) + " has no length");
}

JinjaValue no_item(const FilterCall& c) {
  return JinjaUndefined{c.name, "the sequence is empty, so it has no " + c.name + " item"};
}

JinjaValue filter_first(const FilterCall& c) {
  JinjaList items = c.ev.iterate(c.v);
  return items.empty() ? no_item(c) : items.front();
}

JinjaValue filter_last(const FilterCall& c) {
  JinjaList items = c.ev.iterate(c.v);
  return items.empty() ? no_item(c) : items.back();
}

JinjaValue filter_int(const FilterCall& c) {
  const JinjaValue fallback = arg(c.args, c.kwargs, 0, "default", 0);
  const int base = int(to_int(arg(c.args, c.kwargs, 1, "base", 10)));
  try {
    if (c.v.is_string()) {
      try {
        return to_int(c.v, base);
      } catch (const JinjaError&) {
        return to_int(JinjaValue(to_float(c.v)));
      }
    }
    return to_int(c.v);
  } catch (const JinjaError&) {
    return fallback;
  }
}

JinjaValue filter_float(const FilterCall& c) {
  try {
    return to_float(c.v);
  } catch (const JinjaError&) {
    return arg(c.args, c.kwargs, 0, "default", 0.0);
  }
}

JinjaValue filter_string(const FilterCall& c) { return c.v.str(); }

JinjaValue filter_abs(const FilterCall& c) {
  static const std::string name = "abs";
  std::vector<JinjaValue> a{c.v};
  Kwargs none;
  return builtin_abs(BuiltinCall{c.ev, name, a, none, nullptr, 0});
}

JinjaValue filter_round(const FilterCall& c) {
  const std::int64_t precision = to_int(arg(c.args, c.kwargs, 0, "precision", 0));
  const std::string method = arg(c.args, c.kwargs, 1, "method", "common").str();
  const double scale = std::pow(10.0, double(precision));
  const double x = to_float(c.v) * scale;
  double r;
  if (method == "common") r = std::nearbyint(x);  // Python's round(): half to even
  else if (method == "ceil") r = std::ceil(x);
  else if (method == "floor") r = std::floor(x);
  else type_error("round: method must be 'common', 'ceil' or 'floor'");
  return r / scale;
}

JinjaValue filter_list(const FilterCall& c) { return JinjaValue(c.ev.iterate(c.v)); }

JinjaValue filter_join(const FilterCall& c) {
  const std::string sep = arg(c.args, c.kwargs, 0, "d", std::string()).str();
  const JinjaValue attribute = arg(c.args, c.kwargs, 1, "attribute");
  std::string out;
  bool first = true;
  for (const auto& x : c.ev.iterate(c.v)) {
    out += (first ? "" : sep) + attribute_of(c.ev, x, attribute).str();
    first = false;
    if (out.size() > kMaxString) throw JinjaError("string too long");
  }
  return out;
}

JinjaValue filter_upper(const FilterCall& c) { return upper(c.v.str()); }
JinjaValue filter_lower(const FilterCall& c) { return lower(c.v.str()); }
JinjaValue filter_capitalize(const FilterCall& c) { return capitalize(c.v.str()); }
JinjaValue filter_title(const FilterCall& c) { return title_case(c.v.str()); }

JinjaValue filter_trim(const FilterCall& c) {
  const JinjaValue chars = arg(c.args, c.kwargs, 0, "chars");
  return strip(c.v.str(), chars.is_string() ? &chars.as_string() : nullptr, true, true);
}

JinjaValue filter_replace(const FilterCall& c) {
  const std::vector<JinjaValue>& args = c.args;
  if (args.size() < 2) type_error("replace needs the old and the new text");
  return replace_all(c.v.str(), args[0].str(), args[1].str(), args.size() > 2 ? to_int(args[2]) : -1);
}

JinjaValue filter_escape(const FilterCall& c) { return html_escape(c.v.str()); }
JinjaValue filter_safe(const FilterCall& c) { return c.v; }

JinjaValue filter_tojson(const FilterCall& c) {
  return to_json(c.v, int(to_int(arg(c.args, c.kwargs, 0, "indent", 0))), 0);
}

JinjaValue filter_items(const FilterCall& c) {
  if (!c.v.is_dict()) type_error("items needs a dict, not " + an(c.v));
  return items_of(c.v);
}

JinjaValue filter_dictsort(const FilterCall& c) {
  if (!c.v.is_dict()) type_error("dictsort needs a dict, not " + an(c.v));
  const bool by_value = arg(c.args, c.kwargs, 1, "by", "key").str() == "value";
  const bool reverse = arg(c.args, c.kwargs, 2, "reverse", false).truthy();
  const bool cs = arg(c.args, c.kwargs, 0, "case_sensitive", false).truthy();
  JinjaList items = items_of(c.v).list();
  std::stable_sort(items.begin(), items.end(), [&](const JinjaValue& a, const JinjaValue& b) {
    return less_than(a.list()[by_value], b.list()[by_value], cs);
  });
  if (reverse) std::reverse(items.begin(), items.end());
  return JinjaValue(std::move(items));
}

JinjaValue filter_sort(const FilterCall& c) {
  const bool reverse = arg(c.args, c.kwargs, 0, "reverse", false).truthy();
  const bool cs = arg(c.args, c.kwargs, 1, "case_sensitive", false).truthy();
  const JinjaValue attribute = arg(c.args, c.kwargs, 2, "attribute");
  JinjaList items = c.ev.iterate(c.v);
  std::stable_sort(items.begin(), items.end(), [&](const JinjaValue& a, const JinjaValue& b) {
    return less_than(attribute_of(c.ev, a, attribute), attribute_of(c.ev, b, attribute), cs);
  });
  if (reverse) std::reverse(items.begin(), items.end());
  return JinjaValue(std::move(items));
}

JinjaValue filter_reverse(const FilterCall& c) {
  if (c.v.is_string()) {
    std::vector<std::string> chars = characters(c.v.as_string());
    std::string out;
    for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
    return out;
  }
  JinjaList items = c.ev.iterate(c.v);
  std::reverse(items.begin(), items.end());
  return JinjaValue(std::move(items));
}

JinjaValue filter_unique(const FilterCall& c) {
  const JinjaValue attribute = arg(c.args, c.kwargs, 1, "attribute");
  JinjaList out, keys;
  for (const auto& x : c.ev.iterate(c.v)) {
    JinjaValue k = attribute_of(c.ev, x, attribute);
    if (!arg(c.args, c.kwargs, 0, "case_sensitive", false).truthy() && k.is_string()) k = lower(k.as_string());
    if (std::find(keys.begin(), keys.end(), k) != keys.end()) continue;
    keys.push_back(k);
    out.push_back(x);
  }
  return JinjaValue(std::move(out));
}

// select, reject, selectattr, rejectattr: the items whose test (or truth) is `keep`.
JinjaValue selected(const FilterCall& c, bool by_attr, bool keep) {
  const std::vector<JinjaValue>& args = c.args;
  std::size_t next = 0;
  JinjaValue attribute;
  if (by_attr) {
    if (args.empty()) type_error(c.name + " needs an attribute");
    attribute = args[next++];
  }
  const std::string test = next < args.size() ? args[next++].str() : "";
  std::vector<JinjaValue> test_args(args.begin() + std::ptrdiff_t(std::min(next, args.size())), args.end());
  JinjaList out;
  for (const auto& x : c.ev.iterate(c.v)) {
    const JinjaValue subject = by_attr ? attribute_of(c.ev, x, attribute) : x;
    const bool pass = test.empty() ? subject.truthy() : test_value(test, subject, test_args);
    if (pass == keep) out.push_back(x);
  }
  return JinjaValue(std::move(out));
}

JinjaValue filter_select(const FilterCall& c) { return selected(c, false, true); }
JinjaValue filter_reject(const FilterCall& c) { return selected(c, false, false); }
JinjaValue filter_selectattr(const FilterCall& c) { return selected(c, true, true); }
JinjaValue filter_rejectattr(const FilterCall& c) { return selected(c, true, false); }

JinjaValue filter_map(const FilterCall& c) {
  JinjaList out;
  if (const JinjaValue* attribute = kwarg(c.kwargs, "attribute")) {
    const JinjaValue* fallback = kwarg(c.kwargs, "default");
    for (const auto& x : c.ev.iterate(c.v)) {
      JinjaValue y = attribute_of(c.ev, x, *attribute);
      out.push_back(y.is_undefined() && fallback ? *fallback : y);
    }
    return JinjaValue(std::move(out));
  }
  if (c.args.empty()) type_error("map needs a filter name or attribute=");
  const std::string filter = c.args[0].str();
  std::vector<JinjaValue> rest(c.args.begin() + 1, c.args.end());
  for (const auto& x : c.ev.iterate(c.v)) {
    std::vector<JinjaValue> a = rest;
    Kwargs k;
    out.push_back(filter_value(c.ev, filter, x, a, k));
  }
  return JinjaValue(std::move(out));
}

JinjaValue filter_attr(const FilterCall& c) { return c.ev.get_attr(c.v, arg(c.args, c.kwargs, 0, "name").str()); }

JinjaValue filter_format(const FilterCall& c) {
  if (c.args.size() == 1) return printf_format(c.v.str(), c.args[0]);
  return printf_format(c.v.str(), JinjaValue(c.args, true));
}

JinjaValue filter_indent(const FilterCall& c) {
  const JinjaValue width = arg(c.args, c.kwargs, 0, "width", 4);
  const bool first = arg(c.args, c.kwargs, 1, "first", false).truthy();
  const bool blank = arg(c.args, c.kwargs, 2, "blank", false).truthy();
  const std::string pad = width.is_string() ? width.as_string() : std::string(std::size_t(std::max<std::int64_t>(0, std::min<std::int64_t>(to_int(width), 1000))), ' ');
  std::vector<std::string> lines = split(c.v.str(), JinjaValue("\n"), -1);
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i) out += "\n";
    const bool is_blank = strip(lines[i], nullptr, true, true).empty();
    if ((i > 0 || first) && (blank || !is_blank)) out += pad;
    out += lines[i];
    if (out.size() > kMaxString) throw JinjaError("string too long");
  }
  return out;
}

JinjaValue filter_wordcount(const FilterCall& c) { return std::int64_t(split(c.v.str(), JinjaValue(), -1).size()); }

JinjaValue filter_center(const FilterCall& c) {
  const std::int64_t width = std::min<std::int64_t>(to_int(arg(c.args, c.kwargs, 0, "width", 80)), 100000);
  const std::string s = c.v.str();
  if (width <= std::int64_t(s.size())) return s;
  const std::size_t total = std::size_t(width) - s.size(), left = total / 2 + (total % 2 && s.size() % 2);
  return std::string(left, ' ') + s + std::string(total - left, ' ');
}

// The count of batch (`linecount`) and slice (`slices`).
std::size_t positive_count(const FilterCall& c, std::string_view keyword) {
  const std::int64_t n = to_int(arg(c.args, c.kwargs, 0, keyword, 1));
  if (n <= 0) type_error(c.name + " needs a positive count");
  return std::size_t(n);
}

JinjaValue filter_batch(const FilterCall& c) {
  const std::size_t n = positive_count(c, "linecount");
  JinjaList items = c.ev.iterate(c.v), out;
  for (std::size_t i = 0; i < items.size(); i += n)
    out.push_back(JinjaValue(JinjaList(items.begin() + std::ptrdiff_t(i),
                                       items.begin() + std::ptrdiff_t(std::min(items.size(), i + n)))));
  return JinjaValue(std::move(out));
}

JinjaValue filter_slice(const FilterCall& c) {
  const std::size_t n = positive_count(c, "slices");
  if (n > kMaxItems) throw JinjaError("slice() into more than " + std::to_string(kMaxItems) + " slices");
  JinjaList items = c.ev.iterate(c.v), out;
  const std::size_t per = items.size() / n, extra = items.size() % n;
  std::size_t at = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t len = per + (k < extra);
    out.push_back(JinjaValue(JinjaList(items.begin() + std::ptrdiff_t(at), items.begin() + std::ptrdiff_t(at + len))));
    at += len;
  }
  return JinjaValue(std::move(out));
}

struct FilterEntry {
  std::string_view name;
  Filter fn;
  bool sees_undefined = false;  // default alone sees undefined values and arguments
};

constexpr FilterEntry kFilters[] = {
    {"abs", filter_abs}, {"attr", filter_attr}, {"batch", filter_batch}, {"capitalize", filter_capitalize},
    {"center", filter_center}, {"count", filter_length}, {"d", filter_default, true},
    {"default", filter_default, true}, {"dictsort", filter_dictsort}, {"e", filter_escape},
    {"escape", filter_escape}, {"first", filter_first}, {"float", filter_float}, {"forceescape", filter_escape},
    {"format", filter_format}, {"indent", filter_indent}, {"int", filter_int}, {"items", filter_items},
    {"join", filter_join}, {"last", filter_last}, {"length", filter_length}, {"list", filter_list},
    {"lower", filter_lower}, {"map", filter_map}, {"max", filter_max}, {"min", filter_min},
    {"reject", filter_reject}, {"rejectattr", filter_rejectattr}, {"replace", filter_replace},
    {"reverse", filter_reverse}, {"round", filter_round}, {"safe", filter_safe}, {"select", filter_select},
    {"selectattr", filter_selectattr}, {"slice", filter_slice}, {"sort", filter_sort}, {"string", filter_string},
    {"sum", filter_sum}, {"title", filter_title}, {"tojson", filter_tojson}, {"trim", filter_trim},
    {"unique", filter_unique}, {"upper", filter_upper}, {"wordcount", filter_wordcount},
};
static_assert(sorted_by_name(kFilters));

const std::vector<std::string>& filter_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const FilterEntry& f : kFilters) out.emplace_back(f.name);
    return out;
  }();
  return names;
}

JinjaValue filter_value(Evaluator& ev, const std::string& name, const JinjaValue& v, std::vector<JinjaValue>& args,
                        Kwargs& kwargs) {
  const FilterEntry* f = find_named(kFilters, name);
  if (!f || !f->sees_undefined) {
    defined(v);
    for (const auto& a : args) defined(a);
    for (const auto& [k, a] : kwargs) defined(a);
  }
  if (!f) type_error("unknown filter '" + name + "'" + did_you_mean(name, filter_names()));
  return f->fn(FilterCall{ev, name, v, args, kwargs});
}

}  // namespace

JinjaValue Evaluator::apply_filter(const std::string& name, const JinjaValue& v, std::vector<JinjaValue>& args,
                                   Kwargs& kwargs) {
  return filter_value(*this, name, v, args, kwargs);
}

JinjaValue Evaluator::eval_test(const Expr& e) {
  JinjaValue v = eval(*e.children[0]);
  std::vector<JinjaValue> args;
  for (std::size_t i = 1; i < e.children.size(); ++i) args.push_back(eval(*e.children[i]));
  for (const auto& [k, x] : e.kwargs) args.push_back(eval(*x));
  return apply_test(e.name, v, args) != e.negated;
}

bool Evaluator::apply_test(const std::string& name, const JinjaValue& v, std::vector<JinjaValue>& args) {
  return test_value(name, v, args);
}

namespace {

// One test's call: the value tested and the test's arguments (all defined, unless the
// test takes undefined values).
struct TestCall {
  const std::string& name;
  const JinjaValue& v;
  std::vector<JinjaValue>& args;
  const JinjaValue& other() const {
    if (args.empty()) type_error("the test '" + name + "' needs an argument");
    return args[0];
  }
};

struct TestEntry {
  std::string_view name;
  bool (*fn)(const TestCall&);
  bool takes_undefined = false;
};

bool test_even_odd(const TestCall& c) {
  if (!is_integral(c.v)) type_error("the test '" + c.name + "' needs an integer");
  return (floor_mod(int_of(c.v), 2) == 0) == (c.name == "even");
}

bool test_divisibleby(const TestCall& c) {
  if (!is_integral(c.v) || !is_integral(c.other())) type_error("divisibleby needs integers");
  return floor_mod(int_of(c.v), int_of(c.other())) == 0;
}

bool test_iterable(const TestCall& c) { return c.v.is_sequence() || c.v.is_string() || c.v.is_dict(); }
bool test_eq(const TestCall& c) { return compare_op("==", c.v, c.other()); }
bool test_ne(const TestCall& c) { return compare_op("!=", c.v, c.other()); }
bool test_lt(const TestCall& c) { return compare_op("<", c.v, c.other()); }
bool test_le(const TestCall& c) { return compare_op("<=", c.v, c.other()); }
bool test_gt(const TestCall& c) { return compare_op(">", c.v, c.other()); }
bool test_ge(const TestCall& c) { return compare_op(">=", c.v, c.other()); }

// Jinja's tests, by name (sorted: a binary search), with the operators' spellings.
constexpr TestEntry kTests[] = {
    {"!=", test_ne},
    {"<", test_lt},
    {"<=", test_le},
    {"==", test_eq},
    {">", test_gt},
    {">=", test_ge},
    {"boolean", [](const TestCall& c) { return c.v.is_bool(); }},
    {"callable", [](const TestCall& c) { return c.v.is_callable(); }},
    {"defined", [](const TestCall& c) { return !c.v.is_undefined(); }, true},
    {"divisibleby", test_divisibleby},
    {"eq", test_eq},
    {"equalto", test_eq},
    {"escaped", [](const TestCall&) { return false; }},
    {"even", test_even_odd},
    {"false", [](const TestCall& c) { return c.v.is_bool() && !c.v.as_bool(); }},
    {"float", [](const TestCall& c) { return c.v.is_float(); }},
    {"ge", test_ge},
    {"greaterthan", test_gt},
    {"gt", test_gt},
    {"in", [](const TestCall& c) { return contains(c.other(), c.v); }},
    {"integer", [](const TestCall& c) { return c.v.is_int(); }},
    {"iterable", test_iterable},
    {"le", test_le},
    {"lessthan", test_lt},
    {"lower", [](const TestCall& c) { return c.v.is_string() && c.v.as_string() == lower(c.v.as_string()); }},
    {"lt", test_lt},
    {"mapping", [](const TestCall& c) { return c.v.is_dict(); }},
    {"ne", test_ne},
    {"none", [](const TestCall& c) { return c.v.is_none(); }},
    {"number", [](const TestCall& c) { return c.v.is_number(); }},
    {"odd", test_even_odd},
    {"sameas", [](const TestCall& c) { return c.v == c.other() && c.v.kind() == c.other().kind(); }},
    {"sequence", test_iterable},
    {"string", [](const TestCall& c) { return c.v.is_string(); }},
    {"true", [](const TestCall& c) { return c.v.is_bool() && c.v.as_bool(); }},
    {"undefined", [](const TestCall& c) { return c.v.is_undefined(); }, true},
    {"upper", [](const TestCall& c) { return c.v.is_string() && c.v.as_string() == upper(c.v.as_string()); }},
};
static_assert(sorted_by_name(kTests));

bool test_value(const std::string& name, const JinjaValue& v, std::vector<JinjaValue>& args) {
  const TestEntry* test = find_named(kTests, name);
  if (!test) {
    std::vector<std::string> names;
    for (const TestEntry& t : kTests)
      if (std::isalpha(static_cast<unsigned char>(t.name[0]))) names.emplace_back(t.name);
    type_error("unknown test '" + name + "'" + did_you_mean(name, names));
  }
  if (!test->takes_undefined) {
    defined(v);
    for (const auto& a : args) defined(a);
  }
  return test->fn(TestCall{name, v, args});
}

}  // namespace

}  // namespace looptrace::jinja
