// tidu/opcodes.hpp - kept for one release: forwards to <tidu/vm/opcodes.hpp>; include that instead.
#pragma once

#include "tidu/vm/opcodes.hpp"
