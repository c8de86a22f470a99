// Uses the embeddable graph core with no Python: hash-consing, fragments, walk and compile.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <tidu/graph.hpp>
#include <tidu/interner.hpp>

#define CHECK(cond)                                                  \
  do {                                                               \
    if (!(cond)) {                                                   \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__,    \
                   __LINE__, #cond);                                 \
      return EXIT_FAILURE;                                           \
    }                                                                \
  } while (0)

int main() {
  using tidu::Id;
  tidu::KeyInterner in;
  const Id kMul = 1, kExp = 2, kAval = 0, kLinearFixedActive = 1;

  tidu::FragmentData frag;
  Id x = in.intern_input(/*key=*/10, kAval);
  Id a = in.intern_input(/*key=*/11, kAval);
  frag.add_input(in, x);
  frag.add_input(in, a);
  Id args[2] = {a, x};
  Id mul_local = frag.add_op(in, kMul, tidu::kPrimalMode, args, 2, &kAval, 1);
  Id mul = frag.vals[mul_local];
  Id exp_local = frag.add_op(in, kExp, tidu::kPrimalMode, &mul, 1, &kAval, 1);
  Id y = frag.vals[exp_local];

  // Hash-consing: the same structure is the same id; mode is part of identity.
  bool created = true;
  Id mul_op_again = in.intern_op(kMul, tidu::kPrimalMode, args, 2, &kAval, 1, &created);
  CHECK(!created);
  CHECK(in.op(mul_op_again).first_val == mul);
  Id lin_op = in.intern_op(kMul, kLinearFixedActive, args, 2, &kAval, 1, &created);
  CHECK(created);
  CHECK(in.op(lin_op).first_val != mul);
  CHECK(in.intern_input(10, kAval) == x);
  CHECK(in.intern_input(10, /*another aval*/ 1) != x);

  // Walk and compile: inputs, then Mul, then Exp, in SSA slots.
  tidu::View view({&frag});
  tidu::Reachable r;
  CHECK(tidu::topo_walk(in, view, &y, 1, r) == tidu::kNone);
  CHECK(r.ops.size() == 2 && r.inputs.size() == 2);
  tidu::SSAProgram p;
  tidu::compile_ssa(in, r.vals, r.ops, r.inputs, &y, 1, p);
  CHECK(p.instr_prim.size() == 2 && p.instr_prim[0] == kMul && p.instr_prim[1] == kExp);
  CHECK(p.output_slots.size() == 1 && p.output_slots[0] == 3);

  // A value no fragment of the view defines is reported, not followed.
  Id lin_val = in.op(lin_op).first_val;
  tidu::Reachable r2;
  CHECK(tidu::topo_walk(in, view, &lin_val, 1, r2) == lin_val);

  // Growth past the huge-page block size (2 MiB: the tables and records move to blocks from
  // HugePageAllocator): 300,000 distinct ops keep their ids, found again without being created.
  std::vector<Id> made;
  for (Id k = 0; k < 300000; ++k) {
    Id chain[2] = {k % 2 ? x : a, k == 0 ? y : in.op(made.back()).first_val};
    made.push_back(in.intern_op(kMul, tidu::kPrimalMode, chain, 2, &kAval, 1, &created));
    CHECK(created);
  }
  CHECK(in.memory_bytes() > (std::size_t{4} << 20));
  for (Id k = 0; k < 300000; k += 997) {
    Id chain[2] = {k % 2 ? x : a, k == 0 ? y : in.op(made[k - 1]).first_val};
    CHECK(in.intern_op(kMul, tidu::kPrimalMode, chain, 2, &kAval, 1, &created) == made[k]);
    CHECK(!created);
  }

  // Dense windows: ids far below the bulk (an old constant) stay out of the window, and the
  // sets and maps built over a window still hold them.
  std::vector<Id> ids = {5, 1000000, 1000001, 1000003, 7};
  auto [lo, hi] = tidu::dense_window(ids.begin(), ids.end());
  CHECK(lo == 1000000 && hi == 1000003);
  tidu::IdBitset set(lo, hi);
  for (Id v : ids) set.insert(v);
  for (Id v : ids) CHECK(set.contains(v));
  CHECK(!set.contains(6) && !set.contains(1000002) && !set.contains(999999));
  tidu::RangeMap env(lo, hi, ids.size());
  for (Id v : ids) env.set(v, v + 1);
  for (Id v : ids) CHECK(env.get(v) == v + 1);
  CHECK(env.get(6) == tidu::kNone);

  std::puts("core_identity: ok");
  return EXIT_SUCCESS;
}
