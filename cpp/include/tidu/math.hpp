// tidu/math.hpp - kept for one release: forwards to <tidu/kernels/math.hpp>; include that instead.
#pragma once

#include "tidu/kernels/math.hpp"
