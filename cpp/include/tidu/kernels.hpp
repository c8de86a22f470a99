// tidu/kernels.hpp - kept for one release: forwards to <tidu/kernels/elementwise.hpp>; include that instead.
#pragma once

#include "tidu/kernels/elementwise.hpp"
