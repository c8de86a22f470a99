// <tidu/tidu.hpp> - evaluate a program saved from Python (prog.save) with no Python:
//
//   auto prog = tidu::Program::load("grad.tidu");   // throws tidu::ProgramError on a bad file
//   tidu::Workspace ws(prog);                      // one per thread; a Program is immutable
//   prog.eval(ws, inputs, outputs);                // const void* const* / void* const*, in order
#pragma once

#include "tidu/kernels/fastmath.hpp"
#include "tidu/vm/file.hpp"
#include "tidu/vm/interpreter.hpp"
#include "tidu/vm/opcodes.hpp"
#include "tidu/vm/program.hpp"
#include "tidu/vm/validate.hpp"
