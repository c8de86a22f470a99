// tidu/fastmath.hpp - kept for one release: forwards to <tidu/kernels/fastmath.hpp>; include that instead.
#pragma once

#include "tidu/kernels/fastmath.hpp"
