// Input for preload_programs.py: a moderately sized C++ translation unit
// (standard containers, algorithms, templates) that g++ compiles once on the
// system allocator and once on roost; the object files must be identical.
// It is never run.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <variant>
#include <vector>

namespace inventory {

enum class Category { kTool, kPart, kMaterial, kService };

struct Item {
  std::string sku;
  std::string name;
  Category category = Category::kPart;
  int64_t price_cents = 0;
  int quantity = 0;
  std::vector<std::string> tags;
};

struct Movement {
  std::string sku;
  int delta = 0;
  std::string reason;
};

using Event = std::variant<Item, Movement, std::string>;

class Ledger {
 public:
  void apply(const Event& e) {
    std::visit(
        [this](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, Item>) {
            items_[v.sku] = v;
            for (const auto& t : v.tags) by_tag_[t].insert(v.sku);
          } else if constexpr (std::is_same_v<T, Movement>) {
            auto it = items_.find(v.sku);
            if (it == items_.end()) {
              errors_.push_back("unknown sku " + v.sku);
              return;
            }
            it->second.quantity += v.delta;
            history_[v.sku].push_back(v);
          } else {
            notes_.push_back(v);
          }
        },
        e);
  }

  std::optional<Item> find(const std::string& sku) const {
    auto it = items_.find(sku);
    if (it == items_.end()) return std::nullopt;
    return it->second;
  }

  std::vector<Item> by_tag(const std::string& tag) const {
    std::vector<Item> out;
    auto it = by_tag_.find(tag);
    if (it == by_tag_.end()) return out;
    for (const auto& sku : it->second) out.push_back(items_.at(sku));
    std::sort(out.begin(), out.end(), [](const Item& a, const Item& b) {
      return std::tie(a.category, a.price_cents, a.sku) <
             std::tie(b.category, b.price_cents, b.sku);
    });
    return out;
  }

  int64_t total_value() const {
    return std::accumulate(items_.begin(), items_.end(), int64_t{0},
                           [](int64_t acc, const auto& kv) {
                             return acc + kv.second.price_cents * kv.second.quantity;
                           });
  }

  std::map<Category, std::vector<std::string>> skus_by_category() const {
    std::map<Category, std::vector<std::string>> out;
    for (const auto& [sku, item] : items_) out[item.category].push_back(sku);
    for (auto& [cat, v] : out) std::sort(v.begin(), v.end(), std::greater<>());
    return out;
  }

  std::string report() const {
    std::ostringstream s;
    for (const auto& [sku, item] : items_) {
      s << sku << ' ' << item.name << ' ' << item.quantity << ' ' << item.price_cents;
      auto h = history_.find(sku);
      if (h != history_.end()) {
        s << " [";
        for (const auto& m : h->second) s << m.delta << ':' << m.reason << ';';
        s << ']';
      }
      s << '\n';
    }
    for (const auto& e : errors_) s << "error: " << e << '\n';
    for (const auto& n : notes_) s << "note: " << n << '\n';
    return s.str();
  }

 private:
  std::map<std::string, Item> items_;
  std::unordered_map<std::string, std::set<std::string>> by_tag_;
  std::unordered_map<std::string, std::vector<Movement>> history_;
  std::vector<std::string> errors_;
  std::vector<std::string> notes_;
};

}  // namespace inventory

namespace graph {

template <class Key, class Weight = int64_t>
class Graph {
 public:
  void add_edge(const Key& a, const Key& b, Weight w) {
    adj_[a].emplace_back(b, w);
    adj_[b];
  }

  std::map<Key, Weight> shortest_paths(const Key& from) const {
    std::map<Key, Weight> dist;
    std::set<std::pair<Weight, Key>> frontier;
    dist[from] = 0;
    frontier.insert({0, from});
    while (!frontier.empty()) {
      auto [d, k] = *frontier.begin();
      frontier.erase(frontier.begin());
      auto it = adj_.find(k);
      if (it == adj_.end()) continue;
      for (const auto& [next, w] : it->second) {
        auto found = dist.find(next);
        if (found == dist.end() || d + w < found->second) {
          if (found != dist.end()) frontier.erase({found->second, next});
          dist[next] = d + w;
          frontier.insert({d + w, next});
        }
      }
    }
    return dist;
  }

 private:
  std::map<Key, std::vector<std::pair<Key, Weight>>> adj_;
};

}  // namespace graph

namespace text {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::map<std::string, int> word_counts(const std::string& s) {
  std::map<std::string, int> counts;
  for (auto& w : split(s, ' ')) {
    std::string lower;
    std::transform(w.begin(), w.end(), std::back_inserter(lower),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    lower.erase(std::remove_if(lower.begin(), lower.end(), [](char c) { return !std::isalnum(c); }),
                lower.end());
    if (!lower.empty()) counts[lower]++;
  }
  return counts;
}

std::vector<std::pair<std::string, int>> top_words(const std::string& s, size_t n) {
  auto counts = word_counts(s);
  std::vector<std::pair<std::string, int>> v(counts.begin(), counts.end());
  std::stable_sort(v.begin(), v.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  if (v.size() > n) v.resize(n);
  return v;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); i++) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

}  // namespace text

// Instantiations so that the templates above generate code.
template class graph::Graph<std::string>;

std::string run_everything(const std::string& input) {
  inventory::Ledger ledger;
  int i = 0;
  for (const auto& line : text::split(input, '\n')) {
    auto fields = text::split(line, ',');
    if (fields.size() >= 3) {
      inventory::Item item;
      item.sku = fields[0];
      item.name = fields[1];
      item.price_cents = static_cast<int64_t>(fields[2].size()) * 100 + i;
      item.category = static_cast<inventory::Category>(i % 4);
      item.tags = {fields[1].substr(0, 2), fields[0].substr(0, 1)};
      ledger.apply(item);
      ledger.apply(inventory::Movement{fields[0], i % 7 - 3, "init"});
    } else {
      ledger.apply(line);
    }
    i++;
  }
  graph::Graph<std::string> g;
  auto words = text::split(input, ' ');
  for (size_t k = 1; k < words.size(); k++)
    g.add_edge(words[k - 1], words[k], static_cast<int64_t>(k % 5 + 1));
  std::ostringstream s;
  s << ledger.report() << ledger.total_value() << '\n';
  for (const auto& [w, d] : g.shortest_paths(words.empty() ? "" : words[0]))
    s << w << '=' << d << ' ';
  s << text::join(words, "+") << '\n';
  for (const auto& [w, c] : text::top_words(input, 10)) s << w << ':' << c << '\n';
  return s.str();
}
