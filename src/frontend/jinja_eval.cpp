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
  return compare_op(CompareOp::Lt, a, b);
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

namespace {

// Python's floor division and modulo of floats, as divmod computes them.
JinjaValue float_floor_div_mod(double x, double y, bool mod) {
  if (y == 0) throw JinjaError("division by zero");
  double m = std::fmod(x, y);
  if (m != 0 && ((m < 0) != (y < 0))) m += y;
  if (mod) return m;
  return std::floor((x - m) / y + 0.5);  // exact floor division
}

JinjaValue op_add(const JinjaValue& a, const JinjaValue& b) {
  if (a.is_number() && b.is_number()) {
    if (is_integral(a) && is_integral(b)) return add(int_of(a), int_of(b));
    return float_of(a) + float_of(b);
  }
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
  unsupported("+", a, b);
}

JinjaValue op_sub(const JinjaValue& a, const JinjaValue& b) {
  if (a.is_number() && b.is_number()) {
    if (is_integral(a) && is_integral(b)) return sub(int_of(a), int_of(b));
    return float_of(a) - float_of(b);
  }
  unsupported("-", a, b);
}

// A string, list or tuple repeated n times.
JinjaValue repeated(const JinjaValue& seq, std::int64_t n) {
  if (seq.is_string()) return repeat(seq.as_string(), n);
  JinjaList out;
  if (n > 0 && !seq.list().empty()) {
    if (static_cast<std::size_t>(n) > kMaxItems / seq.list().size()) throw JinjaError("list too long");
    for (std::int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.list().begin(), seq.list().end());
  }
  return JinjaValue(std::move(out), seq.is_tuple());
}

JinjaValue op_mul(const JinjaValue& a, const JinjaValue& b) {
  if (a.is_number() && b.is_number()) {
    if (is_integral(a) && is_integral(b)) return mul(int_of(a), int_of(b));
    return float_of(a) * float_of(b);
  }
  const JinjaValue* seq = a.is_string() || a.is_sequence() ? &a : b.is_string() || b.is_sequence() ? &b : nullptr;
  const JinjaValue* count = seq == &a ? &b : &a;
  if (seq && is_integral(*count)) return repeated(*seq, int_of(*count));
  unsupported("*", a, b);
}

JinjaValue op_div(const JinjaValue& a, const JinjaValue& b) {
  if (a.is_number() && b.is_number()) {
    const double y = float_of(b);
    if (y == 0) throw JinjaError("division by zero");
    return float_of(a) / y;
  }
  unsupported("/", a, b);
}

JinjaValue op_floor_div(const JinjaValue& a, const JinjaValue& b) {
  if (a.is_number() && b.is_number()) {
    if (is_integral(a) && is_integral(b)) return floor_div(int_of(a), int_of(b));
    return float_floor_div_mod(float_of(a), float_of(b), false);
  }
  unsupported("//", a, b);
}

JinjaValue op_mod(const JinjaValue& a, const JinjaValue& b) {
  if (a.is_number() && b.is_number()) {
    if (is_integral(a) && is_integral(b)) return floor_mod(int_of(a), int_of(b));
    return float_floor_div_mod(float_of(a), float_of(b), true);
  }
  if (a.is_string()) return printf_format(a.as_string(), b);
  unsupported("%", a, b);
}

JinjaValue op_pow(const JinjaValue& a, const JinjaValue& b) {
  if (a.is_number() && b.is_number()) {
    if (is_integral(a) && is_integral(b)) {
      const std::int64_t x = int_of(a), y = int_of(b);
      if (y >= 0) return int_pow(x, y);
      if (x == 0) throw JinjaError("0 cannot be raised to a negative power");
      return std::pow(double(x), double(y));
    }
    const double x = float_of(a), y = float_of(b);
    if (x == 0 && y < 0) throw JinjaError("0 cannot be raised to a negative power");
    return std::pow(x, y);
  }
  unsupported("**", a, b);
}

JinjaValue op_concat(const JinjaValue& a, const JinjaValue& b) {
  std::string s = a.str() + b.str();
  if (s.size() > kMaxString) throw JinjaError("string too long");
  return s;
}

template <class F>
struct Operator {
  std::string_view spelling;
  F fn;
};

// Indexed by BinaryOp.
constexpr Operator<JinjaValue (*)(const JinjaValue&, const JinjaValue&)> kBinary[] = {
    {"+", op_add}, {"-", op_sub},         {"*", op_mul},  {"/", op_div},
    {"//", op_floor_div}, {"%", op_mod}, {"**", op_pow}, {"~", op_concat},
};

bool op_eq(const JinjaValue& a, const JinjaValue& b) { return a == b; }
bool op_ne(const JinjaValue& a, const JinjaValue& b) { return !(a == b); }
bool op_in(const JinjaValue& a, const JinjaValue& b) { return contains(b, a); }
bool op_not_in(const JinjaValue& a, const JinjaValue& b) { return !contains(b, a); }

// <, <=, >, >=: numbers with numbers, strings with strings, sequences of one kind
// item by item.
template <CompareOp Op>
bool ordered(const JinjaValue& a, const JinjaValue& b) {
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
    if (i < x.size() && i < y.size()) return compare_op(Op, x[i], y[i]);
    c = x.size() < y.size() ? -1 : x.size() > y.size();
  } else {
    type_error("'" + std::string(spelling(Op)) + "' is not supported between " + an(a) + " and " + an(b));
  }
  if constexpr (Op == CompareOp::Lt) return c < 0;
  else if constexpr (Op == CompareOp::Le) return c <= 0;
  else if constexpr (Op == CompareOp::Gt) return c > 0;
  else return c >= 0;
}

