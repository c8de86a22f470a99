// tidu/linalg.hpp - kept for one release: forwards to <tidu/kernels/linalg.hpp>; include that instead.
#pragma once

#include "tidu/kernels/linalg.hpp"
