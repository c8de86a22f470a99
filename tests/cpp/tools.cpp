// The four tools that load and evaluate programs, as one executable: <tidu/tidu.hpp> (the whole
// interpreter, header-only) is compiled once instead of once per tool, which was most of the
// consumer project's build time (four times, release and sanitized). Each tool is its own file
// and namespace, with a `main` of its own; the build links eval_saved, fuzz_load, forge_load and
// cancel_eval to this executable, and the name it is started by picks the tool (or the first
// argument does: `tools eval_saved prog.tidu ...`).
#include <cstdio>
#include <cstring>

#include "cancel_eval.cpp"
#include "eval_saved.cpp"
#include "forge_load.cpp"
#include "fuzz_load.cpp"

namespace {

using Tool = int (*)(int, char**);

Tool find(const char* name) {
  if (std::strcmp(name, "eval_saved") == 0) return eval_saved::main;
  if (std::strcmp(name, "fuzz_load") == 0) return fuzz_load::main;
  if (std::strcmp(name, "forge_load") == 0) return forge_load::main;
  if (std::strcmp(name, "cancel_eval") == 0) return cancel_eval::main;
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  const char* slash = std::strrchr(argv[0], '/');
  if (Tool tool = find(slash ? slash + 1 : argv[0])) return tool(argc, argv);
  if (argc > 1) {
    if (Tool tool = find(argv[1])) return tool(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "usage: tools {eval_saved|fuzz_load|forge_load|cancel_eval} [args...]\n");
  return 2;
}
