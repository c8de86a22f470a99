// tidu/sort_scan.hpp - kept for one release: forwards to <tidu/kernels/sorting.hpp>; include that instead.
#pragma once

#include "tidu/kernels/sorting.hpp"
