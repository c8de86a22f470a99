// tidu/ad/rule_cache.hpp - templates of AD rule emissions, recorded once and replayed.
//
// An AD rule (linearize, transpose_rule, cotangent accumulation) is a Python function of its
// call's *shape*: which primitive instance (interned, so attributes and constant data included),
// the operands' abstract values, which tangents/cotangents are present, and which operands are the
// same value.  Given that shape, the nodes it emits differ from call to call only in the values it
// was handed.  So the first call of each shape runs the rule while its fragment logs the ops it
// adds; the log becomes a template whose operands are symbols (the call's values), earlier
// emissions or literals; every later call of that shape replays the template through the same
// FragmentData::add_op, which interns exactly the ops the rule would have (hash-consing makes the
// result id-identical).
//
// A template is only kept when that is provably exact: a value the rule referenced must be one of
// the call's symbols, an earlier emission, or the output of an op with no inputs that existed
// before the rule ran (a constant); an ambiguous match or a declared input makes the call
// unrecordable, and the rule is simply called again next time.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tidu/graph/flat_map.hpp"
#include "tidu/graph/graph.hpp"
#include "tidu/graph/interner.hpp"

namespace tidu {

// Template operand references: tag in the top two bits, index below.
inline constexpr Id kRefSym = 0u << 30;  // the call's symbol i
inline constexpr Id kRefEmit = 1u << 30;  // output number i of the template's emissions (flat)
inline constexpr Id kRefLit = 2u << 30;  // literal i (a global value id)
inline constexpr Id kRefTag = 3u << 30;
inline constexpr Id kRefIdx = ~kRefTag;

// Key kinds: the three kinds of rule call the transforms make.
enum RuleKind : Id { kLinearizeRule = 0, kTransposeRule = 1, kAccumulateRule = 2 };

struct RuleTemplate {
  // Per emission: prim, mode, n_in, n_out, arg refs and output avals (CSR by offsets).
  std::vector<Id> prim, mode;
  std::vector<Id> arg_off{0}, args;
  std::vector<Id> out_off{0}, out_avals;
  std::vector<Id> literals;
  std::vector<Id> results;  // one ref (or kNone) per rule result

  std::size_t n_emit() const { return prim.size(); }
};

// The call shape: kind, prim, mode, symbol avals (kNone for an absent symbol) and the aliasing
// pattern of the symbols (each symbol's first equal symbol).  `sym` holds the call's values.
inline void make_rule_key(const KeyInterner& in, Id kind, Id prim, Id mode, const Id* sym,
                          std::size_t n_sym, std::vector<Id>& key) {
  key.clear();
  key.push_back(kind);
  key.push_back(prim);
  key.push_back(mode);
  key.push_back(static_cast<Id>(n_sym));
  for (std::size_t i = 0; i < n_sym; ++i) key.push_back(sym[i] == kNone ? kNone : in.val(sym[i]).aval);
  for (std::size_t i = 0; i < n_sym; ++i) {
    Id first = kNone;
    if (sym[i] != kNone)
      for (std::size_t j = 0; j <= i; ++j)
        if (sym[j] == sym[i]) {
          first = static_cast<Id>(j);
          break;
        }
    key.push_back(first);
  }
}

struct RuleKeyHash {
  std::size_t operator()(const std::vector<Id>& k) const {
    std::uint64_t h = 0x84222325cbf29ce4ULL;
    for (Id x : k) h = mix64(h ^ (x + 0x9e3779b97f4a7c15ULL));
    return static_cast<std::size_t>(h);
  }
};

// Templates by call shape: an open-addressing table of (hash, template) over keys kept end to
// end in one array, so a look-up hashes the key once and compares it in place (no node, no
// per-key allocation); a template set stays small enough that the table lives in cache.
class RuleCache {
 public:
  const RuleTemplate* find(const std::vector<Id>& key) const {
    if (slots_.empty()) return nullptr;
    const std::uint64_t h = hash(key);
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot& e = slots_[i];
      if (e.t == kNone) return nullptr;
      if (e.h == h && same(e.t, key)) return &templates_[e.t];
    }
  }

  void insert(const std::vector<Id>& key, RuleTemplate t) {
    if (find(key)) return;
    if ((templates_.size() + 1) * 2 > slots_.size()) grow();
    keys_.insert(keys_.end(), key.begin(), key.end());
    key_off_.push_back(keys_.size());
    templates_.push_back(std::move(t));
    place(hash(key), static_cast<Id>(templates_.size() - 1));
  }

  std::size_t size() const { return templates_.size(); }
  void clear() {
    slots_.clear();
    keys_.clear();
    key_off_.assign(1, 0);
    templates_.clear();
  }

  std::size_t hits = 0, misses = 0, unrecordable = 0;

 private:
  struct Slot {
    std::uint64_t h;
    Id t;  // template index, kNone when empty
  };
  static std::uint64_t hash(const std::vector<Id>& k) { return RuleKeyHash{}(k); }
  bool same(Id t, const std::vector<Id>& key) const {
    const std::size_t lo = key_off_[t], hi = key_off_[t + 1];
    return hi - lo == key.size() && std::equal(key.begin(), key.end(), keys_.begin() + lo);
  }
  void place(std::uint64_t h, Id t) {
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = h & mask;
    while (slots_[i].t != kNone) i = (i + 1) & mask;
    slots_[i] = Slot{h, t};
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(std::max<std::size_t>(64, old.size() * 2), Slot{0, kNone});
    for (const Slot& e : old)
      if (e.t != kNone) place(e.h, e.t);
  }

