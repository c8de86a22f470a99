// <tidu/tidu.hpp> - evaluate a program saved from Python (prog.save) with no Python:
//
//   auto prog = tidu::Program::load("grad.tidu");   // throws tidu::ProgramError on a bad file
//   tidu::Workspace ws(prog);                      // one per thread; a Program is immutable
//   prog.eval(ws, inputs, outputs);                // const void* const* / void* const*, in order
#pragma once

#include "tidu/fastmath.hpp"
#include "tidu/file.hpp"
#include "tidu/interpreter.hpp"
#include "tidu/opcodes.hpp"
#include "tidu/program.hpp"
#include "tidu/validate.hpp"
