// tidu/program.hpp - kept for one release: forwards to <tidu/vm/program.hpp>; include that instead.
#pragma once

#include "tidu/vm/program.hpp"
