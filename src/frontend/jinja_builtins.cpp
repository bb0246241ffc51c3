// Built-in functions: Jinja's range, dict and namespace; Python's builtins and math
// functions (Python expressions only).
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
JinjaValue fold(const BuiltinCall& c, BinaryOp op, JinjaValue start) {
  c.expect(1, 2);
  JinjaValue total = arg(c.args, c.kwargs, 1, "start", std::move(start));
  for (const auto& x : c.ev.iterate(c.args[0])) total = binary_op(op, total, x);
  return total;
}

JinjaValue builtin_sum(const BuiltinCall& c) { return fold(c, BinaryOp::Add, 0); }
JinjaValue builtin_prod(const BuiltinCall& c) { return fold(c, BinaryOp::Mul, 1); }

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
  JinjaValue r = binary_op(BinaryOp::Pow, c.number(0), c.number(1));
  if (c.args.size() == 3) r = binary_op(BinaryOp::Mod, r, c.number(2));
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

JinjaValue builtin_abs_of(Evaluator& ev, const JinjaValue& v) {
  static const std::string name = "abs";
  std::vector<JinjaValue> a{v};
  Kwargs none;
  return builtin_abs(BuiltinCall{ev, name, a, none, nullptr, 0});
}

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

}  // namespace looptrace::jinja
