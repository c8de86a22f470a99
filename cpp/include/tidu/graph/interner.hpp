// tidu/graph/interner.hpp - hash-consed global identity for values and ops.
//
// ValKey = Input(input key, abstract value) | Derived(OpKey, output slot)
// OpKey  = (primitive, mode, input ValKeys)
//
// Both are interned to dense 32-bit ids the moment they are built, so structurally equal nodes are
// the same id (hash-consing) and equality, hashing and CSE are integer operations.  An op's outputs
// get consecutive value ids at creation: Derived(op, slot) is `first_val + slot`, no second table.
//
// Primitives, modes, input keys and abstract values are interned to integers by the caller (the
// Python side owns those hashable objects); this header only sees their ids.  Mode 0 is Primal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "tidu/graph/flat_map.hpp"

namespace tidu {

inline constexpr Id kPrimalMode = 0;

struct ValRec {
  Id op;     // defining op, or kNone for an Input
  Id index;  // output slot (Derived) or input key id (Input)
  Id aval;   // abstract value id (shape + dtype), owned by the caller
};

struct OpRec {
  Id prim;
  Id mode;
  Id in_begin;  // offset into KeyInterner::op_inputs
  std::uint16_t n_in;
  std::uint16_t n_out;
  Id first_val;  // value id of output slot 0; slot k is first_val + k
};

class KeyInterner {
 public:
  KeyInterner() : table_(1024, kEmpty), input_table_(64, kNone) {}

  // ---- construction ----

  // The value Input(key) with abstract value aval (the same key at another shape is another value).
  Id intern_input(Id key, Id aval) {
    if ((n_inputs_ + 1) * 2 > input_table_.size()) grow(input_table_);
    std::size_t mask = input_table_.size() - 1;
    for (std::size_t i = input_hash(key, aval) & mask;; i = (i + 1) & mask) {
      Id v = input_table_[i];
      if (v == kNone) {
        Id id = next_val_id(1);
        vals_.push_back(ValRec{kNone, key, aval});
        input_table_[i] = id;
        ++n_inputs_;
        return id;
      }
      if (vals_[v].index == key && vals_[v].aval == aval) return v;
    }
  }

  // The op (prim, mode, inputs); creates it and its n_out output values if new.
  // out_avals gives the abstract value of each output (used only when the op is new).
  Id intern_op(Id prim, Id mode, const Id* in, std::size_t n_in, const Id* out_avals,
               std::size_t n_out, bool* created = nullptr) {
    if (n_in > 0xFFFF || n_out == 0 || n_out > 0xFFFF)
      throw std::invalid_argument("tidu: op arity out of range");
    for (std::size_t k = 0; k < n_in; ++k)
      if (in[k] >= vals_.size()) throw std::out_of_range("tidu: op input is not an interned value");
    if ((ops_.size() + 1) * 2 > table_.size()) grow_ops();
    std::uint64_t h = op_hash(prim, mode, in, n_in);
    std::uint64_t tag = h & 0xFFFFFFFF00000000ULL;  // compared before touching the op record
    std::size_t mask = table_.size() - 1;
    for (std::size_t i = h >> shift_;; i = (i + 1) & mask) {
      std::uint64_t e = table_[i];
      if (e == kEmpty) {
        Id id = static_cast<Id>(ops_.size());
        if (id == kNone) throw std::length_error("tidu: op id space exhausted");
        Id first = next_val_id(n_out);
        ops_.push_back(OpRec{prim, mode, static_cast<Id>(op_inputs_.size()),
                             static_cast<std::uint16_t>(n_in), static_cast<std::uint16_t>(n_out),
                             first});
        op_inputs_.insert(op_inputs_.end(), in, in + n_in);
        for (std::size_t k = 0; k < n_out; ++k)
          vals_.push_back(ValRec{id, static_cast<Id>(k), out_avals[k]});
        table_[i] = tag | id;
        if (created) *created = true;
        return id;
      }
      Id o = static_cast<Id>(e);
      if ((e & 0xFFFFFFFF00000000ULL) == tag && op_equal(ops_[o], prim, mode, in, n_in)) {
        if (created) *created = false;
        return o;
      }
    }
  }

  // ---- look-up ----

  // Starts loading the table slot intern_op(prim, mode, in, n_in, ...) will probe first: a caller
  // that knows several ops ahead overlaps their cache misses (the table outgrows the caches).
  void prefetch_op(Id prim, Id mode, const Id* in, std::size_t n_in) const {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(table_.data() + (op_hash(prim, mode, in, n_in) >> shift_));
#else
    (void)prim, (void)mode, (void)in, (void)n_in;
#endif
  }

  std::size_t n_vals() const { return vals_.size(); }
  std::size_t n_ops() const { return ops_.size(); }
  const ValRec& val(Id v) const { return vals_[v]; }
  const OpRec& op(Id o) const { return ops_[o]; }
  const Id* op_inputs(Id o) const { return op_inputs_.data() + ops_[o].in_begin; }
  bool is_input(Id v) const { return vals_[v].op == kNone; }

  // ---- reclaiming ----

