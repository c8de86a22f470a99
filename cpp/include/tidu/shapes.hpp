// tidu/shapes.hpp - kept for one release: forwards to <tidu/kernels/shapes.hpp>; include that instead.
#pragma once

#include "tidu/kernels/shapes.hpp"