  std::vector<Slot> slots_;
  std::vector<Id> keys_;                 // every key, end to end
  std::vector<std::size_t> key_off_{0};  // template t's key: keys_[key_off_[t] .. key_off_[t + 1])
  std::vector<RuleTemplate> templates_;
};

// Replays t into f for a call with symbol values sym; writes one global value id (or kNone) per
// rule result into results.  `scratch` is reused between calls.
inline void replay_rule(KeyInterner& in, FragmentData& f, const RuleTemplate& t, const Id* sym,
                        Id* results, std::vector<Id>& scratch) {
  scratch.clear();  // global ids of emission outputs, flat
  Id argbuf[16];
  std::vector<Id> big;
  auto resolve = [&](Id ref) -> Id {
    if (ref == kNone) return kNone;
    Id i = ref & kRefIdx;
    switch (ref & kRefTag) {
      case kRefSym: return sym[i];
      case kRefEmit: return scratch[i];
      default: return t.literals[i];
    }
  };
  // Emissions whose inputs are all known now (symbols, literals) have their table slots
  // prefetched, so their misses overlap the interning of the ones before them.
  for (std::size_t e = 1; e < t.n_emit(); ++e) {
    std::size_t n_in = t.arg_off[e + 1] - t.arg_off[e];
    if (n_in > 16) continue;
    bool known = true;
    for (std::size_t k = 0; k < n_in && known; ++k) {
      Id ref = t.args[t.arg_off[e] + k];
      known = ref == kNone || (ref & kRefTag) != kRefEmit;
      if (known) argbuf[k] = resolve(ref);
    }
    if (known) in.prefetch_op(t.prim[e], t.mode[e], argbuf, n_in);
  }
  for (std::size_t e = 0; e < t.n_emit(); ++e) {
    std::size_t n_in = t.arg_off[e + 1] - t.arg_off[e];
    Id* args = argbuf;
    if (n_in > 16) {
      big.resize(n_in);
      args = big.data();
    }
    for (std::size_t k = 0; k < n_in; ++k) args[k] = resolve(t.args[t.arg_off[e] + k]);
    std::size_t n_out = t.out_off[e + 1] - t.out_off[e];
    Id l = f.add_op(in, t.prim[e], t.mode[e], args, n_in, t.out_avals.data() + t.out_off[e], n_out);
    for (std::size_t k = 0; k < n_out; ++k) scratch.push_back(f.vals[l + k]);
  }
  for (std::size_t r = 0; r < t.results.size(); ++r) results[r] = resolve(t.results[r]);
}

// Builds the template of one recorded rule call: `log` holds the ops the rule added to the
// fragment (in order), `results` the global ids it returned, `n_vals_before` the interner size when
// the rule started.  Returns false when the call cannot be replayed exactly.
inline bool record_rule(const KeyInterner& in, const std::vector<Id>& log, const Id* sym,
                        std::size_t n_sym, const Id* results, std::size_t n_res,
                        std::size_t n_vals_before, RuleTemplate& t) {
  IdMap sym_of(2 * n_sym + 2);
  for (std::size_t i = 0; i < n_sym; ++i)
    if (sym[i] != kNone && !sym_of.contains(sym[i])) sym_of.insert(sym[i], static_cast<Id>(i));
  IdMap emit_of(2 * log.size() + 2);
  IdMap lit_of(4);
  Id n_emitted = 0;
  bool ok = true;
  auto ref_of = [&](Id g) -> Id {
    if (g == kNone) return kNone;
    Id s = sym_of.get(g, kNone), e = emit_of.get(g, kNone);
    if (s != kNone && e != kNone) {
      ok = false;  // the same value reached as a symbol and as an emission: ambiguous
      return kNone;
    }
    if (s != kNone) return kRefSym | s;
    if (e != kNone) return kRefEmit | e;
    // A literal: only a constant (an op with no inputs) that existed before the rule ran can be
    // independent of the call's values.
    const ValRec& v = in.val(g);
    if (g >= n_vals_before || v.op == kNone || in.op(v.op).n_in != 0) {
      ok = false;
      return kNone;
    }
    Id l = lit_of.get(g, kNone);
    if (l == kNone) {
      l = static_cast<Id>(t.literals.size());
      t.literals.push_back(g);
      lit_of.insert(g, l);
    }
    return kRefLit | l;
  };
  for (Id o : log) {
    const OpRec& r = in.op(o);
    const Id* a = in.op_inputs(o);
    t.prim.push_back(r.prim);
    t.mode.push_back(r.mode);
    for (std::size_t k = 0; k < r.n_in; ++k) t.args.push_back(ref_of(a[k]));
    t.arg_off.push_back(static_cast<Id>(t.args.size()));
    for (Id k = 0; k < r.n_out; ++k) {
      Id g = r.first_val + k;
      t.out_avals.push_back(in.val(g).aval);
      if (!emit_of.contains(g)) emit_of.insert(g, n_emitted);
      ++n_emitted;
    }
    t.out_off.push_back(static_cast<Id>(t.out_avals.size()));
    if (!ok) return false;
  }
  for (std::size_t i = 0; i < n_res; ++i) t.results.push_back(ref_of(results[i]));
  return ok && n_emitted < kRefIdx;
}

}  // namespace tidu
