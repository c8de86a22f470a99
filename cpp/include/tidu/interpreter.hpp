// tidu/interpreter.hpp - kept for one release: forwards to <tidu/vm/interpreter.hpp>; include that instead.
#pragma once

#include "tidu/vm/interpreter.hpp"
