// tidu/factor.hpp - kept for one release: forwards to <tidu/kernels/factor.hpp>; include that instead.
#pragma once

#include "tidu/kernels/factor.hpp"
