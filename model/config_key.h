#pragma once
// A config key, declared once: its name, its default (the struct member's own initialiser),
// what it accepts, and one line of help. Everything that reads, writes or checks a config
// goes through the declarations: TOML files and --section.key=value (train/run_config),
// config.json (train/checkpoint), validate(), and the key table in docs/CONFIG.md, which a
// test holds equal to them. model/config.cpp declares the model's keys; train/run/run_config.cpp
// the data, train and sample keys. Adding a key is one declaration beside its member.

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace tinylm {

using ConfigValue = std::variant<bool, int64_t, double, std::string, std::vector<std::string>>;

// The names of an enum's values in the order of the values, as configs spell them: each
// enum E of a config declares, beside it,
//   constexpr std::array<const char*, N> enum_names(E) { return {"a", "b"}; }
// which name_of and enum_from_name find by argument-dependent lookup.
template <class E>
const char* name_of(E value) {
  return enum_names(E{})[static_cast<size_t>(value)];
}

template <class E>
std::optional<E> enum_from_name(std::string_view name) {
  const auto names = enum_names(E{});
  for (size_t i = 0; i < names.size(); ++i) {
    if (name == names[i]) return static_cast<E>(i);
  }
  return std::nullopt;
}

// What a key accepts beyond its type: a range of numbers, a list of names, or a rule. A
// number must be finite whatever its range: NaN and infinity are never a setting.
struct Accepts {
  std::optional<double> min, max;  // numbers; an open end excludes the bound
  bool min_open = false, max_open = false;
  std::vector<std::string> choices;  // strings; empty: any
  std::string rule;                  // said in words; `check` decides
  std::function<bool(const ConfigValue&)> check;

  bool accepts(const ConfigValue& value) const;
  // "must be >= 1", "must be in (0, 1]", "must be one of a, b"; empty when anything goes.
  std::string requirement() const;
  // "[1, inf)", "(0, 1]", "a, b", the rule; for the docs' key table.
  std::string summary() const;
};

Accepts anything();
Accepts at_least(double min);
Accepts above(double min);
// "[lo, hi]", "(lo, hi]", "[lo, hi)" or "(lo, hi)", by `ends`.
Accepts between(double lo, double hi, const char* ends = "[]");
Accepts rule(std::string words, std::function<bool(const ConfigValue&)> check);

// A number as a flag's text gives it, checked: "" when `text` is wholly a number of its kind
// (`whole`: an integer within int64's range; else a finite number) that `accepts` takes;
// otherwise why not, "must be a whole number >= 1 (got "0")".
std::string check_number_text(const Accepts& accepts, const std::string& text, bool whole);

// A value as TOML writes it (strings quoted; floats always with a point or exponent).
std::string config_value_text(const ConfigValue& value);

template <class S>
struct ConfigKey {
  std::string name;  // "n_layer"; with its section ("model.n_layer") once lifted into a run
  std::string help;
  Accepts accepts;
  std::function<ConfigValue(const S&)> get;
  // Takes a value of get()'s alternative; throws std::invalid_argument with the requirement
  // for a name that is not one of an enum's.
  std::function<void(S&, const ConfigValue&)> set;

  // Throws std::invalid_argument "NAME must be ... (got VALUE)" when `config` breaks it.
  void check(const S& config) const {
    const ConfigValue value = get(config);
    if (!accepts.accepts(value)) {
      const std::string requirement = accepts.requirement();
      const double* number = std::get_if<double>(&value);
      const bool finite = !number || std::isfinite(*number);
      throw std::invalid_argument(
          name +
          (finite ? " " + requirement
                  : " must be a finite number" +
                        (requirement.empty() ? "" : ", and " + requirement.substr(8))) +
          " (got " + config_value_text(value) + ")");
    }
  }
};

template <class S, class T>
ConfigKey<S> key(std::string name, T S::*member, Accepts accepts, std::string help) {
  ConfigKey<S> k{std::move(name), std::move(help), std::move(accepts), {}, {}};
  if constexpr (std::is_enum_v<T>) {
    for (const char* n : enum_names(T{})) k.accepts.choices.emplace_back(n);
    k.get = [member](const S& s) -> ConfigValue { return std::string(name_of(s.*member)); };
    k.set = [member, requirement = k.accepts.requirement()](S& s, const ConfigValue& v) {
      const std::string& text = std::get<std::string>(v);
      const std::optional<T> e = enum_from_name<T>(text);
      if (!e) throw std::invalid_argument(requirement + " (got \"" + text + "\")");
      s.*member = *e;
    };
  } else {
    k.get = [member](const S& s) -> ConfigValue { return s.*member; };
    k.set = [member](S& s, const ConfigValue& v) { s.*member = std::get<T>(v); };
  }
  return k;
}

// The keys of a part (the model) as keys of the whole (a run), named "section.key".
template <class Whole, class Part>
std::vector<ConfigKey<Whole>> lift(const std::string& section, Part Whole::*part,
                                   const std::vector<ConfigKey<Part>>& keys) {
  std::vector<ConfigKey<Whole>> out;
  for (const ConfigKey<Part>& k : keys) {
    out.push_back({section + "." + k.name, k.help, k.accepts,
                   [part, get = k.get](const Whole& w) { return get(w.*part); },
                   [part, set = k.set](Whole& w, const ConfigValue& v) { set(w.*part, v); }});
  }
  return out;
}

}  // namespace tinylm