  // Drops every value with id >= n_vals and every op with id >= n_ops (the newest ones: ids are
  // handed out in order), and rebuilds both hash tables from what remains, sized to it, giving
  // the memory back.  The kept part must be closed: each kept op's outputs are kept values and
  // each kept derived value's op is a kept op (std::invalid_argument otherwise, nothing changed).
  // truncate(0, 0) empties the interner.  The caller guarantees that nothing still uses a dropped
  // id (tidu.graph.memory: no fragment, walk or program made since is alive).
  void truncate(std::size_t n_vals, std::size_t n_ops) {
    if (n_vals > vals_.size() || n_ops > ops_.size())
      throw std::out_of_range("tidu: truncate beyond the interner's size");
    if (n_ops > 0 && ops_[n_ops - 1].first_val + std::size_t{ops_[n_ops - 1].n_out} > n_vals)
      throw std::invalid_argument("tidu: truncate would keep an op but drop its outputs");
    for (std::size_t v = 0; v < n_vals; ++v)
      if (vals_[v].op != kNone && vals_[v].op >= n_ops)
        throw std::invalid_argument("tidu: truncate would keep a value but drop its op");
    const std::size_t n_in = n_ops ? ops_[n_ops - 1].in_begin + std::size_t{ops_[n_ops - 1].n_in} : 0;
    shrink(vals_, n_vals);
    shrink(ops_, n_ops);
    shrink(op_inputs_, n_in);
    std::size_t size = 1024;
    while ((n_ops + 1) * 2 > size) size *= 2;
    HugeVector<std::uint64_t>(size, kEmpty).swap(table_);
    shift_ = 64;
    for (std::size_t s = size; s > 1; s >>= 1) --shift_;
    const std::size_t mask = size - 1;
    for (std::size_t o = 0; o < n_ops; ++o) {
      const OpRec& r = ops_[o];
      std::uint64_t h = op_hash(r.prim, r.mode, op_inputs_.data() + r.in_begin, r.n_in);
      std::size_t i = h >> shift_;
      while (table_[i] != kEmpty) i = (i + 1) & mask;
      table_[i] = (h & 0xFFFFFFFF00000000ULL) | o;
    }
    n_inputs_ = 0;
    for (std::size_t v = 0; v < n_vals; ++v) n_inputs_ += vals_[v].op == kNone;
    std::size_t isize = 64;
    while ((n_inputs_ + 1) * 2 > isize) isize *= 2;
    std::vector<Id>(isize, kNone).swap(input_table_);
    for (std::size_t v = 0; v < n_vals; ++v) {
      if (vals_[v].op != kNone) continue;
      std::size_t i = input_hash(vals_[v].index, vals_[v].aval) & (isize - 1);
      while (input_table_[i] != kNone) i = (i + 1) & (isize - 1);
      input_table_[i] = static_cast<Id>(v);
    }
  }

  std::size_t memory_bytes() const {
    return vals_.capacity() * sizeof(ValRec) + ops_.capacity() * sizeof(OpRec) +
           op_inputs_.capacity() * sizeof(Id) + table_.capacity() * sizeof(std::uint64_t) +
           input_table_.capacity() * sizeof(Id);
  }

 private:
  Id next_val_id(std::size_t n) {
    if (vals_.size() + n >= kNone) throw std::length_error("tidu: value id space exhausted");
    return static_cast<Id>(vals_.size());
  }

  template <class V>
  static void shrink(V& v, std::size_t n) {  // resize to n and give the spare capacity back
    V kept(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n));
    v.swap(kept);
  }

  static std::uint64_t input_hash(Id key, Id aval) {
    return mix64((static_cast<std::uint64_t>(key) << 32) ^ aval ^ 0x9e3779b97f4a7c15ULL);
  }

  static std::uint64_t op_hash(Id prim, Id mode, const Id* in, std::size_t n_in) {
    std::uint64_t h = mix64((static_cast<std::uint64_t>(prim) << 32) | mode);
    for (std::size_t k = 0; k < n_in; ++k) h = mix64(h ^ (in[k] + 0x9e3779b97f4a7c15ULL * (k + 1)));
    return h;
  }

  bool op_equal(const OpRec& r, Id prim, Id mode, const Id* in, std::size_t n_in) const {
    if (r.prim != prim || r.mode != mode || r.n_in != n_in) return false;
    const Id* mine = op_inputs_.data() + r.in_begin;
    for (std::size_t k = 0; k < n_in; ++k)
      if (mine[k] != in[k]) return false;
    return true;
  }

  static constexpr std::uint64_t kEmpty = ~0ULL;

  void grow(std::vector<Id>& table) {
    std::vector<Id> bigger(table.size() * 2, kNone);
    std::size_t mask = bigger.size() - 1;
    for (Id x : table) {
      if (x == kNone) continue;
      std::size_t i = input_hash(vals_[x].index, vals_[x].aval) & mask;
      while (bigger[i] != kNone) i = (i + 1) & mask;
      bigger[i] = x;
    }
    table.swap(bigger);
  }

  // An op's slot comes from the top bits of its hash, which its entry keeps as the tag, so doubling
  // the table places every entry from the entry alone: no op record is read (a cache miss each).
  void grow_ops() {
    HugeVector<std::uint64_t> bigger(table_.size() * 2, kEmpty);
    std::size_t mask = bigger.size() - 1;
    --shift_;
    for (std::uint64_t e : table_) {
      if (e == kEmpty) continue;
      std::size_t i = e >> shift_;
      while (bigger[i] != kEmpty) i = (i + 1) & mask;
      bigger[i] = e;
    }
    table_.swap(bigger);
  }

  HugeVector<ValRec> vals_;
  HugeVector<OpRec> ops_;
  HugeVector<Id> op_inputs_;
  HugeVector<std::uint64_t> table_;  // open addressing: (hash tag << 32) | op id
  unsigned shift_ = 64 - 10;  // slot of hash h: h >> shift_ (table_ has 2^(64 - shift_) entries)
  std::vector<Id> input_table_;  // open addressing over input value ids
  std::size_t n_inputs_ = 0;
};

}  // namespace tidu
