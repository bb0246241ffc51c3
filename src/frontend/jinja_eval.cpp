// Evaluating Jinja expressions with Python's semantics: operators, attributes and
// items, function calls. Built-ins, methods, filters and tests have their own files.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <numeric>
#include <cstdio>
#include <limits>

#include "jinja_internal.hpp"

namespace looptrace::jinja {

[[noreturn]] void unsupported(const std::string& op, const JinjaValue& a, const JinjaValue& b) {
  type_error("unsupported operand types for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

const JinjaValue* kwarg(const Kwargs& kwargs, std::string_view name) {
  for (const auto& [k, v] : kwargs)
    if (k == name) return &v;
  return nullptr;
}

// Argument `index` or keyword `name`, or `fallback`.
JinjaValue arg(const std::vector<JinjaValue>& args, const Kwargs& kwargs, std::size_t index,
               std::string_view name, JinjaValue fallback) {
  if (index < args.size()) return args[index];
  if (const JinjaValue* v = kwarg(kwargs, name)) return *v;
  return fallback;
}

void expect_args(const std::string& f, const std::vector<JinjaValue>& args, std::size_t lo, std::size_t hi) {
  if (args.size() < lo || args.size() > hi)
    type_error(f + "() takes " + (lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi)) +
               " argument" + (hi == 1 ? "" : "s") + ", not " + std::to_string(args.size()));
}

// Sorting and min/max: numbers with numbers, strings with strings (optionally ignoring
// case), sequences lexicographically.
bool less_than(const JinjaValue& a, const JinjaValue& b, bool case_sensitive) {
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

JinjaValue items_of(const JinjaValue& d) {
  JinjaList out;
  for (const auto& [k, v] : d.dict()) out.push_back(JinjaValue(JinjaList{k, v}, true));
  return JinjaValue(std::move(out));
}

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

}  // namespace looptrace::jinja
