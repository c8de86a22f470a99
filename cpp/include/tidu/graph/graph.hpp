// tidu/graph/graph.hpp - fragments, resolved views, materialize_merge and compile to SSA.
//
// A fragment owns local values and ops (by global id) and refers to others by global id; an op
// input is Local when the fragment defines that value, External otherwise.  A view indexes the
// values its fragments define; every walk here is iterative, so graph depth costs heap, not stack.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tidu/graph/flat_map.hpp"
#include "tidu/graph/interner.hpp"

namespace tidu {

// ---- fragment ----

struct FragmentData {
  std::vector<Id> vals;     // local value id -> global value id
  std::vector<Id> ops;      // local op id -> global op id
  std::vector<Id> inputs;   // local value ids of the fragment's inputs
  std::vector<Id> outputs;  // local value ids of the fragment's outputs
  IdMap local;              // global value id -> local value id
  // While an AD rule runs on a template miss: the ops it adds, in order (tidu/rule_cache.hpp),
  // and whether it declared an input (which no template can replay).
  std::vector<Id>* log = nullptr;
  bool log_input = false;

  Id local_of(Id v) const { return local.get(v, kNone); }

  // Declares Input(v) as an input of this fragment; returns its local id.
  Id add_input(const KeyInterner& in, Id v) {
    if (!in.is_input(v)) throw std::invalid_argument("tidu: add_input needs an Input value");
    if (log) log_input = true;
    Id existing = local.get(v, kNone);
    if (existing != kNone) return existing;
    Id l = static_cast<Id>(vals.size());
    vals.push_back(v);
    local.insert(v, l);
    inputs.push_back(l);
    return l;
  }

  // Interns the op and makes it local (if it is not already); returns the local id of slot 0.
  Id add_op(KeyInterner& in, Id prim, Id mode, const Id* args, std::size_t n_in,
            const Id* out_avals, std::size_t n_out) {
    Id o = in.intern_op(prim, mode, args, n_in, out_avals, n_out);
    if (log) log->push_back(o);
    const OpRec& r = in.op(o);
    Id existing = local.get(r.first_val, kNone);
    if (existing != kNone) return existing;
    Id l = static_cast<Id>(vals.size());
    ops.push_back(o);
    for (Id k = 0; k < r.n_out; ++k) {
      vals.push_back(r.first_val + k);
      local.insert(r.first_val + k, l + k);
    }
    return l;
  }

  std::size_t memory_bytes() const {
    return (vals.capacity() + ops.capacity() + inputs.capacity() + outputs.capacity()) * sizeof(Id) +
           local.memory_bytes();
  }
};

// ---- resolve ----

// A logical view over fragments: which values and ops they define.  No node is copied.
struct View {
  std::vector<const FragmentData*> frags;
  Id val_lo = kNone, val_hi = 0;  // dense windows of the defined values and ops (empty: lo > hi)
  Id op_lo = kNone, op_hi = 0;
  IdBitset def;  // defined values

  explicit View(std::vector<const FragmentData*> fs) : frags(std::move(fs)) {
    // The dense windows of the defined values and ops (an old constant's id is an outlier).
    std::vector<Id> all;
    for (const FragmentData* f : frags) all.insert(all.end(), f->vals.begin(), f->vals.end());
    std::tie(val_lo, val_hi) = dense_window(all.begin(), all.end());
    all.clear();
    for (const FragmentData* f : frags) all.insert(all.end(), f->ops.begin(), f->ops.end());
    std::tie(op_lo, op_hi) = dense_window(all.begin(), all.end());
    def = val_lo <= val_hi ? IdBitset(val_lo, val_hi) : IdBitset();
    for (const FragmentData* f : frags)
      for (Id v : f->vals) def.insert(v);
  }

