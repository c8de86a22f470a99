// tidu/gather.hpp - kept for one release: forwards to <tidu/kernels/indexing.hpp>; include that instead.
#pragma once

#include "tidu/kernels/indexing.hpp"
