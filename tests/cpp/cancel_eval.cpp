// Cancellation from another thread (tidu/vm/cancel.hpp): a program counting c up to its input n
// (tests/backends/test_interrupt.py saves it) is evaluated with n = 1e300, which never ends;
// another thread sets the workspace's cancel_flag, and eval must throw tidu::Cancelled within
// seconds.  The same workspace then gives the right count once the flag is cleared, a flag set
// before eval stops it at once, and eval_batch stops on its flag on every thread.
//   cancel_eval <file.tidu>: prints "cancel_eval: ok" and exits 0, or names what failed.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include <tidu/tidu.hpp>

namespace cancel_eval {


int fail(const char* what) {
  std::printf("cancel_eval: FAIL %s\n", what);
  return 1;
}

using Clock = std::chrono::steady_clock;

// Sets flag after `ms` milliseconds, on a thread of its own; join before flag goes away.
std::thread set_later(std::atomic<bool>& flag, int ms) {
  return std::thread([&flag, ms] {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    flag.store(true);
  });
}


int main(int argc, char** argv) {
  if (argc < 2) return fail("usage: cancel_eval <file.tidu>");
  const tidu::Program prog = tidu::Program::load(argv[1]);
  if (prog.n_inputs() != 1 || prog.n_outputs() != 1) return fail("expected one input and one output");
  tidu::Workspace ws(prog);
  double n = 1e300, out = -1;
  const void* in[] = {&n};
  void* outs[] = {&out};

  // 1. An endless evaluation, cancelled from another thread.
  const auto start = Clock::now();
  std::thread t = set_later(ws.cancel_flag(), 200);
  bool threw = false;
  try {
    prog.eval(ws, in, outs);
  } catch (const tidu::Cancelled&) {
    threw = true;
  }
  t.join();
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  if (!threw) return fail("eval returned instead of throwing tidu::Cancelled");
  if (took > 5) return fail("cancellation took more than 5 s");

  // 2. While the flag is set, eval throws at once; cleared, the workspace is usable again.
  n = 10;
  try {
    prog.eval(ws, in, outs);
    return fail("eval ran with the cancel flag set");
  } catch (const tidu::Cancelled&) {
  }
  ws.cancel_flag().store(false);
  prog.eval(ws, in, outs);
  if (out != 10) return fail("wrong count after a cancelled evaluation");

  // 3. eval_batch: endless points on four threads, one flag stops them all.
  std::vector<double> ns(8, 1e300), res(8, -1);
  const void* bin[] = {ns.data()};
  void* bout[] = {res.data()};
  std::atomic<bool> stop{false};
  std::thread u = set_later(stop, 200);
  threw = false;
  try {
    tidu::eval_batch(prog, 8, bin, bout, 4, true, &stop);
  } catch (const tidu::Cancelled&) {
    threw = true;
  }
  u.join();
  if (!threw) return fail("eval_batch returned instead of throwing tidu::Cancelled");
  for (int i = 0; i < 8; ++i) ns[i] = i;
  stop.store(false);
  tidu::eval_batch(prog, 8, bin, bout, 4, true, &stop);
  for (int i = 0; i < 8; ++i)
    if (res[i] != i) return fail("wrong batch result after a cancelled eval_batch");

  // 4. Load limits: the same file under caps it exceeds is refused.
  try {
    tidu::Program::load(argv[1], tidu::LoadLimits{prog.workspace_bytes - 1, UINT64_MAX});
    return fail("a program over max_bytes loaded");
  } catch (const tidu::ProgramError&) {
  }
  try {
    tidu::Program::load(argv[1], tidu::LoadLimits{UINT64_MAX, prog.total_instructions - 1});
    return fail("a program over max_instructions loaded");
  } catch (const tidu::ProgramError&) {
  }
  tidu::Program::load(argv[1], tidu::LoadLimits{prog.workspace_bytes, prog.total_instructions});
  std::printf("cancel_eval: ok (cancelled after %.2f s)\n", took);
  return 0;
}

}  // namespace cancel_eval