  bool defines(Id v) const { return def.contains(v); }
};

// ---- traversal ----

// The reachable subgraph of a view from `outputs`, in one topological order.
struct Reachable {
  std::vector<Id> vals;    // every reachable value (inputs and all op outputs), topological
  std::vector<Id> ops;     // reachable ops, topological
  std::vector<Id> inputs;  // reachable Input values, in order of appearance
};

// Walks the view from outputs (iterative post-order DFS).  Returns kNone on success, or the id of
// the first reachable value that no fragment of the view defines (a dangling External reference).
inline Id topo_walk(const KeyInterner& in, const View& view, const Id* outputs, std::size_t n_out,
                    Reachable& out) {
  // Every value placed is defined by the view and every op placed defines one: the seen-sets
  // are bitsets over the view's windows (its few outliers hashed).
  IdBitset seen = view.val_lo <= view.val_hi ? IdBitset(view.val_lo, view.val_hi) : IdBitset();
  IdBitset op_seen = view.op_lo <= view.op_hi ? IdBitset(view.op_lo, view.op_hi) : IdBitset();
  std::vector<std::pair<Id, bool>> stack;
  for (std::size_t i = n_out; i-- > 0;) stack.emplace_back(outputs[i], false);
  while (!stack.empty()) {
    auto [v, expanded] = stack.back();
    stack.pop_back();
    if (v >= in.n_vals()) return v;
    const ValRec& rec = in.val(v);
    if (!expanded) {
      if (seen.contains(v)) continue;
      if (!view.defines(v)) return v;
      if (rec.op == kNone) {
        seen.insert(v);
        out.vals.push_back(v);
        out.inputs.push_back(v);
        continue;
      }
      if (op_seen.contains(rec.op)) continue;
      stack.emplace_back(v, true);
      const OpRec& op = in.op(rec.op);
      const Id* args = in.op_inputs(rec.op);
      for (std::size_t k = op.n_in; k-- > 0;)
        if (!seen.contains(args[k])) stack.emplace_back(args[k], false);
    } else {
      if (op_seen.contains(rec.op)) continue;
      op_seen.insert(rec.op);
      out.ops.push_back(rec.op);
      const OpRec& op = in.op(rec.op);
      for (Id k = 0; k < op.n_out; ++k) {
        seen.insert(op.first_val + k);
        out.vals.push_back(op.first_val + k);
      }
    }
  }
  return kNone;
}

// Forward activity over a topological op list: a value is active when it is a seed or an active
// input of an op that propagates (the caller marks non-differentiable abstract values).
// Returns, per op in `ops`, a bit mask word list: active[i] = 1 when any input is active.
inline void forward_activity(const KeyInterner& in, const std::vector<Id>& ops, const Id* seeds,
                             std::size_t n_seeds, const std::uint8_t* nondiff_aval,
                             std::size_t n_avals, FlatMap32& active) {
  for (std::size_t i = 0; i < n_seeds; ++i) active.insert(seeds[i], 1);
  for (Id o : ops) {
    const OpRec& r = in.op(o);
    const Id* args = in.op_inputs(o);
    bool any = false;
    for (std::size_t k = 0; k < r.n_in && !any; ++k) any = active.contains(args[k]);
    if (!any) continue;
    for (Id k = 0; k < r.n_out; ++k) {
      Id a = in.val(r.first_val + k).aval;
      if (a < n_avals && nondiff_aval[a]) continue;
      active.insert(r.first_val + k, 1);
    }
  }
}

// ---- compile ----

// SSA form of a materialized graph: slot i holds value vals[i] and is written exactly once.
struct SSAProgram {
  std::vector<Id> slot_aval;    // per slot
  std::vector<Id> instr_prim;   // per instruction
  std::vector<Id> instr_mode;   // per instruction
  std::vector<Id> in_off;       // CSR offsets into in_slots (n_instr + 1)
  std::vector<Id> in_slots;
  std::vector<Id> out_off;      // CSR offsets into out_slots (n_instr + 1)
  std::vector<Id> out_slots;
  std::vector<Id> input_slots;
  std::vector<Id> output_slots;
  std::vector<Id> canon;        // normalised structure: the program-cache key
};

inline void compile_ssa(const KeyInterner& in, const std::vector<Id>& vals, const std::vector<Id>& ops,
                        const std::vector<Id>& inputs, const Id* outputs, std::size_t n_out,
                        SSAProgram& p) {
  // value id -> slot: an array over the values' dense window, a hash map for the few ids below
  // it (dense_window, RangeMap).
  const auto [lo, hi] = dense_window(vals.begin(), vals.end());
  RangeMap slot_of(lo, hi, vals.size());
  p.slot_aval.reserve(vals.size());
  for (std::size_t i = 0; i < vals.size(); ++i) {
    slot_of.set(vals[i], static_cast<Id>(i));
    p.slot_aval.push_back(in.val(vals[i]).aval);
  }
  auto slot = [&](Id v) {
    Id s = slot_of.get(v, kNone);
    if (s == kNone) throw std::logic_error("tidu: value missing from materialized graph");
    return s;
  };
  std::size_t n_args = 0;
  for (Id o : ops) n_args += in.op(o).n_in;
  p.instr_prim.reserve(ops.size());
  p.instr_mode.reserve(ops.size());
  p.in_slots.reserve(n_args);
  p.out_slots.reserve(vals.size());
  p.in_off.reserve(ops.size() + 1);
  p.out_off.reserve(ops.size() + 1);
  p.in_off.push_back(0);
  p.out_off.push_back(0);
  for (Id o : ops) {
    const OpRec& r = in.op(o);
    p.instr_prim.push_back(r.prim);
    p.instr_mode.push_back(r.mode);
    const Id* args = in.op_inputs(o);
    for (std::size_t k = 0; k < r.n_in; ++k) p.in_slots.push_back(slot(args[k]));
    for (Id k = 0; k < r.n_out; ++k) p.out_slots.push_back(slot(r.first_val + k));
    p.in_off.push_back(static_cast<Id>(p.in_slots.size()));
    p.out_off.push_back(static_cast<Id>(p.out_slots.size()));
  }
  for (Id v : inputs) p.input_slots.push_back(slot(v));
  for (std::size_t i = 0; i < n_out; ++i) p.output_slots.push_back(slot(outputs[i]));

  // Input keys never enter the canonical form (only slot positions do), so graphs that differ
  // only in input names or pass ids share one key.
  auto& c = p.canon;
  c.reserve(4 + vals.size() + 3 * ops.size() + p.in_slots.size() + p.out_slots.size() +
            inputs.size() + n_out);
  c.push_back(static_cast<Id>(vals.size()));
  c.insert(c.end(), p.slot_aval.begin(), p.slot_aval.end());
  c.push_back(static_cast<Id>(ops.size()));
  for (std::size_t i = 0; i < ops.size(); ++i) {
    c.push_back(p.instr_prim[i]);
    c.push_back(p.instr_mode[i]);
    c.push_back(p.in_off[i + 1] - p.in_off[i]);
    c.insert(c.end(), p.in_slots.begin() + p.in_off[i], p.in_slots.begin() + p.in_off[i + 1]);
  }
  c.push_back(static_cast<Id>(inputs.size()));
  c.insert(c.end(), p.input_slots.begin(), p.input_slots.end());
  c.push_back(static_cast<Id>(n_out));
  c.insert(c.end(), p.output_slots.begin(), p.output_slots.end());
}

}  // namespace tidu