// Indexed by CompareOp.
constexpr Operator<bool (*)(const JinjaValue&, const JinjaValue&)> kCompare[] = {
    {"==", op_eq},
    {"!=", op_ne},
    {"<", ordered<CompareOp::Lt>},
    {"<=", ordered<CompareOp::Le>},
    {">", ordered<CompareOp::Gt>},
    {">=", ordered<CompareOp::Ge>},
    {"in", op_in},
    {"not in", op_not_in},
};

JinjaValue op_plus(const JinjaValue& v) { return v.is_bool() ? JinjaValue(int_of(v)) : v; }
JinjaValue op_minus(const JinjaValue& v) { return v.is_float() ? JinjaValue(-v.as_float()) : JinjaValue(sub(0, int_of(v))); }

// Indexed by UnaryOp.
constexpr Operator<JinjaValue (*)(const JinjaValue&)> kUnary[] = {{"+", op_plus}, {"-", op_minus}};

static_assert(std::size(kBinary) == std::size_t(BinaryOp::Concat) + 1);
static_assert(std::size(kCompare) == std::size_t(CompareOp::NotIn) + 1);
static_assert(std::size(kUnary) == std::size_t(UnaryOp::Minus) + 1);

// The operator of `table` spelled `text`: the parser resolves each operator once.
template <class Op, class E, std::size_t N>
Op resolve(const E (&table)[N], std::string_view text) {
  for (std::size_t i = 0; i < N; ++i)
    if (table[i].spelling == text) return static_cast<Op>(i);
  throw JinjaError("unknown operator '" + std::string(text) + "'");
}

}  // namespace

BinaryOp binary_op_of(std::string_view text) { return resolve<BinaryOp>(kBinary, text); }
CompareOp compare_op_of(std::string_view text) { return resolve<CompareOp>(kCompare, text); }
UnaryOp unary_op_of(std::string_view text) { return resolve<UnaryOp>(kUnary, text); }
std::string_view spelling(BinaryOp op) { return kBinary[std::size_t(op)].spelling; }
std::string_view spelling(CompareOp op) { return kCompare[std::size_t(op)].spelling; }
std::string_view spelling(UnaryOp op) { return kUnary[std::size_t(op)].spelling; }

JinjaValue binary_op(BinaryOp op, const JinjaValue& a_, const JinjaValue& b_) {
  const JinjaValue& a = defined(a_);
  const JinjaValue& b = defined(b_);
  return kBinary[std::size_t(op)].fn(a, b);
}

bool compare_op(CompareOp op, const JinjaValue& a_, const JinjaValue& b_) {
  const JinjaValue& a = defined(a_);
  const JinjaValue& b = defined(b_);
  return kCompare[std::size_t(op)].fn(a, b);
}

JinjaValue unary_op(UnaryOp op, const JinjaValue& v_) {
  const JinjaValue& v = defined(v_);
  if (!v.is_number()) type_error("bad operand type for unary " + std::string(spelling(op)) + ": '" + v.type_name() + "'");
  return kUnary[std::size_t(op)].fn(v);
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
    case ExprKind::Unary: return unary_op(e.unary, eval(*e.children[0]));
    case ExprKind::Binary: return binary_op(e.binary, eval(*e.children[0]), eval(*e.children[1]));
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
